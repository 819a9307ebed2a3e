//! Errors never lost after a sticky error: a binary of its own with one test, because an
//! illegal address poisons every context of the process (see `tests/sticky_error.rs`).
//!
//! After a kernel writes through a wild pointer:
//! * a stream scope whose closure failed returns the closure's error with the scope's
//!   failed synchronization (`scope_and_teardown` for an `anyhow` closure, `scope` for one of the
//!   crate's `Error`);
//! * buffers dropped while their release fails are reported by the context's teardown,
//!   the first failure with the count, after the closure's error and the failed
//!   synchronize;
//! * the `_and_teardown` entry points return both errors for an `anyhow` closure;
//! * the crate's entry points, run again in the poisoned process, return the sticky error
//!   (the setup's, for `with_context_and_teardown`).

mod common;

use cuda_brand::{
    ContextFlags, DeviceBuffer, Error, ErrorCode, LaunchConfig, Module, Out, Stream, StreamFlags,
    with_context, with_context_and_teardown,
};

fn every_error_after_an_illegal_address_reaches_the_caller() {
    let device = common::gpu();
    common::skip_under_sanitizer("an illegal address");
    let before = common::current();
    // what the inner closure saw, checked after it
    let mut probe_closed: Option<cuda_brand::Result<()>> = None;
    let mut inner: Option<cuda_brand::Result<()>> = None;
    // an outer context of another error type: its teardown fails too, the process being
    // poisoned by the inner context's kernel
    let outer = with_context_and_teardown(&device, ContextFlags::default(), |_outer| {
        inner = Some(with_context(&device, ContextFlags::default(), |ctx| {
            let module = Module::from_ptx(ctx, include_str!("../kernels/kernels.ptx"))?;
            // SAFETY: NOT true: write_wild writes through a wild pointer. That is this
            // test's point: every error after the sticky one reaches the caller.
            let wild = unsafe { module.kernel::<(Out<f32>,)>("write_wild") }?;
            let mut target = DeviceBuffer::<f32>::zeroed(ctx, 1)?;
            let dropped: Vec<DeviceBuffer<'_, u8>> = (0..3)
                .map(|_| DeviceBuffer::zeroed(ctx, 1 << 20))
                .collect::<cuda_brand::Result<_>>()?;
            let probe = DeviceBuffer::<u8>::zeroed(ctx, 1 << 20)?;
            let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;

            // a scope whose closure fails after queueing the fault, of another error type:
            // `scope_and_teardown` returns both errors
            let failed = stream
                .scope_and_teardown(|s| {
                    s.launch(&wild, LaunchConfig::linear(1, 1), (&mut target,))?;
                    Err::<(), _>(anyhow::anyhow!("my anyhow step in the scope"))
                })
                .expect_err("the closure failed");
            assert_eq!(failed.error().to_string(), "my anyhow step in the scope");
            let sync = failed
                .teardown_error()
                .expect("the scope's synchronization failed too");
            assert_eq!(sync.code(), ErrorCode::IllegalAddress, "{failed}");

            // the plain scope, `E = Error`: the closure's error with the synchronization's
            // attached (the poisoned context fails it again)
            let e = stream
                .scope(|_| Err::<(), _>(Error::new("my step in the scope", ErrorCode::Unknown)))
                .expect_err("the closure failed");
            assert_eq!(
                e.call(),
                "my step in the scope",
                "the closure's error first: {e}"
            );
            let sync = e
                .teardown_error()
                .expect("a poisoned context fails every later synchronization");
            assert!(sync.is_sticky(), "{e}");
            assert!(e.is_sticky(), "{e}");

            // does the driver refuse frees now? `close` says so where it happens ...
            probe_closed = Some(probe.close());
            // ... and the same failure of a plain drop reaches the context's teardown; the
            // other handles are closed, so that only these three drops can be reported
            drop(dropped);
            let _ = stream.close();
            let _ = target.close();
            let _ = module.close();
            Err(Error::new("my step", ErrorCode::Unknown))
        }));
        Err::<(), _>(anyhow::anyhow!("the outer closure's error"))
    });

    // the inner context: the closure's error, then the failed synchronize, then (if frees
    // fail now) the three dropped buffers, as one report with the count
    let e = inner
        .expect("the inner closure ran")
        .expect_err("it failed");
    assert_eq!((e.call(), e.code()), ("my step", ErrorCode::Unknown), "{e}");
    let teardown: Vec<&Error> = e.teardown_errors().collect();
    assert_eq!(teardown[0].call(), "cuCtxSynchronize", "{e}");
    assert_eq!(teardown[0].code(), ErrorCode::IllegalAddress, "{e}");
    let reports: Vec<&&Error> = teardown
        .iter()
        .filter(|t| t.detail().is_some_and(|d| d.contains("::drop` failed")))
        .collect();
    match probe_closed.expect("the probe was closed") {
        Err(closed) => {
            assert_eq!(reports.len(), 1, "one report for the context: {e}");
            let report = reports[0];
            assert_eq!(report.code(), closed.code(), "{e}");
            let detail = report.detail().unwrap();
            assert!(detail.starts_with("`DeviceBuffer::drop` failed"), "{e}");
            assert!(
                detail.contains("the first of 3 handles whose release failed in `drop`"),
                "{e}"
            );
            println!("reported: {e}");
        }
        Ok(()) => {
            // this driver frees memory of a poisoned context without an error: nothing to
            // report, and nothing is
            assert!(reports.is_empty(), "{e}");
            println!("note: frees succeed after a sticky error on this driver: {e}");
        }
    }
    assert!(e.is_sticky());

    // the outer context, of `anyhow` errors: its closure's error, and its teardown's
    let failed = outer.expect_err("the outer closure failed");
    assert_eq!(failed.error().to_string(), "the outer closure's error");
    let t = failed
        .teardown_error()
        .expect("the poisoned process fails the outer teardown too");
    assert!(t.is_sticky(), "{failed}");
    assert_eq!(common::current(), before, "the stack is restored");

    // the poisoned process: a new context fails at once, before any closure runs
    let again = with_context_and_teardown(&device, ContextFlags::default(), |ctx| {
        Ok::<_, anyhow::Error>(ctx.api_version()?)
    });
    let failed = again.expect_err("every later context fails");
    assert!(
        failed.teardown_error().is_none(),
        "no teardown: the setup failed"
    );
    let setup = failed
        .error()
        .downcast_ref::<Error>()
        .expect("the crate's error");
    assert_eq!(setup.code(), ErrorCode::IllegalAddress, "{setup}");
}

gpu_test_main!(every_error_after_an_illegal_address_reaches_the_caller,);
