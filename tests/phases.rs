//! Setup and run phases (`with_phases`) on a real GPU. Its tests run one at a time: they
//! read the crate pool's statistics, which other tests' allocations would change.

mod common;

use cuda_brand::prelude::*;
use cuda_brand::{ErrorCode, MemoryPool, with_phases};

const PTX: &str = include_str!("../kernels/kernels.ptx");

/// Bytes in use in the crate's pool of device 0 (looked at through the primary context,
/// which may be pushed on top of any other).
fn crate_pool_used(device: &Device) -> u64 {
    with_primary_context(device, |p| MemoryPool::of_device(p)?.used_bytes()).unwrap()
}

fn a_phased_program_computes_with_setup_memory_and_bounded_scratch() {
    let device = gpu_or_skip!();
    let n = 100_000;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let out = with_phases(&device, ContextFlags::default(), |phases| {
        let ((a, mut c, stream, scratch, module, mut pinned), run) = phases.setup(|ctx| {
            Ok::<_, Error>((
                ctx.from_slice(&host)?,
                ctx.zeroed::<f32>(n)?,
                ctx.stream()?,
                MemoryPool::with_max_size(ctx, 4 << 20)?,
                ctx.load_ptx(PTX)?,
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
                s.copy_to_host(&mut pinned, c)
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
    let device = gpu_or_skip!();
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
    let device = gpu_or_skip!();
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((stream, scratch), _run) = phases.setup(|ctx| {
            Ok::<_, Error>((ctx.stream()?, MemoryPool::with_max_size(ctx, 2 << 20)?))
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

fn main() -> std::process::ExitCode {
    use common::harness::{Needs, Test, run_serial};
    run_serial(vec![
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
    ])
}
