//! One launch path for scopes and captures (`launch::plan`): a captured launch computes what
//! the same launch computes in a scope, is refused with the same error, and keeps its
//! attributes (a cluster, a cooperative launch) in the graph. A module of
//! `tests/graphs.rs`, which lists these tests.

use cuda_brand::{
    ContextGuard, DeviceAttribute, DeviceBuffer, Error, ErrorCode, In, Kernel, LaunchConfig,
    Module, Out,
};

use crate::common;

const PTX: &str = include_str!("../kernels/graphs.ptx");
/// `kernels/launch_ex.cu` for sm_90: cluster_info, cluster_info_fixed, grid_sum, empty_ex.
const LAUNCH_EX_PTX: &str = include_str!("../../kernels/launch_ex_sm90.ptx");
const N: usize = 4096;

/// `affine_u32` of `tests/kernels/graphs.cu`: y = a * x + b.
type Affine<'m, 'ctx> = Kernel<'m, 'ctx, (In<u32>, Out<u32>, u32, u32)>;

fn affine<'m, 'ctx>(module: &'m Module<'ctx>) -> Result<Affine<'m, 'ctx>, Error> {
    // SAFETY: affine_u32(const unsigned*, size_t, unsigned*, size_t, unsigned, unsigned)
    // writes only y[i] for i below both lengths, and no global.
    unsafe { module.kernel("affine_u32") }
}

/// Loads the sm_90 kernels; skips the test on a device or driver without clusters
/// (compute capability 9.0, CUDA 11.8), whose refusal `tests/modules.rs` checks.
fn launch_ex_module(ctx: ContextGuard<'_>) -> Module<'_> {
    let cc = ctx.device().unwrap().compute_capability().unwrap();
    let driver = cuda_brand::driver_version().unwrap();
    if cc.major < 9 || driver < 11080 {
        common::skip(format!(
            "kernels/launch_ex_sm90.ptx and clusters need compute capability 9.0 and a CUDA \
             11.8 driver; this is {cc} with {driver}"
        ));
    }
    Module::from_ptx(ctx, LAUNCH_EX_PTX).unwrap()
}

/// The same kernel, configuration and arguments, launched in a scope and captured then
/// replayed, write the same values, element by element, and the values are right.
pub fn a_captured_launch_and_a_scope_launch_of_the_same_kernel_give_the_same_result() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let affine = affine(&module)?;
        let host: Vec<u32> = (0..N as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let x = ctx.from_slice(&host)?;
        let (mut by_scope, mut by_graph) = (ctx.zeroed::<u32>(N)?, ctx.zeroed::<u32>(N)?);
        let config = LaunchConfig::linear(4, 256);
        let stream = ctx.new_stream()?;
        stream.scope(|s| s.launch(&affine, config, (&x, &mut by_scope, 3u32, 1u32)))?;
        let (graph, key) = ctx.capture(|g| {
            let (y, key) = g.lend_mut(&mut by_graph);
            g.launch(&affine, config, (&x, y, 3u32, 1u32))?;
            Ok::<_, Error>(key)
        })?;
        assert_eq!(graph.node_count()?, 1);
        let mut exec = graph.instantiate()?;
        let before = exec.device(key).to_vec()?;
        assert!(before.iter().all(|&v| v == 0), "nothing ran at capture");
        stream.scope(|s| exec.launch(s))?;
        drop(exec);
        let (scoped, replayed) = (by_scope.to_vec()?, by_graph.to_vec()?);
        for (i, &v) in host.iter().enumerate() {
            let want = v.wrapping_mul(3).wrapping_add(1);
            assert_eq!((scoped[i], replayed[i]), (want, want), "element {i}");
        }
        Ok(())
    });
}

/// The errors of one launch of `$kernel` with `$config` in a scope of `$stream` and in a
/// capture of `$ctx`, its arguments `$args` made from `$x`, the view of `$buf` each binds.
macro_rules! refused_in_both {
    ($ctx:expr, $stream:expr, $buf:expr, $kernel:expr, $config:expr, |$x:ident| $args:expr) => {{
        let in_scope = $stream
            .scope(|s| {
                let $x = s.bind_mut(&mut $buf);
                s.launch($kernel, $config, $args)
            })
            .unwrap_err();
        let in_capture = $ctx
            .capture(|g| {
                let $x = g.bind_mut(&mut $buf);
                g.launch($kernel, $config, $args)
            })
            .map(|_| ())
            .unwrap_err();
        (in_scope, in_capture)
    }};
}

/// A launch refused before the driver (a block too large, an `Out` overlapping an `In`) is
/// refused with the same call, code and detail in a scope and in a capture, which then
/// makes no graph; nothing runs.
pub fn a_refused_launch_reads_the_same_in_a_scope_and_in_a_capture() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let affine = affine(&module)?;
        let mut x = ctx.zeroed::<u32>(N)?;
        let stream = ctx.new_stream()?;
        let parts = |e: &Error| {
            (
                e.call(),
                e.code(),
                e.detail().map(str::to_owned),
                e.invalid().cloned(),
            )
        };
        // a block of 2048 threads
        let too_large = LaunchConfig::linear(1, 2048);
        let (in_scope, in_capture) = refused_in_both!(ctx, stream, x, &affine, too_large, |x| (
            x.slice(..N / 2),
            x.slice(N / 2..),
            3u32,
            1u32
        ));
        assert_eq!(in_scope.code(), ErrorCode::InvalidInput, "{in_scope}");
        assert!(in_scope.to_string().contains("more threads"), "{in_scope}");
        assert_eq!(parts(&in_scope), parts(&in_capture));
        // the output overlaps the input
        let config = LaunchConfig::linear(4, 256);
        let (in_scope, in_capture) = refused_in_both!(ctx, stream, x, &affine, config, |x| (
            x.slice(1..),
            x.slice(..N - 1),
            3u32,
            1u32
        ));
        assert!(in_scope.to_string().contains("overlap"), "{in_scope}");
        assert_eq!(parts(&in_scope), parts(&in_capture));
        assert!(x.to_vec()?.iter().all(|&v| v == 0), "nothing ran");
        Ok(())
    });
}

/// A captured cluster launch keeps its clusters: replayed, every block sees the rank,
/// cluster size and cluster index the same launch gives in a scope (and the explicit
/// cluster flag), for clusters of 2 and of 4; a cluster shape that does not divide the grid
/// is refused in the capture as in a scope, and makes no graph.
pub fn a_captured_cluster_launch_keeps_its_clusters() {
    common::in_context(|ctx| {
        let module = launch_ex_module(ctx);
        // SAFETY: cluster_info(unsigned*, size_t) writes out[4b..4b+4] below out_len only.
        let info = unsafe { module.kernel::<(Out<u32>,)>("cluster_info") }?;
        let blocks = 8u32;
        let stream = ctx.new_stream()?;
        for c in [2u32, 4] {
            let config = LaunchConfig::linear(blocks, 32).with_cluster([c, 1, 1]);
            let mut by_scope = DeviceBuffer::<u32>::zeroed(ctx, 4 * blocks as usize)?;
            let mut by_graph = DeviceBuffer::<u32>::zeroed(ctx, 4 * blocks as usize)?;
            stream.scope(|s| s.launch(&info, config, (&mut by_scope,)))?;
            let exec = ctx
                .capture(|g| g.launch(&info, config, (&mut by_graph,)))?
                .0
                .instantiate()?;
            stream.scope(|s| exec.launch(s))?;
            drop(exec);
            let (scoped, replayed) = (by_scope.to_vec()?, by_graph.to_vec()?);
            for b in 0..blocks as usize {
                let expected = [b as u32 % c, c, b as u32 / c, 1];
                assert_eq!(
                    &scoped[4 * b..4 * b + 4],
                    expected,
                    "scope, block {b}, cluster {c}"
                );
                assert_eq!(
                    &replayed[4 * b..4 * b + 4],
                    expected,
                    "graph, block {b}, cluster {c}"
                );
            }
        }
        let mut out = DeviceBuffer::<u32>::zeroed(ctx, 4 * 6)?;
        let uneven = LaunchConfig::linear(6, 32).with_cluster([4, 1, 1]);
        let e = ctx
            .capture(|g| g.launch(&info, uneven, (&mut out,)))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidClusterSize, "{e}");
        assert_eq!(
            e.detail(),
            Some(
                "the grid [6, 1, 1] is not a whole number of clusters [4, 1, 1]: each grid \
                 dimension must be a multiple of the cluster's"
            )
        );
        Ok(())
    });
}

/// A captured cooperative launch stays cooperative: `grid_sum`, which writes nothing unless
/// its grid can synchronize, replayed twice writes every block's sum and the total, for
/// the largest grid that fits at once and a small one; an update to a plain capture of it
/// is refused and the graph handed back still cooperative (CUDA 12.0 drivers); one block
/// more than fits is refused in the capture (`CooperativeLaunchTooLarge`, as in a scope),
/// which makes no graph.
pub fn a_captured_cooperative_launch_synchronizes_its_whole_grid() {
    common::in_context(|ctx| {
        let module = launch_ex_module(ctx);
        // SAFETY: grid_sum(const unsigned*, size_t, unsigned*, size_t) reads in[i < in_len],
        // writes out[b < out_len] only, and synchronizes the grid only when launched
        // cooperatively (`is_valid()`), returning at once otherwise.
        let sum = unsafe { module.kernel::<(In<u32>, Out<u32>)>("grid_sum") }?;
        let sms = ctx
            .device()?
            .attribute(DeviceAttribute::MultiprocessorCount)? as u32;
        let per_sm = sum
            .function()
            .max_active_blocks_per_multiprocessor(256, 0)?;
        let fit = sms * per_sm;
        let stream = ctx.new_stream()?;
        for blocks in [fit, 3] {
            let n = blocks as usize * 256;
            let input: Vec<u32> = (0..n as u32).map(|i| i % 1000).collect();
            let din = ctx.from_slice(&input)?;
            let mut out = ctx.from_slice(&vec![7u32; blocks as usize + 1])?;
            let config = LaunchConfig::linear(blocks, 256).with_cooperative();
            let exec = ctx
                .capture(|g| g.launch(&sum, config, (&din, &mut out)))?
                .0
                .instantiate()?;
            stream.scope(|s| {
                exec.launch(s)?;
                exec.launch(s)
            })?;
            drop(exec);
            let out = out.to_vec()?;
            for b in 0..blocks as usize {
                let part: u32 = input[256 * b..256 * (b + 1)].iter().sum();
                assert_eq!(out[b], part, "block {b} of {blocks}");
            }
            let total = input.iter().sum::<u32>();
            assert_eq!(out[blocks as usize], total, "{blocks} blocks");
        }
        if cuda_brand::driver_version()? >= 12000 {
            a_cooperative_node_is_not_updated_to_a_plain_one(ctx, &sum)?;
        }
        let din = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
        let mut out = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
        let too_many = LaunchConfig::linear(fit + 1, 256).with_cooperative();
        let e = ctx
            .capture(|g| g.launch(&sum, too_many, (&din, &mut out)))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::CooperativeLaunchTooLarge, "{e}");
        Ok(())
    });
}

/// `ExecGraph::update` of a cooperative `grid_sum` node to a plain one: the driver refuses
/// it (`GraphExecUpdateFailure`), the graph comes back unchanged, and a replay still
/// synchronizes its grid.
fn a_cooperative_node_is_not_updated_to_a_plain_one<'ctx>(
    ctx: ContextGuard<'ctx>,
    sum: &Kernel<'_, 'ctx, (In<u32>, Out<u32>)>,
) -> Result<(), Error> {
    let input: Vec<u32> = (0..3 * 256).collect();
    let din = ctx.from_slice(&input)?;
    let (mut out, mut other) = (ctx.zeroed::<u32>(4)?, ctx.zeroed::<u32>(4)?);
    let config = LaunchConfig::linear(3, 256);
    let exec = ctx
        .capture(|g| g.launch(sum, config.with_cooperative(), (&din, &mut out)))?
        .0
        .instantiate()?;
    let (plain, ()) = ctx.capture(|g| g.launch(sum, config, (&din, &mut other)))?;
    let refused = exec.update_or_keep(plain).unwrap_err();
    assert_eq!(
        refused.error().code(),
        ErrorCode::GraphExecUpdateFailure,
        "{refused}"
    );
    let exec = refused.into_exec().expect("handed back unchanged");
    ctx.new_stream()?.scope(|s| exec.launch(s))?;
    drop(exec);
    let out = out.to_vec()?;
    let parts: Vec<u32> = input.chunks(256).map(|c| c.iter().sum()).collect();
    assert_eq!(out[..3], parts[..]);
    assert_eq!(out[3], input.iter().sum::<u32>());
    Ok(())
}
