//! A kernel that faults: a test binary of its own, because a sticky error such as an
//! illegal address poisons every context of the process afterwards.

mod common;

use cuda_brand::{ContextFlags, Error, with_context};

fn a_kernel_that_traps_makes_teardown_return_err_without_a_panic() {
    use cuda_brand::{LaunchConfig, Module, Out, Stream, StreamFlags};
    let device = common::gpu();
    common::skip_under_sanitizer("an illegal address");
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
    // A sticky error poisons the whole process (the driver's documentation: "the process
    // must be terminated and relaunched"): every later context says so, as an `Err`.
    let again = with_context(&device, ContextFlags::default(), |ctx| ctx.api_version());
    assert_eq!(
        again.unwrap_err().code(),
        cuda_brand::ErrorCode::IllegalAddress
    );
}

gpu_test_main!(a_kernel_that_traps_makes_teardown_return_err_without_a_panic,);
