//! Setup and run phases (`with_phases`) on a real GPU. Each test runs alone (`tests_alone`,
//! after the other tests of the `gpu` binary): they read pools' statistics and the
//! device's free memory, which other tests' allocations would change.

use crate::common;

use cuda_brand::prelude::*;
use cuda_brand::{DeviceBuffer2D, DeviceBuffer3D, ManagedBuffer};
use cuda_brand::{ErrorCode, Library, MemoryPool, with_phases};

const PTX: &str = include_str!("../kernels/kernels.ptx");

/// Bytes in use in the crate's pool of device 0 (looked at through the primary context,
/// which may be pushed on top of any other).
fn crate_pool_used(device: &Device) -> u64 {
    with_primary_context(device, |p| MemoryPool::of_device(p)?.used_bytes()).unwrap()
}

/// Bytes in use in the default pool of device 0, which no context owns (the crate never
/// allocates from it unless told to), looked at through the primary context.
fn default_pool_used(device: &Device) -> u64 {
    with_primary_context(device, |p| MemoryPool::device_default(p)?.used_bytes()).unwrap()
}

/// Free memory of device 0, looked at through the primary context.
fn device_free(device: &Device) -> u64 {
    with_primary_context(device, |p| Ok::<_, Error>(p.memory_info()?.free)).unwrap() as u64
}

/// The size of the allocation that starts at `ptr`, straight from the driver
/// (`CU_POINTER_ATTRIBUTE_RANGE_SIZE`, 12): the driver only answers for memory that is
/// still allocated.
fn allocation_size(ptr: u64) -> usize {
    let mut size: usize = 0;
    // SAFETY: the out-pointer is a live local of the attribute's size (a `size_t`).
    let rc = unsafe {
        (common::driver().cuPointerGetAttribute)((&mut size as *mut usize).cast(), 12, ptr)
    };
    assert_eq!(
        rc, 0,
        "cuPointerGetAttribute(RANGE_SIZE) of {ptr:#x}: freed?"
    );
    size
}

fn a_phased_program_computes_with_setup_memory_and_bounded_scratch() {
    let device = common::gpu();
    let n = 100_000;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let out = with_phases(&device, ContextFlags::default(), |phases| {
        let ((a, mut c, stream, scratch, module, mut pinned), run) = phases.setup(|ctx| {
            Ok::<_, Error>((
                ctx.from_slice(&host)?,
                ctx.zeroed::<f32>(n)?,
                ctx.new_stream()?,
                MemoryPool::with_max_size(ctx, 4 << 20)?,
                ctx.module_from_ptx(PTX)?,
                ctx.pinned_zeroed::<f32>(n)?,
            ))
        })?;
        // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
        // stays below all three lengths.
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        let config = add.config_for(n)?;
        for round in 0..50 {
            stream.scope(|s| {
                let tmp = s.alloc_zeroed_in::<f32>(&scratch, n)?;
                let c = s.bind_mut(&mut c);
                s.launch(&add, config, (&a, &a, tmp))?; // 2a
                s.launch(&add, config, (tmp, &a, c))?; // 3a
                s.copy_to_host(&mut pinned, c.into_ref())
            })?;
            assert_eq!(pinned[7], 21.0, "round {round}");
        }
        run.synchronize()?;
        Ok::<_, Error>(pinned.to_vec())
    })
    .unwrap();
    assert!(out.iter().enumerate().all(|(i, &x)| x == 3.0 * i as f32));
}

fn buffers_of_the_setup_phase_are_freed_only_by_the_teardown() {
    let device = common::gpu();
    let before = crate_pool_used(&device);
    let mib = 1usize << 20;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (mut buffers, _run) = phases.setup(|ctx| {
            (0..4)
                .map(|_| ctx.zeroed::<u8>(mib))
                .collect::<Result<Vec<_>, _>>()
        })?;
        let during = crate_pool_used(&device);
        assert!(during >= before + 4 * mib as u64, "{during} vs {before}");
        // dropped in the run phase: nothing is freed until the teardown
        buffers.pop();
        drop(buffers);
        assert_eq!(crate_pool_used(&device), during);
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(crate_pool_used(&device), before, "the teardown frees them");
}

fn an_exhausted_scratch_pool_is_a_clear_error() {
    let device = common::gpu();
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((stream, scratch), _run) = phases.setup(|ctx| {
            Ok::<_, Error>((ctx.new_stream()?, MemoryPool::with_max_size(ctx, 2 << 20)?))
        })?;
        let e = stream
            .scope(|s| {
                s.alloc_zeroed_in::<u8>(&scratch, 1 << 20)?;
                s.alloc_zeroed_in::<u8>(&scratch, 256 << 20).map(|_| ())
            })
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::OutOfMemory, "{e}");
        assert!(e.to_string().contains("268435456 bytes"), "{e}");
        // the scope ended cleanly: the pool serves the next one
        stream.scope(|s| s.alloc_zeroed_in::<u8>(&scratch, 1 << 20).map(|_| ()))?;
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// Every pool form of `DeviceBuffer` (`zeroed_in`, `from_slice_in`, `uninitialized_in`)
/// made during setup keeps its memory in the pool when dropped in the run phase; the
/// teardown gives it back. The device's default pool outlives the context, so its use is
/// read before, during and after.
fn pool_buffers_of_the_setup_phase_are_freed_only_by_the_teardown() {
    let device = common::gpu();
    let before = default_pool_used(&device);
    let mib = 1usize << 20;
    let host: Vec<u32> = (0..mib as u32).collect(); // 4 MiB
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((pool, zeroed, copied), run) = phases.setup(|ctx| {
            let pool = MemoryPool::device_default(ctx)?;
            let zeroed = DeviceBuffer::<u8>::zeroed_in(ctx, &pool, 4 * mib)?;
            let copied = ctx.from_slice_in(&pool, &host)?;
            Ok::<_, Error>((pool, zeroed, copied))
        })?;
        let used = pool.used_bytes()?;
        assert!(used >= before + 8 * mib as u64, "{used} vs {before}");
        assert_eq!(copied.to_vec()?[123_456], 123_456);
        drop(zeroed);
        run.synchronize()?; // a free, had there been one, is stream-ordered
        assert_eq!(
            pool.used_bytes()?,
            used,
            "zeroed_in: dropped, still the pool's"
        );
        drop(copied);
        run.synchronize()?;
        assert_eq!(
            pool.used_bytes()?,
            used,
            "from_slice_in: dropped, still the pool's"
        );
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(
        default_pool_used(&device),
        before,
        "the teardown frees them"
    );

    // the unsafe form, with the escape hatches
    {
        with_phases(&device, ContextFlags::default(), |phases| {
            let ((pool, raw), run) = phases.setup(|ctx| {
                let pool = MemoryPool::device_default(ctx)?;
                // SAFETY: never read.
                let raw = unsafe { DeviceBuffer::<u8>::uninitialized_in(ctx, &pool, 4 * mib) }?;
                Ok::<_, Error>((pool, raw))
            })?;
            let used = pool.used_bytes()?;
            assert!(used >= before + 4 * mib as u64, "{used} vs {before}");
            drop(raw);
            run.synchronize()?;
            assert_eq!(
                pool.used_bytes()?,
                used,
                "uninitialized_in: dropped, still the pool's"
            );
            Ok::<_, Error>(())
        })
        .unwrap();
        assert_eq!(default_pool_used(&device), before, "the teardown frees it");
    }
}

/// A pool of the program's, made in setup: a buffer made from it in setup stays in its
/// used bytes when dropped in the run phase, while the scratch a scope takes from it goes
/// back when the scope ends. The pool is destroyed (dropped) before the teardown frees the
/// buffer; the driver releases its memory then, which the device's free memory shows.
fn a_setup_pool_keeps_setup_buffers_until_the_teardown_and_scope_scratch_until_the_scope_ends() {
    let device = common::gpu();
    let mib = 1usize << 20;
    let free_before = device_free(&device);
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((pool, buf, stream), run) = phases.setup(|ctx| {
            let pool = MemoryPool::with_max_size(ctx, 256 * mib)?;
            let buf = ctx.zeroed_in::<u8>(&pool, 128 * mib)?;
            Ok::<_, Error>((pool, buf, ctx.new_stream()?))
        })?;
        let used = pool.used_bytes()?;
        assert!(used >= 128 * mib as u64, "{used}");
        pool.reset_high_watermarks()?;
        stream.scope(|s| s.alloc_zeroed_in::<u8>(&pool, 16 * mib).map(|_| ()))?;
        stream.synchronize()?; // the scope's free is stream-ordered
        assert!(
            pool.used_high_watermark()? >= used + 16 * mib as u64,
            "the scope's scratch came from the pool"
        );
        assert_eq!(
            pool.used_bytes()?,
            used,
            "the scratch went back when the scope ended"
        );
        drop(buf);
        run.synchronize()?;
        assert_eq!(
            pool.used_bytes()?,
            used,
            "dropped in the run phase: still the pool's"
        );
        Ok::<_, Error>(())
    })
    .unwrap();
    // Pool memory outlives contexts: had the teardown not freed the buffer, its 128 MiB
    // would still be taken here.
    let free_after = device_free(&device);
    assert!(
        free_after + 32 * mib as u64 >= free_before,
        "{free_before} bytes free before, {free_after} after"
    );
}

/// Managed, pitched 2D and pitched 3D memory made during setup stays allocated when
/// dropped in the run phase (the driver still knows each allocation, and the device's
/// free memory does not grow); the teardown frees it (compute-sanitizer's leak check
/// would name it otherwise).
fn managed_and_pitched_buffers_of_the_setup_phase_are_freed_only_by_the_teardown() {
    let device = common::gpu();
    let mib = 1usize << 20;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((managed, flat, volume), run) = phases.setup(|ctx| {
            Ok::<_, Error>((
                ManagedBuffer::<u8>::from_slice(ctx, &vec![7u8; 64 * mib])?,
                DeviceBuffer2D::<u8>::zeroed(ctx, 4096, 16 * 1024)?, // 64 MiB
                DeviceBuffer3D::<u8>::zeroed(ctx, 1024, 1024, 64)?,  // 64 MiB
            ))
        })?;
        assert_eq!(managed[64 * mib - 1], 7);
        // SAFETY: the addresses are only given to cuPointerGetAttribute, which reads no memory.
        let allocations = unsafe {
            [
                ("managed", managed.as_device().as_device_ptr(), 64 * mib),
                ("2D", flat.as_device_ptr(), flat.pitch_bytes() * flat.height()),
                ("3D", volume.as_device_ptr(), volume.pitch_bytes() * 1024 * 64),
            ]
        };
        for (what, ptr, bytes) in allocations {
            assert!(allocation_size(ptr) >= bytes, "{what}");
        }
        let free_before = common::free_memory();
        drop(managed);
        drop(flat);
        drop(volume);
        run.synchronize()?;
        for (what, ptr, bytes) in allocations {
            assert!(allocation_size(ptr) >= bytes, "{what}: dropped, still allocated");
        }
        let free_after = common::free_memory();
        assert!(
            free_after < free_before + 64 * mib,
            "the pitched buffers' 128 MiB stayed taken: {free_before} bytes free before the drops, {free_after} after"
        );
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// This file's tests, each to run with no other test of its binary beside it (see the
/// file's header; `tests/gpu.rs` runs them after the others).
/// A graph captured with the setup guard (a fill, then two `vector_add`s) and replayed on a
/// preallocated stream (`Stream<'ctx, Preallocated>`) made in setup: the sums come back. (The
/// graph borrows its buffers and kernels for its life, so a graph captured in setup is
/// replayed inside the setup closure, where they live.)
fn a_graph_captured_in_setup_replays_on_a_preallocated_stream_with_the_right_values() {
    let device = common::gpu();
    let n = 4096;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let out = with_phases(&device, ContextFlags::default(), |phases| {
        let (out, _run) = phases.setup(|ctx| {
            let module = ctx.module_from_ptx(PTX)?;
            // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
            // stays below all three lengths.
            let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
            let a = ctx.from_slice(&host)?;
            let (mut b, mut c) = (ctx.zeroed::<f32>(n)?, ctx.zeroed::<f32>(n)?);
            let config = add.config_for(n)?;
            let (graph, ()) = ctx.capture(|g| {
                let (b, c) = (g.bind_mut(&mut b), g.bind_mut(&mut c));
                g.fill(b, 1.0f32)?; // overwritten below: b = 3a
                g.launch(&add, config, (&a, &a, c))?; // c = 2a
                g.launch(&add, config, (c.into_ref(), &a, b)) // b = 3a
            })?;
            assert_eq!(graph.node_count()?, 3);
            let exec = graph.instantiate()?;
            let stream = ctx.new_stream()?; // preallocated: made by the setup guard
            stream.scope(|s| {
                exec.launch(s)?;
                exec.launch(s)
            })?;
            drop(exec);
            Ok::<_, Error>((b.to_vec()?, c.to_vec()?))
        })?;
        Ok::<_, Error>(out)
    })
    .unwrap();
    for i in [0, 1, n / 2, n - 1] {
        assert_eq!(out.0[i], 3.0 * i as f32, "b, element {i}");
        assert_eq!(out.1[i], 2.0 * i as f32, "c, element {i}");
    }
}

/// A kernel of a `Library` (loaded with no guard) declared with the setup guard, launched in
/// the run phase: it computes, and the run phase allocates nothing from the crate's pool.
fn a_library_kernel_declared_in_setup_launches_in_the_run_phase() {
    let device = common::gpu();
    let n = 10_000;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let library = Library::from_ptx(PTX).unwrap();
    let out = with_phases(&device, ContextFlags::default(), |phases| {
        let ((add, a, mut c, stream), run) = phases.setup(|ctx| {
            // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
            // stays below all three lengths.
            let add = unsafe { library.kernel::<(In<f32>, In<f32>, Out<f32>)>(ctx, "vector_add") }?;
            Ok::<_, Error>((
                add,
                ctx.from_slice(&host)?,
                ctx.zeroed::<f32>(n)?,
                ctx.new_stream()?,
            ))
        })?;
        let config = add.config_for(n)?;
        let used = crate_pool_used(&device);
        for _ in 0..10 {
            stream.scope(|s| s.launch(&add, config, (&a, &a, &mut c)))?;
        }
        assert_eq!(crate_pool_used(&device), used, "the run phase allocated");
        run.synchronize()?;
        c.to_vec()
    })
    .unwrap();
    for i in [0, 1, n / 2, n - 1] {
        assert_eq!(out[i], 2.0 * i as f32, "element {i}");
    }
}

/// Peer access enabled with the setup guard, towards another context of the device: in the
/// run phase the token views the other context's buffer, which holds its values.
fn peer_access_enabled_in_setup_views_another_contexts_buffer_in_the_run_phase() {
    let device = common::gpu();
    let values: Vec<u32> = (0..1024).map(|i| i * 3 + 1).collect();
    let seen = with_context(&device, ContextFlags::default(), |other| {
        let theirs = other.from_slice(&values)?;
        with_phases(&device, ContextFlags::default(), |phases| {
            let (access, _run) = phases.setup(|ctx| ctx.enable_peer_access(other))?;
            access.view(&theirs)?.to_vec()
        })
    })
    .unwrap();
    assert_eq!(seen, values);
}

pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    Vec::from([
        Test {
            name: "a_graph_captured_in_setup_replays_on_a_preallocated_stream_with_the_right_values",
            needs: Needs::Gpu,
            body: a_graph_captured_in_setup_replays_on_a_preallocated_stream_with_the_right_values,
        },
        Test {
            name: "a_library_kernel_declared_in_setup_launches_in_the_run_phase",
            needs: Needs::Gpu,
            body: a_library_kernel_declared_in_setup_launches_in_the_run_phase,
        },
        Test {
            name: "peer_access_enabled_in_setup_views_another_contexts_buffer_in_the_run_phase",
            needs: Needs::Gpu,
            body: peer_access_enabled_in_setup_views_another_contexts_buffer_in_the_run_phase,
        },
        Test {
            name: "a_phased_program_computes_with_setup_memory_and_bounded_scratch",
            needs: Needs::Gpu,
            body: a_phased_program_computes_with_setup_memory_and_bounded_scratch,
        },
        Test {
            name: "buffers_of_the_setup_phase_are_freed_only_by_the_teardown",
            needs: Needs::Gpu,
            body: buffers_of_the_setup_phase_are_freed_only_by_the_teardown,
        },
        Test {
            name: "an_exhausted_scratch_pool_is_a_clear_error",
            needs: Needs::Gpu,
            body: an_exhausted_scratch_pool_is_a_clear_error,
        },
        Test {
            name: "pool_buffers_of_the_setup_phase_are_freed_only_by_the_teardown",
            needs: Needs::Gpu,
            body: pool_buffers_of_the_setup_phase_are_freed_only_by_the_teardown,
        },
        Test {
            name: "a_setup_pool_keeps_setup_buffers_until_the_teardown_and_scope_scratch_until_the_scope_ends",
            needs: Needs::Gpu,
            body: a_setup_pool_keeps_setup_buffers_until_the_teardown_and_scope_scratch_until_the_scope_ends,
        },
        Test {
            name: "managed_and_pitched_buffers_of_the_setup_phase_are_freed_only_by_the_teardown",
            needs: Needs::Gpu,
            body: managed_and_pitched_buffers_of_the_setup_phase_are_freed_only_by_the_teardown,
        },
    ])
}
