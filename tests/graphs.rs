//! Graphs (capture, instantiate, replay, update) and host functions on a real GPU. Skips
//! without a device; fails instead with `CUDA_BRAND_REQUIRE_GPU=1`.
//!
//! The kernels are `tests/kernels/graphs.cu` (PTX committed next to it).

use crate::common;
#[path = "graphs/host_fns.rs"]
mod host_fns;
#[path = "graphs/launch_plan.rs"]
mod launch_plan;

use host_fns::*;
use launch_plan::*;

use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cuda_brand::{
    ContextGuard, DeviceBuffer, Error, ErrorCode, In, Kernel, LaunchConfig, Module, Out,
    PinnedBuffer, Stream,
};

const PTX: &str = include_str!("kernels/graphs.ptx");
const N: usize = 4096;

/// The test kernels of `tests/kernels/graphs.cu`.
struct Kernels<'m, 'ctx> {
    affine: Kernel<'m, 'ctx, (In<u32>, Out<u32>, u32, u32)>,
    add: Kernel<'m, 'ctx, (In<u32>, In<u32>, Out<u32>)>,
    square: Kernel<'m, 'ctx, (Out<u32>,)>,
    set: Kernel<'m, 'ctx, (Out<u32>, u32)>,
    spin: Kernel<'m, 'ctx, (u64,)>,
}

fn kernels<'m, 'ctx>(module: &'m Module<'ctx>) -> Result<Kernels<'m, 'ctx>, Error> {
    // SAFETY: the C signatures of tests/kernels/graphs.cu, each parameter list as declared
    // here (a slice is pointer and count); every kernel stays below the counts it is given,
    // writes only its non-const slices and no global.
    unsafe {
        Ok(Kernels {
            affine: module.kernel("affine_u32")?,
            add: module.kernel("add_u32")?,
            square: module.kernel("square_u32")?,
            set: module.kernel("set_u32")?,
            spin: module.kernel("spin_cycles")?,
        })
    }
}

fn config() -> LaunchConfig {
    LaunchConfig::linear(16, 256)
}

/// What the captured pipeline computes from `x`: y = 3x + 1, z = x + y, z = z * z.
fn pipeline(x: u32) -> u32 {
    let z = x.wrapping_add(x.wrapping_mul(3).wrapping_add(1));
    z.wrapping_mul(z)
}

/// A captured pipeline (copy in, three dependent kernels, copy out) replayed 1,000 times,
/// with new input written into the graph's lent input between replays, alternating two
/// streams: every replay's output is checked element by element.
fn a_captured_pipeline_replays_a_thousand_times_with_the_right_answer() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let mut input = PinnedBuffer::<u32>::zeroed(ctx, N)?;
        let mut output = PinnedBuffer::<u32>::zeroed(ctx, N)?;
        let (mut x, mut y, mut z) = (ctx.zeroed(N)?, ctx.zeroed(N)?, ctx.zeroed(N)?);
        let (graph, (inp, out)) = ctx.capture(|g| {
            let (input, inp) = g.lend_host(&mut input);
            let (output, out) = g.lend_host(&mut output);
            let (x, y, z) = (g.bind_mut(&mut x), g.bind_mut(&mut y), g.bind_mut(&mut z));
            g.copy_from_host(x, input.into_ref())?;
            g.launch(&k.affine, config(), (x.into_ref(), y, 3u32, 1u32))?;
            g.launch(&k.add, config(), (x.into_ref(), y.into_ref(), z))?;
            g.launch(&k.square, config(), (z,))?;
            g.copy_to_host(output, z.into_ref())?;
            Ok((inp, out))
        })?;
        assert_eq!(graph.node_count()?, 5, "one node per captured operation");
        let mut exec = graph.instantiate()?;
        assert_eq!(exec.node_count(), 5);
        let streams = [ctx.new_stream()?, ctx.new_stream()?];
        for replay in 0..1000u32 {
            for (j, v) in exec.host_mut(inp).iter_mut().enumerate() {
                *v = replay.wrapping_mul(7919) ^ j as u32;
            }
            exec.host_mut(out).fill(0xdead_beef);
            streams[replay as usize % 2].scope(|s| exec.launch(s))?;
            let output = exec.host(out);
            for (j, &v) in output.iter().enumerate() {
                let x = replay.wrapping_mul(7919) ^ j as u32;
                assert_eq!(v, pipeline(x), "replay {replay}, element {j}");
            }
        }
        drop(exec);
        // the graph is gone: its buffers are the host's again, holding the last replay's values
        let last = 999u32.wrapping_mul(7919);
        assert_eq!(x.to_vec()?[5], last ^ 5);
        assert_eq!(z.to_vec()?[5], pipeline(last ^ 5));
        assert_eq!(output[5], pipeline(last ^ 5));
        Ok(())
    });
}

/// One executable graph, replayed several times in one scope, on two streams, and by two
/// streams of one multi-stream scope (the driver runs replays of one graph one at a time):
/// each replay adds one to an accumulator, read back through the graph's lent device memory.
fn a_graph_replays_on_any_stream_of_its_context_any_number_of_times() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let (mut acc, mut tmp) = (ctx.zeroed::<u32>(N)?, ctx.zeroed::<u32>(N)?);
        let (graph, key) = ctx.capture(|g| {
            let (acc, key) = g.lend_mut(&mut acc);
            let tmp = g.bind_mut(&mut tmp);
            g.launch(&k.affine, config(), (acc.into_ref(), tmp, 1u32, 1u32))?; // tmp = acc + 1
            g.copy_from_device(acc, tmp.into_ref())?; // acc = tmp
            Ok(key)
        })?;
        let mut exec = graph.instantiate()?;
        let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
        s1.scope(|s| {
            for _ in 0..3 {
                exec.launch(s)?;
            }
            Ok(())
        })?;
        assert!(exec.device(key).to_vec()?.iter().all(|&v| v == 3));
        s2.scope(|s| exec.launch(s))?;
        s1.scope_pair(&s2, |a, b| {
            exec.launch(a)?;
            exec.launch(b)?;
            exec.launch(a)
        })?;
        assert!(exec.device(key).to_vec()?.iter().all(|&v| v == 7));
        // the lent memory may be reset between replays
        exec.device_mut(key).fill(100)?;
        s2.scope(|s| exec.launch(s))?;
        assert!(exec.device(key).to_vec()?.iter().all(|&v| v == 101));
        Ok(())
    });
}

/// A panic inside the capture closure ends the capture (the partial graph is destroyed) and
/// unwinds out of `capture`; afterwards the context, its streams and new captures work, and
/// nothing of the panicked capture ever ran.
fn a_panic_inside_a_capture_ends_it_and_leaves_everything_usable() {
    common::in_context(|ctx| {
        let mut x = ctx.zeroed::<u32>(N)?;
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            let _ = ctx.capture(|g| -> Result<(), Error> {
                g.fill(&mut x, 1)?;
                panic!("inside the capture");
            });
        }));
        let payload = caught.expect_err("the panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"inside the capture"));
        // no capture is left open in the context: a context-wide wait works
        ctx.synchronize()?;
        assert!(
            x.to_vec()?.iter().all(|&v| v == 0),
            "the captured fill never ran"
        );
        // streams and scopes work
        let stream = ctx.new_stream()?;
        stream.scope(|s| s.fill(&mut x, 2))?;
        assert!(x.to_vec()?.iter().all(|&v| v == 2));
        // so does a new capture
        let exec = ctx.capture(|g| g.fill(&mut x, 3))?.0.instantiate()?;
        stream.scope(|s| exec.launch(s))?;
        drop(exec);
        assert!(x.to_vec()?.iter().all(|&v| v == 3));
        Ok(())
    });
}

/// A capture made in a `Drop` that runs while an unrelated panic unwinds (a cleanup guard)
/// makes its graph like any other: only a panic of the capture's own closure destroys it
/// (the capture used to read "a panic unwinds" as "the closure panicked" and returned
/// `StreamCaptureInvalidated`).
fn a_capture_made_while_another_panic_unwinds_makes_its_graph() {
    struct Cleanup<'a, 'ctx> {
        ctx: ContextGuard<'ctx>,
        x: &'a mut DeviceBuffer<'ctx, u32>,
        nodes: &'a mut Option<Result<usize, Error>>,
    }
    impl Drop for Cleanup<'_, '_> {
        fn drop(&mut self) {
            let x = &mut *self.x;
            let made = self.ctx.capture(|g| g.fill(&mut *x, 5));
            *self.nodes = Some(made.and_then(|(graph, ())| graph.node_count()));
        }
    }
    common::in_context(|ctx| {
        let mut x = ctx.zeroed::<u32>(N)?;
        let mut nodes = None;
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            let _cleanup = Cleanup {
                ctx,
                x: &mut x,
                nodes: &mut nodes,
            };
            panic!("unrelated");
        }));
        assert!(caught.is_err());
        let nodes = nodes.expect("the cleanup ran")?;
        assert_eq!(nodes, 1, "the captured fill is the graph's one node");
        ctx.synchronize()?;
        Ok(())
    });
}

/// A launch with a priority is refused inside a capture, since its replayed node would run
/// at the priority of the stream the graph is launched on: the capture makes no graph and
/// returns `NotSupported`; the same launch without the priority is captured.
fn a_launch_with_a_priority_is_refused_inside_a_capture() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let mut z = ctx.zeroed::<u32>(N)?;
        let refused = ctx.capture(|g| g.launch(&k.square, config().with_priority(0), (&mut z,)));
        let e = refused.map(|_| ()).expect_err("the priority is refused");
        assert_eq!(e.code(), ErrorCode::NotSupported, "{e}");
        assert_eq!(e.call(), "Capture::launch", "{e}");
        let (graph, ()) = ctx.capture(|g| g.launch(&k.square, config(), (&mut z,)))?;
        assert_eq!(graph.node_count()?, 1);
        Ok(())
    });
}

/// An error inside a capture makes no graph: returned by the closure, refused before the
/// driver and ignored by the closure, or an operation the driver does not allow while a
/// stream captures. Afterwards everything works.
fn an_error_inside_a_capture_makes_no_graph_and_leaves_everything_usable() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let mut x = ctx.zeroed::<u32>(N)?;
        // 1. the closure's own error
        let e = ctx
            .capture(|g| {
                g.fill(&mut x, 1)?;
                Err::<(), _>(Error::with_detail("test", ErrorCode::Unknown, "given up"))
            })
            .unwrap_err();
        assert_eq!(e.detail(), Some("given up"));
        // 2. an operation refused before the driver, its error ignored by the closure
        let e = ctx
            .capture(|g| {
                let x = g.bind_mut(&mut x);
                let _ignored = g.launch(&k.set, LaunchConfig::linear(1, 4096), (x, 5u32));
                g.fill(x, 6)
            })
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
        assert!(e.to_string().contains("more threads"), "{e}");
        assert!(x.to_vec()?.iter().all(|&v| v == 0), "nothing ran");
        // 2b. a copy of differing lengths, refused and ignored the same way
        let three = [1u32; 3];
        let e = ctx
            .capture(|g| {
                let x = g.bind_mut(&mut x);
                let _ignored = g.copy_from_host(x, &three[..]);
                g.fill(x, 6)
            })
            .unwrap_err();
        assert_eq!(
            (e.call(), e.invalid()),
            (
                "copy_from_host",
                Some(&cuda_brand::Invalid::LengthMismatch {
                    expected: N,
                    found: 3
                })
            )
        );
        assert!(x.to_vec()?.iter().all(|&v| v == 0), "nothing ran");
        // 3. a context-wide wait inside the capture, its error ignored
        let mut waited = None;
        let kept = {
            let captured: Result<_, Error> = ctx.capture(|g| {
                g.fill(&mut x, 7)?;
                waited = Some(ctx.synchronize());
                Ok(())
            });
            match captured {
                Err(e) => {
                    eprintln!(
                        "cuCtxSynchronize during the capture returned {waited:?}; the capture: {e}"
                    );
                    assert!(
                        matches!(
                            e.code(),
                            ErrorCode::StreamCaptureInvalidated
                                | ErrorCode::StreamCaptureUnsupported
                                | ErrorCode::StreamCaptureImplicit
                        ),
                        "{e}"
                    );
                    None
                }
                Ok((graph, ())) => {
                    eprintln!(
                        "cuCtxSynchronize during the capture returned {waited:?}; the capture was kept"
                    );
                    Some(graph.instantiate()?)
                }
            }
        };
        let was_kept = kept.is_some();
        if let Some(exec) = { kept } {
            // then the graph must be the whole capture
            ctx.new_stream()?.scope(|s| exec.launch(s))?;
        }
        if was_kept {
            assert!(x.to_vec()?.iter().all(|&v| v == 7));
        }
        // everything works afterwards
        let stream = ctx.new_stream()?;
        stream.scope(|s| s.fill(&mut x, 8))?;
        let exec = ctx
            .capture(|g| g.launch(&k.set, config(), (&mut x, 9u32)))?
            .0
            .instantiate()?;
        stream.scope(|s| exec.launch(s))?;
        drop(exec);
        assert!(x.to_vec()?.iter().all(|&v| v == 9));
        Ok(())
    });
}

/// Synchronous operations and a whole scope inside the capture closure run at capture time,
/// outside the graph (the capture is relaxed and on a private stream): their results are
/// there right away, and the graph has only the capture's own nodes.
fn work_outside_the_capture_inside_its_closure_runs_at_once_and_is_not_captured() {
    common::in_context(|ctx| {
        let mut x = ctx.zeroed::<u32>(N)?;
        let other = ctx.new_stream()?;
        let (graph, seen) = ctx.capture(|g| {
            let mut y = DeviceBuffer::from_slice(ctx, &[4u32; 16])?;
            let mut back = vec![0u32; 16];
            other.scope(|s| {
                let y = s.bind_mut(&mut y);
                s.fill(y, 5)?;
                s.copy_to_host(&mut back, y.into_ref())
            })?;
            g.fill(&mut x, 1)?;
            Ok((back, y.to_vec()?))
        })?;
        assert_eq!(seen, (vec![5u32; 16], vec![5u32; 16]));
        assert_eq!(graph.node_count()?, 1);
        Ok(())
    });
}

/// Pageable host memory (a `Vec`) in captured copies: either the driver refuses the capture
/// (an error, no graph), or each replay reads and writes the `Vec`s as they are at replay
/// time, which the graph lends back between replays.
fn pageable_host_memory_in_a_capture_is_used_at_replay_time_or_refused() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let (mut input, mut output) = (vec![0u32; N], vec![0u32; N]);
        let (mut x, mut y) = (ctx.zeroed::<u32>(N)?, ctx.zeroed::<u32>(N)?);
        let captured: Result<_, Error> = ctx.capture(|g| {
            let (input, inp) = g.lend_host(&mut input);
            let (output, out) = g.lend_host(&mut output);
            let (x, y) = (g.bind_mut(&mut x), g.bind_mut(&mut y));
            g.copy_from_host(x, input.into_ref())?;
            g.launch(&k.affine, config(), (x.into_ref(), y, 2u32, 0u32))?;
            g.copy_to_host(output, y.into_ref())?;
            Ok((inp, out))
        });
        let (graph, (inp, out)) = match captured {
            Err(e) => {
                eprintln!("the driver refused pageable memory in a capture: {e}");
                return Ok(());
            }
            Ok(captured) => captured,
        };
        let mut exec = graph.instantiate()?;
        let stream = ctx.new_stream()?;
        for replay in 0..20u32 {
            exec.host_mut(inp).fill(replay + 1);
            stream.scope(|s| exec.launch(s))?;
            assert!(
                exec.host(out).iter().all(|&v| v == 2 * (replay + 1)),
                "replay {replay} read the input written before it"
            );
        }
        eprintln!("the driver captured copies of pageable memory; they ran at replay time");
        Ok(())
    });
}

/// `update` rebinds an executable graph to the buffers of a capture of the same shape
/// (CUDA 12.0 drivers): the replay then writes the new buffers only. A capture of another
/// shape is refused and `update_or_keep` hands the unchanged graph back.
fn an_executable_graph_is_updated_to_other_buffers_without_instantiating_again() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let host: Vec<u32> = (0..N as u32).collect();
        let (xa, mut ya) = (DeviceBuffer::from_slice(ctx, &host)?, ctx.zeroed::<u32>(N)?);
        let (xb, mut yb) = (
            DeviceBuffer::from_slice(ctx, &host.iter().map(|v| v * 10).collect::<Vec<_>>())?,
            ctx.zeroed::<u32>(N)?,
        );
        let stream = ctx.new_stream()?;
        let exec = ctx
            .capture(|g| g.launch(&k.affine, config(), (&xa, &mut ya, 2u32, 1u32)))?
            .0
            .instantiate()?;
        stream.scope(|s| exec.launch(s))?;
        // SAFETY (of the three handles below): only compared, to tell whether the update
        // kept the executable graph.
        let raw = unsafe { exec.as_raw() };
        let (new, ()) =
            ctx.capture(|g| g.launch(&k.affine, config(), (&xb, &mut yb, 2u32, 1u32)))?;
        let exec = match exec.update(new) {
            Ok(exec) => exec,
            Err(e) => {
                assert!(cuda_brand::driver_version()? < 12000, "{e}");
                assert_eq!(e.code(), ErrorCode::DriverTooOld, "{e}");
                common::skip(format!(
                    "updating a graph in place needs a CUDA 12.0 driver ({e})"
                ))
            }
        };
        assert_eq!(
            // SAFETY: see `raw`.
            unsafe { exec.as_raw() },
            raw,
            "the same executable graph, not a new one"
        );
        ya.fill(0)?; // the old buffers are free again
        stream.scope(|s| exec.launch(s))?;
        // a capture of another shape: refused, and the executable graph comes back unchanged
        let mut zc = ctx.zeroed::<u32>(N)?;
        let (other, ()) = ctx.capture(|g| {
            let zc = g.bind_mut(&mut zc);
            g.fill(zc, 1)?;
            g.fill(zc, 2)
        })?;
        let refused = exec.update_or_keep(other).unwrap_err();
        assert_eq!(refused.error().code(), ErrorCode::GraphExecUpdateFailure);
        let exec = refused.into_exec().expect("handed back unchanged");
        // SAFETY: see `raw`.
        assert_eq!(unsafe { exec.as_raw() }, raw);
        stream.scope(|s| exec.launch(s))?;
        drop(exec);
        assert!(
            ya.to_vec()?.iter().all(|&v| v == 0),
            "the old buffer is no longer written"
        );
        let yb = yb.to_vec()?;
        for (j, &v) in yb.iter().enumerate() {
            assert_eq!(v, 2 * 10 * j as u32 + 1, "element {j}");
        }
        assert!(
            zc.to_vec()?.iter().all(|&v| v == 0),
            "the refused graph never ran"
        );
        Ok(())
    });
}

/// A key opens only the graph of the capture that made it.
fn a_key_of_another_graph_is_refused() {
    common::in_context(|ctx| {
        let (mut a, mut b) = (ctx.pinned_zeroed::<u32>(4)?, ctx.pinned_zeroed::<u32>(4)?);
        let (mut xa, mut xb) = (ctx.zeroed::<u32>(4)?, ctx.zeroed::<u32>(4)?);
        let (ga, _ka) = ctx.capture(|g| {
            let (h, k) = g.lend_host(&mut a);
            let x = g.bind_mut(&mut xa);
            g.fill(x, 1)?;
            g.copy_to_host(h, x.into_ref()).map(|()| k)
        })?;
        let (gb, kb) = ctx.capture(|g| {
            let (h, k) = g.lend_host(&mut b);
            let x = g.bind_mut(&mut xb);
            g.fill(x, 1)?;
            g.copy_to_host(h, x.into_ref()).map(|()| k)
        })?;
        let mut ea = ga.instantiate()?;
        let _eb = gb.instantiate()?;
        let caught = panic::catch_unwind(AssertUnwindSafe(|| ea.host(kb).len()));
        let payload = caught.expect_err("another graph's key panics");
        let message = payload.downcast_ref::<String>().expect("a message");
        assert!(
            message.starts_with("ExecGraph: a key of capture"),
            "{message}"
        );
        Ok(())
    });
}

/// Host functions see the stream's results in order: 100 steps of a kernel writing the
/// step into device memory, a copy into bound host memory (pinned, then a pageable `Vec`),
/// and a host function reading it.
fn a_host_function_sees_the_streams_results_in_order() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let mut dev = ctx.zeroed::<u32>(N)?;
        let mut pinned = PinnedBuffer::<u32>::zeroed(ctx, N)?;
        let mut pageable = vec![0u32; N];
        let seen = Mutex::new(Vec::new());
        ctx.new_stream()?.scope(|s| {
            let d = s.bind_mut(&mut dev);
            let (hp, hv) = (s.bind_host_mut(&mut pinned), s.bind_host_mut(&mut pageable));
            for step in 1..=100u32 {
                s.launch(&k.spin, LaunchConfig::linear(1, 1), (20_000u64,))?;
                s.launch(&k.set, config(), (d, step))?;
                let h = if step % 2 == 0 { hp } else { hv };
                s.copy_to_host_view(h, d.into_ref())?;
                s.host_fn_on(h, |v| {
                    let all = v.iter().all(|&x| x == v[0]);
                    seen.lock().unwrap().push((v[0], all));
                })?;
            }
            Ok(())
        })?;
        let seen = seen.into_inner().unwrap();
        let expected: Vec<(u32, bool)> = (1..=100).map(|s| (s, true)).collect();
        assert_eq!(seen, expected);
        assert_eq!((pinned[0], pageable[N - 1]), (100, 99));
        Ok(())
    });
}

/// In a multi-stream scope, a host function on one stream reading bound host memory that a
/// copy on another stream writes waits for the copy (the lane record), and a copy out of host
/// memory that a host function wrote waits for the function.
fn host_views_are_ordered_across_the_streams_of_a_scope() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let (mut a, mut b) = (ctx.zeroed::<u32>(N)?, ctx.zeroed::<u32>(N)?);
        let mut host = PinnedBuffer::<u32>::zeroed(ctx, N)?;
        let seen = Mutex::new(0u32);
        let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
        s1.scope_pair(&s2, |x, y| {
            let (a, b, h) = (
                x.bind_mut(&mut a),
                x.bind_mut(&mut b),
                x.bind_host_mut(&mut host),
            );
            // s1: a long kernel, then a = 41, copied into `host`
            x.launch(&k.spin, LaunchConfig::linear(1, 1), (50_000_000u64,))?;
            x.launch(&k.set, config(), (a, 41u32))?;
            x.copy_to_host_view(h, a.into_ref())?;
            // s2: reads `host`, adds one, and copies it into b
            y.host_fn_on(h, |v| {
                *seen.lock().unwrap() = v[0];
                v.iter_mut().for_each(|e| *e += 1);
            })?;
            y.copy_from_host_view(b, h.into_ref())
        })?;
        assert_eq!(*seen.lock().unwrap(), 41);
        assert!(b.to_vec()?.iter().all(|&v| v == 42));
        Ok(())
    });
}

/// A host function may borrow from its environment, and has run before its scope returns:
/// also when the scope's closure returns an error while the function is still queued behind
/// a long kernel.
fn a_host_function_has_run_before_its_scope_returns_even_on_an_early_error() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let ran = AtomicUsize::new(0);
        let stream = ctx.new_stream()?;
        stream.scope(|s| {
            s.launch(&k.spin, LaunchConfig::linear(1, 1), (100_000_000u64,))?;
            s.host_fn(|| {
                ran.fetch_add(1, Ordering::SeqCst);
            })
        })?;
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        let e = stream
            .scope(|s| {
                s.launch(&k.spin, LaunchConfig::linear(1, 1), (100_000_000u64,))?;
                s.host_fn(|| {
                    ran.fetch_add(1, Ordering::SeqCst);
                })?;
                Err::<(), _>(Error::with_detail("test", ErrorCode::Unknown, "early"))
            })
            .unwrap_err();
        assert_eq!(e.detail(), Some("early"));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            2,
            "the function ran before the scope returned"
        );
        Ok(())
    });
}

/// A panic in a host function does not unwind into the driver: the stream goes on (the work
/// queued after it runs), and the panic is resumed when the scope returns; the stream is
/// usable afterwards.
fn a_panic_in_a_host_function_is_resumed_when_its_scope_returns() {
    common::in_context(|ctx| {
        let mut x = ctx.zeroed::<u32>(N)?;
        let stream = ctx.new_stream()?;
        let ran_after = AtomicUsize::new(0);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            let _ = stream.scope(|s| {
                s.host_fn(|| panic!("inside a host function"))?;
                s.fill(&mut x, 9)?;
                s.host_fn(|| {
                    ran_after.fetch_add(1, Ordering::SeqCst);
                })
            });
        }));
        let payload = caught.expect_err("the host function's panic is resumed");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"inside a host function")
        );
        assert_eq!(ran_after.load(Ordering::SeqCst), 1, "the stream went on");
        assert!(x.to_vec()?.iter().all(|&v| v == 9));
        stream.scope(|s| s.fill(&mut x, 10))?;
        assert!(x.to_vec()?.iter().all(|&v| v == 10));
        Ok(())
    });
}

/// Inside a host function every call of the crate is refused before the driver, with
/// `CUDA_ERROR_NOT_PERMITTED`; outside it the same calls work.
fn a_host_function_cannot_call_the_driver_through_the_crate() {
    common::in_context(|ctx| {
        let buf = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?;
        let stream = ctx.new_stream()?;
        let other = ctx.new_stream()?;
        let results = Mutex::new(Vec::new());
        stream.scope(|s| {
            s.host_fn(|| {
                let mut r = results.lock().unwrap();
                r.push(cuda_brand::driver_version().map(drop));
                r.push(other.is_idle().map(drop));
                r.push(buf.to_vec().map(drop));
            })
        })?;
        for r in results.into_inner().unwrap() {
            let e = r.unwrap_err();
            assert_eq!(e.code(), ErrorCode::NotPermitted, "{e}");
            assert!(e.to_string().contains("host function"), "{e}");
        }
        assert!(cuda_brand::driver_version()? >= 11040);
        assert!(other.is_idle()?);
        assert_eq!(buf.to_vec()?, [1, 2, 3]);
        Ok(())
    });
}

/// A graph of one context replays in a scope opened through a shared copy of its guard on
/// the same thread, and its captured kernels keep their module alive (compile-time), so the
/// values are right after the module's other kernels ran.
fn graphs_and_host_functions_compose_with_nested_scopes() {
    common::in_context(|ctx: ContextGuard<'_>| {
        let module = Module::from_ptx(ctx, PTX)?;
        let k = kernels(&module)?;
        let mut x = ctx.zeroed::<u32>(N)?;
        let exec = ctx
            .capture(|g| g.launch(&k.set, config(), (&mut x, 5u32)))?
            .0
            .instantiate()?;
        let (s1, s2): (Stream<'_>, Stream<'_>) = (ctx.new_stream()?, ctx.new_stream()?);
        let count = AtomicUsize::new(0);
        s1.scope(|outer| {
            exec.launch(outer)?;
            outer.host_fn(|| {
                count.fetch_add(1, Ordering::SeqCst);
            })?;
            s2.scope(|inner| {
                exec.launch(inner)?;
                inner.host_fn(|| {
                    count.fetch_add(10, Ordering::SeqCst);
                })
            })
        })?;
        drop(exec);
        assert_eq!(count.load(Ordering::SeqCst), 11);
        assert!(x.to_vec()?.iter().all(|&v| v == 5));
        Ok(())
    });
}

gpu_tests!(
    a_captured_pipeline_replays_a_thousand_times_with_the_right_answer,
    a_graph_replays_on_any_stream_of_its_context_any_number_of_times,
    a_panic_inside_a_capture_ends_it_and_leaves_everything_usable,
    a_capture_made_while_another_panic_unwinds_makes_its_graph,
    a_launch_with_a_priority_is_refused_inside_a_capture,
    a_captured_launch_and_a_scope_launch_of_the_same_kernel_give_the_same_result,
    a_refused_launch_reads_the_same_in_a_scope_and_in_a_capture,
    a_captured_cluster_launch_keeps_its_clusters,
    a_captured_cooperative_launch_synchronizes_its_whole_grid,
    an_error_inside_a_capture_makes_no_graph_and_leaves_everything_usable,
    work_outside_the_capture_inside_its_closure_runs_at_once_and_is_not_captured,
    pageable_host_memory_in_a_capture_is_used_at_replay_time_or_refused,
    an_executable_graph_is_updated_to_other_buffers_without_instantiating_again,
    a_key_of_another_graph_is_refused,
    a_host_function_sees_the_streams_results_in_order,
    host_views_are_ordered_across_the_streams_of_a_scope,
    a_host_function_has_run_before_its_scope_returns_even_on_an_early_error,
    a_panic_in_a_host_function_is_resumed_when_its_scope_returns,
    a_host_function_cannot_call_the_driver_through_the_crate,
    graphs_and_host_functions_compose_with_nested_scopes,
    a_host_functions_panic_surfaces_from_scope,
    a_host_functions_panic_surfaces_from_scope_pair,
    a_host_functions_panic_surfaces_from_scope_all,
    a_host_functions_panic_surfaces_from_scope_within,
    a_host_functions_panic_surfaces_from_scope_all_within,
    a_host_functions_panic_surfaces_from_scope_and_teardown,
    a_host_functions_panic_surfaces_from_scope_pair_and_teardown,
    a_host_functions_panic_surfaces_from_scope_all_and_teardown,
    a_host_functions_panic_surfaces_from_a_scope_inside_a_capture,
    crate_calls_inside_a_host_function_are_refused_and_nothing_runs,
    a_call_that_waits_for_a_running_host_functions_stream_returns_only_after_it,
    calls_that_do_not_wait_for_a_host_functions_stream_return_while_it_runs,
    calls_the_driver_may_make_wait_for_a_running_host_function,
    a_buffer_dropped_inside_a_host_function_is_reported_by_its_contexts_teardown,
    staged_copies_return_while_a_default_streams_host_function_waits_for_them,
    a_pool_buffer_freed_while_a_default_streams_host_function_waits_returns,
);
