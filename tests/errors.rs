//! Errors never lost, observed on a GPU (without a sticky error; those poison the process
//! and have a binary of their own, `tests/sticky_teardown.rs`): `close()` on every handle,
//! a closure's error and its teardown's reaching the caller together, and the `try_` forms
//! refusing bad input before the driver. Each test runs alone (`tests_alone`, after the
//! other tests of the `gpu` binary): one of them watches the device's free memory.

use crate::common;

use cuda_brand::{
    ContextFlags, DeviceBuffer, DeviceBuffer2D, Error, ErrorCode, Event, EventFlags, Invalid,
    ManagedBuffer, MemoryPool, Module, PinnedBuffer, Stream, StreamFlags, with_context,
    with_context_and_teardown,
};

/// `close()` frees each kind of handle now and returns `Ok`; what it freed is gone.
fn close_releases_every_kind_of_handle_and_returns_ok() {
    common::in_context(|ctx| {
        // device memory from a pool of its own: its use drops back after the close
        let pool = MemoryPool::new(ctx)?;
        let before = pool.used_bytes()?;
        let buf = DeviceBuffer::<u8>::zeroed_in(ctx, &pool, 8 << 20)?;
        assert!(pool.used_bytes()? >= before + (8 << 20));
        buf.close()?;
        ctx.synchronize()?; // the pool's free is stream-ordered
        assert_eq!(
            pool.used_bytes()?,
            before,
            "the buffer's memory went back to the pool"
        );
        pool.close()?;
        // memory of the crate's pool, and a buffer of nothing
        DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?.close()?;
        DeviceBuffer::<u32>::zeroed(ctx, 0)?.close()?;
        // pitched memory comes from cuMemAllocPitch: the device's free memory shows it
        let free_before = common::free_memory();
        let tile = DeviceBuffer2D::<f32>::zeroed(ctx, 4096, 4096)?; // 64 MiB
        assert!(common::free_memory() + (60 << 20) <= free_before);
        tile.close()?;
        assert!(
            common::free_memory() + (4 << 20) >= free_before,
            "the 2D buffer's 64 MiB came back"
        );
        PinnedBuffer::from_slice(ctx, &[7u64; 4096])?.close()?;
        match ManagedBuffer::from_slice(ctx, &[1.5f32; 1024]) {
            Ok(managed) => managed.close()?,
            Err(e) => assert_eq!(e.code(), ErrorCode::NotSupported, "{e}"),
        }
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut event = Event::new(ctx, EventFlags::new())?;
        event.record(&stream)?.synchronize()?;
        event.close()?;
        stream.close()?;
        let module = Module::from_ptx(ctx, include_str!("../kernels/kernels.ptx"))?;
        module.close()?;
        Ok(())
    });
}

/// Pushes the primary context of `device` on top of the calling thread's stack and
/// "forgets" to pop it, so that the pop of the enclosing `with_context` fails. Returns the
/// primary context; [`undo_forgotten_push`] cleans up.
fn push_and_forget(device: &cuda_brand::Device) -> cuda_brand::sys::CUcontext {
    let driver = common::driver();
    let mut primary = std::ptr::null_mut();
    // SAFETY: retains the primary context, released by `undo_forgotten_push`.
    let rc = unsafe { (driver.cuDevicePrimaryCtxRetain)(&mut primary, device.as_raw()) };
    assert_eq!(rc, 0);
    // SAFETY (of the test): pushes a live context and does not pop it.
    assert_eq!(unsafe { (driver.cuCtxPushCurrent_v2)(primary) }, 0);
    primary
}

/// Undoes [`push_and_forget`] after the enclosing `with_context` returned: pops the primary
/// context (which the crate put back on top), releases it, and destroys the context the
/// crate left alive under it.
fn undo_forgotten_push(
    device: &cuda_brand::Device,
    primary: cuda_brand::sys::CUcontext,
    created: cuda_brand::sys::CUcontext,
) {
    let driver = common::driver();
    assert_eq!(
        common::current(),
        primary,
        "the foreign context was put back"
    );
    let mut popped = std::ptr::null_mut();
    // SAFETY: undoes the test's push and retain.
    unsafe {
        assert_eq!((driver.cuCtxPopCurrent_v2)(&mut popped), 0);
        assert_eq!((driver.cuDevicePrimaryCtxRelease_v2)(device.as_raw()), 0);
    }
    assert_eq!(popped, primary);
    assert_eq!(
        common::current(),
        created,
        "the crate's context was left alive"
    );
    // SAFETY: the test takes over the context the crate left alive; it is current, so the
    // destroy also pops it.
    assert_eq!(unsafe { (driver.cuCtxDestroy_v2)(created) }, 0);
}

/// The closure fails and then the teardown's pop fails too (unsafe code left a context
/// pushed): with `E = Error` the plain `with_context` returns the closure's error with the
/// pop's attached; with another error type `with_context_and_teardown` returns both.
fn a_closure_error_and_a_failed_pop_both_reach_the_caller() {
    let device = common::gpu();
    let before = common::current();

    let mut pushed = (std::ptr::null_mut(), std::ptr::null_mut());
    let result = with_context(&device, ContextFlags::default(), |ctx| {
        pushed = (push_and_forget(&device), common::handle(ctx));
        Err::<(), _>(Error::with_detail(
            "my step",
            ErrorCode::InvalidValue,
            "the closure's own error",
        ))
    });
    undo_forgotten_push(&device, pushed.0, pushed.1);
    let e = result.unwrap_err();
    assert_eq!(
        (e.call(), e.detail()),
        ("my step", Some("the closure's own error")),
        "the closure's error comes first: {e}"
    );
    let teardown = e.teardown_error().expect("the failed pop is kept");
    assert_eq!(teardown.call(), "cuCtxPopCurrent_v2");
    assert_eq!(teardown.code(), ErrorCode::InvalidContext);
    assert!(
        teardown
            .detail()
            .unwrap()
            .contains("the context was left alive"),
        "{e}"
    );
    assert_eq!(e.teardown_errors().count(), 1, "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("my step failed: CUDA_ERROR_INVALID_VALUE (invalid argument): the closure's own error; also, during teardown: cuCtxPopCurrent_v2 failed: CUDA_ERROR_INVALID_CONTEXT"),
        "{text}"
    );
    assert!(!e.is_sticky());
    assert_eq!(common::current(), before, "the stack is whole again");

    // any error type: `with_context_and_teardown` returns both
    let mut pushed = (std::ptr::null_mut(), std::ptr::null_mut());
    let result = with_context_and_teardown(&device, ContextFlags::default(), |ctx| {
        pushed = (push_and_forget(&device), common::handle(ctx));
        Err::<u32, anyhow::Error>(anyhow::anyhow!("the closure's anyhow error"))
    });
    undo_forgotten_push(&device, pushed.0, pushed.1);
    let failed = result.unwrap_err();
    assert_eq!(failed.error().to_string(), "the closure's anyhow error");
    let teardown = failed.teardown_error().expect("the failed pop is kept");
    assert_eq!(
        (teardown.call(), teardown.code()),
        ("cuCtxPopCurrent_v2", ErrorCode::InvalidContext)
    );
    assert!(
        failed.to_string().starts_with(
            "the closure's anyhow error; also, during teardown: cuCtxPopCurrent_v2 failed"
        ),
        "{failed}"
    );
    assert_eq!(common::current(), before);

    // a closure that succeeds: the try_ form returns its value, nothing else
    let v = with_context_and_teardown(&device, ContextFlags::default(), |ctx| {
        Ok::<_, anyhow::Error>(ctx.api_version()?)
    });
    assert!(v.unwrap() >= 3020);
}

/// The `_and_teardown` entry points other than `with_context_and_teardown`: a closure error
/// with a teardown that succeeds comes back alone; a value comes back as it is.
fn enter_and_scope_and_teardown_return_the_closures_error_and_value() {
    common::in_context(|ctx| {
        let shared = ctx.share();
        let (ok, failed) = std::thread::scope(|s| {
            let ok = s
                .spawn(move || shared.enter_and_teardown(|ctx| ctx.api_version()))
                .join()
                .unwrap();
            let failed = s
                .spawn(move || {
                    shared.enter_and_teardown(|_| Err::<(), _>(anyhow::anyhow!("worker step")))
                })
                .join()
                .unwrap();
            (ok, failed)
        });
        assert_eq!(ok.unwrap(), ctx.api_version()?);
        let failed = failed.unwrap_err();
        assert_eq!(failed.error().to_string(), "worker step");
        assert!(failed.teardown_error().is_none(), "the pop succeeded");

        let stream = ctx.new_stream()?;
        let mut buf = ctx.zeroed::<u32>(256)?;
        let mut back = vec![0u32; 256];
        let n = stream.scope_and_teardown(|s| {
            let d = s.bind_mut(&mut buf);
            s.fill(d, 9)?;
            s.copy_to_host(&mut back, d.into_ref())?;
            Ok::<_, anyhow::Error>(d.len())
        });
        assert_eq!(n.unwrap(), 256);
        assert_eq!(back, vec![9; 256]);
        let failed = stream
            .scope_and_teardown(|s| {
                s.fill(&mut buf, 1)?;
                Err::<(), _>(anyhow::anyhow!("scope step"))
            })
            .unwrap_err();
        assert_eq!(failed.error().to_string(), "scope step");
        assert!(
            failed.teardown_error().is_none(),
            "the synchronization succeeded"
        );
        assert_eq!(
            buf.to_vec()?,
            vec![1; 256],
            "the queued fill ran before the scope returned"
        );
        let other = ctx.new_stream()?;
        let both = stream.scope_pair_and_teardown(&other, |a, b| {
            let d = a.bind_mut(&mut buf);
            a.fill(d, 4)?;
            b.copy_to_host(&mut back, d.into_ref())?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        });
        assert!(both.is_ok());
        assert_eq!(back, vec![4; 256]);
        Ok(())
    });
}

/// Every copy refuses bad input with an [`Invalid`] error before any driver call (the
/// memory is untouched), and does the operation on good input.
fn copies_refuse_bad_input_before_the_driver_and_run_good_input() {
    common::in_context(|ctx| {
        let mut buf = ctx.zeroed::<u32>(4)?;
        let e = buf.copy_from_host(&[1, 2, 3]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "copy_from_host failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): the lengths differ: 4 expected, 3 found"
        );
        let e = buf.copy_to_host(&mut [0; 5]).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&Invalid::LengthMismatch {
                expected: 5,
                found: 4
            })
        );
        let other = ctx.zeroed::<u32>(3)?;
        assert!(matches!(
            buf.copy_from_device(&other).unwrap_err().invalid(),
            Some(Invalid::LengthMismatch { .. })
        ));
        assert!(buf.split_at_checked(5).is_none());
        assert_eq!(buf.to_vec()?, [0; 4], "nothing reached the driver");
        buf.copy_from_host(&[1, 2, 3, 4])?;
        let mut back = [0u32; 4];
        buf.copy_to_host(&mut back)?;
        assert_eq!(back, [1, 2, 3, 4]);
        let (left, right) = buf.split_at_mut(2);
        left.copy_from_device(right)?;
        assert_eq!(buf.to_vec()?, [3, 4, 3, 4]);

        let stream = ctx.new_stream()?;
        let mut host = vec![0u32; 3];
        let e = stream
            .scope(|s| s.copy_from_host(&mut buf, &[9, 9, 9]))
            .unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("copy_from_host", ErrorCode::InvalidInput)
        );
        let e = stream
            .scope(|s| s.copy_to_host(&mut host, &buf))
            .unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&Invalid::LengthMismatch {
                expected: 3,
                found: 4
            })
        );
        let e = stream
            .scope(|s| s.copy_from_device(&mut buf, &other))
            .unwrap_err();
        assert_eq!(e.call(), "copy_from_device");
        assert_eq!(buf.to_vec()?, [3, 4, 3, 4], "nothing reached the driver");
        stream.scope(|s| {
            let d = s.bind_mut(&mut buf);
            s.copy_from_host(d, &[5, 6, 7, 8])?;
            s.copy_to_host(&mut host, d.slice(1..).into_ref())
        })?;
        assert_eq!(host, [6, 7, 8]);

        let mut tile = DeviceBuffer2D::<u16>::zeroed(ctx, 3, 2)?;
        let image: Vec<u16> = (0..10).collect();
        let e = tile.copy_from_host(&image[..7], 5).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&Invalid::OutOfBounds {
                start: 0,
                end: 8,
                len: 7
            })
        );
        let e = stream
            .scope(|s| s.copy_2d_from_host(&mut tile, &image[..7], 5))
            .unwrap_err();
        assert_eq!(e.call(), "copy_2d_from_host");
        let wide = DeviceBuffer2D::<u16>::zeroed(ctx, 2, 3)?;
        let e = tile.copy_from_device(&wide).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&Invalid::ShapeMismatch {
                expected: [3, 2, 1],
                found: [2, 3, 1]
            })
        );
        assert_eq!(tile.to_vec()?, [0; 6], "nothing reached the driver");
        tile.copy_from_host(&image, 5)?;
        let mut rows = vec![0u16; 6];
        stream.scope(|s| s.copy_2d_to_host(&mut rows, 3, &tile))?;
        assert_eq!(rows, [0, 1, 2, 5, 6, 7]);
        Ok(())
    });
}

/// This file's tests, each to run with no other test of its binary beside it (see the
/// file's header; `tests/gpu.rs` runs them after the others).
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    Vec::from([
        Test {
            name: "close_releases_every_kind_of_handle_and_returns_ok",
            needs: Needs::Gpu,
            body: close_releases_every_kind_of_handle_and_returns_ok,
        },
        Test {
            name: "a_closure_error_and_a_failed_pop_both_reach_the_caller",
            needs: Needs::Gpu,
            body: a_closure_error_and_a_failed_pop_both_reach_the_caller,
        },
        Test {
            name: "enter_and_scope_and_teardown_return_the_closures_error_and_value",
            needs: Needs::Gpu,
            body: enter_and_scope_and_teardown_return_the_closures_error_and_value,
        },
        Test {
            name: "copies_refuse_bad_input_before_the_driver_and_run_good_input",
            needs: Needs::Gpu,
            body: copies_refuse_bad_input_before_the_driver_and_run_good_input,
        },
    ])
}
