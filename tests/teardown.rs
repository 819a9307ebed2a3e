//! Teardown, measured: a test binary of its own, so that no other test creates or destroys
//! contexts at the same time and the device's free memory is a clean signal.

mod common;

use std::sync::Mutex;

use cuda_brand::{ContextFlags, Error, with_context, with_primary_context};

/// The tests of this binary run one at a time: each measures or breaks a whole context.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn a_destroyed_context_gives_its_memory_back() {
    let _serial = serial();
    let device = gpu_or_skip!();
    with_primary_context(&device, |_| {
        let free_before = common::free_memory();
        with_context(&device, ContextFlags::default(), |_| {
            // a fresh context reserves device memory of its own (hundreds of MiB on an H100)
            let free_inside = common::free_memory();
            assert!(
                free_inside < free_before,
                "free {free_inside} vs {free_before}"
            );
            Ok::<_, Error>(())
        })?;
        let free_after = common::free_memory();
        let slack = 64 << 20;
        assert!(
            free_after + slack >= free_before,
            "{free_after} + 64 MiB < {free_before}: context not destroyed"
        );
        Ok::<_, Error>(())
    })
    .unwrap();
}

#[test]
fn a_kernel_that_traps_makes_teardown_return_err_without_a_panic() {
    use cuda_brand::{LaunchConfig, Module, Out, Stream, StreamFlags};
    let _serial = serial();
    let device = gpu_or_skip!();
    if common::under_sanitizer_skip("an illegal address") {
        return;
    }
    let before = common::current();
    let result = with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../kernels/kernels.ptx"))?;
        // SAFETY: NOT true: write_wild writes through a wild pointer. That is this test's
        // point: the crate reports the resulting sticky error instead of crashing.
        let wild = unsafe { module.kernel::<(Out<f32>,)>("write_wild") }?;
        let mut buf = cuda_brand::DeviceBuffer::<f32>::zeroed(ctx, 1)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let scope = stream.scope(|s| s.launch(&wild, LaunchConfig::linear(1, 1), (&mut buf,)));
        let e = scope.expect_err("the scope's synchronization reports the fault");
        assert_eq!(e.code(), cuda_brand::ErrorCode::IllegalAddress, "{e}");
        Ok::<_, Error>(())
    });
    // the context is destroyed; its teardown synchronize reports the sticky error
    let e = result.expect_err("teardown reports the sticky error");
    assert_eq!(e.code(), cuda_brand::ErrorCode::IllegalAddress, "{e}");
    assert_eq!(common::current(), before, "the stack is restored");
    // and the device is usable again in a fresh context
    let ok = with_context(&device, ContextFlags::default(), |ctx| {
        cuda_brand::DeviceBuffer::from_slice(ctx, &[1u8])?.to_vec()
    });
    assert_eq!(ok.unwrap(), [1]);
}
