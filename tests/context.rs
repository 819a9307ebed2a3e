//! Contexts on a real GPU: creation and teardown, the current-context discipline, panics,
//! shared contexts on scoped threads, and every getter and setter. Each test is ignored
//! (the harness says why) when there is no device, and fails instead with
//! `CUDA_BRAND_REQUIRE_GPU=1`.

use crate::common;

use std::panic::{self, AssertUnwindSafe};

use cuda_brand::{
    CacheConfig, ContextFlags, Device, DeviceAttribute, Error, ErrorCode, ResourceLimit,
    Scheduling, SharedMemoryConfig, with_context, with_primary_context,
};

fn device_properties_are_plausible() {
    let device = common::gpu();
    let n = Device::count().unwrap();
    assert!(n >= 1);
    assert_eq!(Device::all().unwrap().len(), n);
    assert!(!device.name().unwrap().is_empty());
    assert!(device.total_memory().unwrap() > 1 << 30);
    let cc = device.compute_capability().unwrap();
    assert!(cc.major >= 3, "{cc}");
    assert_eq!(
        device
            .attribute(DeviceAttribute::ComputeCapabilityMajor)
            .unwrap(),
        cc.major as i32
    );
    assert!(
        device
            .attribute(DeviceAttribute::MaxThreadsPerBlock)
            .unwrap()
            >= 512
    );
    assert!(
        device
            .attribute(DeviceAttribute::MultiprocessorCount)
            .unwrap()
            >= 1
    );
    let uuid = device.uuid().unwrap();
    assert_ne!(uuid.0, [0; 16]);
    assert!(
        uuid.to_string().starts_with("GPU-") && uuid.to_string().len() == 40,
        "{uuid}"
    );
    assert_eq!(device.ordinal(), 0);
}

fn an_out_of_range_ordinal_is_a_clear_error() {
    let _ = common::gpu();
    let n = Device::count().unwrap();
    let e = Device::get(n).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidDevice);
    assert_eq!(
        e.to_string(),
        format!(
            "Device::get failed: CUDA_ERROR_INVALID_DEVICE (invalid device ordinal): ordinal {n} is out of range: the driver sees {n} device(s)"
        )
    );
}

fn an_unknown_attribute_is_an_error() {
    let device = common::gpu();
    common::skip_under_sanitizer("an unknown attribute");
    let e = device
        .attribute(DeviceAttribute::Other(100_000))
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidValue); // the driver's own
    assert_eq!(e.call(), "cuDeviceGetAttribute");
}

fn with_context_makes_its_context_current_and_restores_the_previous_one() {
    let device = common::gpu();
    let before = common::current();
    let raw = with_context(&device, ContextFlags::default(), |ctx| {
        assert_eq!(
            common::current(),
            common::handle(ctx),
            "the new context is current inside"
        );
        assert_eq!(ctx.device()?, device);
        Ok::<_, Error>(common::handle(ctx) as usize)
    })
    .unwrap();
    assert_ne!(raw, 0);
    assert_eq!(
        common::current(),
        before,
        "what was current before is current again"
    );
}

fn primary_context_is_one_context_retained_twice_when_nested() {
    let device = common::gpu();
    let version = with_primary_context(&device, |ctx| {
        assert_eq!(common::current(), common::handle(ctx));
        assert!(device.primary_context_state()?.active, "retained inside");
        ctx.api_version()
    })
    .unwrap();
    assert!(version >= 3020, "{version}");
    // (its release is observed in tests/teardown.rs, which runs alone)
    let nested_same = with_primary_context(&device, |a| {
        with_primary_context(&device, |b| {
            Ok::<_, Error>(common::handle(a) == common::handle(b))
        })
    })
    .unwrap();
    assert!(
        nested_same,
        "the primary context is one context, retained twice"
    );
}

fn nesting_restores_the_previous_current_context_and_the_outer_guard_still_works() {
    let device = common::gpu();
    assert!(
        common::current().is_null(),
        "a test thread starts with no current context"
    );
    with_context(&device, ContextFlags::default(), |outer| {
        let outer_raw = common::handle(outer);
        with_context(
            &device,
            ContextFlags::new().schedule(Scheduling::Yield),
            |inner| {
                assert_ne!(common::handle(inner), outer_raw);
                assert_eq!(common::current(), common::handle(inner));
                // the outer guard works inside, and leaves the inner context current
                assert_eq!(outer.flags()?.scheduling(), Scheduling::Auto);
                outer.synchronize()?;
                assert_eq!(common::current(), common::handle(inner));
                assert_eq!(inner.flags()?.scheduling(), Scheduling::Yield);
                Ok::<_, Error>(())
            },
        )?;
        assert_eq!(
            common::current(),
            outer_raw,
            "the outer context is current again"
        );
        Ok::<_, Error>(())
    })
    .unwrap();
    assert!(common::current().is_null());
}

fn a_panic_in_the_closure_tears_down_and_restores_the_stack() {
    let device = common::gpu();
    with_primary_context(&device, |outer| {
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            let _ = with_context(
                &device,
                ContextFlags::default(),
                |inner| -> Result<(), Error> {
                    assert_eq!(common::current(), common::handle(inner));
                    panic!("boom inside the context");
                },
            );
        }));
        let payload = caught.expect_err("the panic resumes after teardown");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"boom inside the context")
        );
        assert_eq!(
            common::current(),
            common::handle(outer),
            "the outer context is current again"
        );
        outer.synchronize()
    })
    .unwrap();
}

fn a_closure_error_is_returned_and_the_context_still_torn_down() {
    let device = common::gpu();
    let before = common::current();
    #[derive(Debug, PartialEq)]
    enum AppError {
        Cuda(ErrorCode),
        Mine(&'static str),
    }
    impl From<Error> for AppError {
        fn from(e: Error) -> Self {
            AppError::Cuda(e.code())
        }
    }
    let result: Result<(), AppError> = with_context(&device, ContextFlags::default(), |_| {
        Err(AppError::Mine("mine"))
    });
    assert_eq!(result.unwrap_err(), AppError::Mine("mine"));
    assert_eq!(common::current(), before);
}

fn a_shared_context_is_entered_from_four_scoped_threads() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let main_raw = common::handle(ctx) as usize;
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|i| {
                    s.spawn(move || {
                        assert!(
                            common::current().is_null(),
                            "worker {i} starts with nothing current"
                        );
                        let seen = shared.enter(|ctx| {
                            assert_eq!(common::current() as usize, main_raw);
                            ctx.synchronize()?;
                            Ok::<_, Error>((
                                common::handle(ctx) as usize,
                                ctx.stream_priority_range()?,
                            ))
                        })?;
                        assert!(
                            common::current().is_null(),
                            "worker {i}: the stack is restored"
                        );
                        Ok::<_, Error>(seen)
                    })
                })
                .collect();
            for w in workers {
                let (raw, range) = w.join().unwrap()?;
                assert_eq!(raw, main_raw);
                assert_eq!(range, ctx.stream_priority_range()?);
            }
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

fn a_panic_inside_enter_restores_the_worker_stack() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        std::thread::scope(|s| {
            s.spawn(move || {
                let caught = panic::catch_unwind(AssertUnwindSafe(|| {
                    let _ = shared.enter(|_| -> Result<(), Error> { panic!("worker panic") });
                }));
                assert!(caught.is_err());
                assert!(common::current().is_null());
            })
            .join()
            .unwrap();
        });
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn flags_given_at_creation_are_read_back() {
    let device = common::gpu();
    let flags = ContextFlags::new()
        .schedule(Scheduling::BlockingSync)
        .keep_local_memory(true);
    let got = with_context(&device, flags, |ctx| ctx.flags()).unwrap();
    assert_eq!(got.scheduling(), Scheduling::BlockingSync);
    assert!(got.keeps_local_memory());
}

fn every_getter_and_setter_round_trips() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        assert!(ctx.api_version()? >= 3020);
        assert_eq!(ctx.device()?, device);

        for config in [
            CacheConfig::PreferShared,
            CacheConfig::PreferL1,
            CacheConfig::PreferEqual,
            CacheConfig::PreferNone,
        ] {
            ctx.set_cache_config(config)?;
            assert_eq!(ctx.cache_config()?, config);
        }

        // Devices since Maxwell have a fixed bank size: setting is accepted, the reading
        // stays what the hardware has. Setting what was read must round-trip.
        let bank = ctx.shared_memory_config()?;
        assert_ne!(
            bank,
            SharedMemoryConfig::DefaultBankSize,
            "the driver reports the real size"
        );
        ctx.set_shared_memory_config(SharedMemoryConfig::EightByteBankSize)?;
        ctx.set_shared_memory_config(bank)?;
        assert_eq!(ctx.shared_memory_config()?, bank);

        for (limit, value) in [
            (ResourceLimit::StackSize, 4096),
            (ResourceLimit::PrintfFifoSize, 4 << 20),
            (ResourceLimit::MallocHeapSize, 32 << 20),
        ] {
            ctx.set_limit(limit, value)?;
            assert_eq!(ctx.limit(limit)?, value, "{limit:?}");
        }

        let range = ctx.stream_priority_range()?;
        assert!(range.greatest <= range.least, "{range:?}");
        assert!(range.contains(0));
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn an_impossible_limit_is_an_error() {
    let device = common::gpu();
    common::skip_under_sanitizer("an impossible limit");
    let e = with_context(&device, ContextFlags::default(), |ctx| {
        ctx.set_limit(ResourceLimit::StackSize, usize::MAX)
    })
    .unwrap_err();
    assert_eq!(e.call(), "cuCtxSetLimit");
}

fn a_raw_context_is_branded_and_not_destroyed() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |owner| {
        let raw = common::handle(owner);
        with_primary_context(&device, |_| {
            // SAFETY: `owner`'s context lives until the outer closure ends.
            let seen = unsafe {
                cuda_brand::with_raw_context(raw, |borrowed| {
                    Ok::<_, Error>(common::handle(borrowed))
                })
            }?;
            assert_eq!(seen, raw);
            Ok::<_, Error>(())
        })?;
        // still alive: it answers
        owner.synchronize()?;
        assert!(owner.api_version()? > 0);
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn unsafe_code_that_leaves_a_context_pushed_is_reported_at_teardown() {
    let device = common::gpu();
    let driver = common::driver();
    let before = common::current();
    let mut primary = std::ptr::null_mut();
    // SAFETY: retains the primary context, released below.
    let rc = unsafe { (driver.cuDevicePrimaryCtxRetain)(&mut primary, device.as_raw()) };
    assert_eq!(rc, 0);
    let mut created = std::ptr::null_mut();
    let result = with_context(&device, ContextFlags::default(), |ctx| {
        created = common::handle(ctx);
        // SAFETY (of the test): pushes a live context and "forgets" to pop it.
        let rc = unsafe { (driver.cuCtxPushCurrent_v2)(primary) };
        assert_eq!(rc, 0);
        Ok::<_, Error>(())
    });
    let e = result.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidContext);
    let detail = e.detail().unwrap();
    assert!(detail.contains("not on top of this thread's stack"), "{e}");
    assert!(detail.contains("the context was left alive"), "{e}");
    // the foreign context was put back, not lost
    assert_eq!(common::current(), primary);
    let mut popped = std::ptr::null_mut();
    // SAFETY: undoes the test's push and retain.
    unsafe {
        assert_eq!((driver.cuCtxPopCurrent_v2)(&mut popped), 0);
        assert_eq!((driver.cuDevicePrimaryCtxRelease_v2)(device.as_raw()), 0);
    }
    assert_eq!(popped, primary);
    // The crate did not destroy its context, which was still on the stack: it is current
    // again now, alive (the driver destroys it without complaint), and the stack is whole.
    assert_eq!(common::current(), created);
    // SAFETY: the test takes over the context the crate left alive; it is current, so the
    // destroy also pops it.
    assert_eq!(unsafe { (driver.cuCtxDestroy_v2)(created) }, 0);
    assert_eq!(common::current(), before);
}

/// The two hot teardowns, the plain pop of `SharedContext::enter` and the pop of
/// `with_raw_context`, stay exact: unsafe code in the closure leaves another context pushed,
/// the crate puts it back on top, and the closure's error comes first with the pop's
/// attached. The test then undoes its push and the crate's unpopped push.
fn a_context_left_pushed_in_enter_or_a_raw_context_is_put_back_and_reported() {
    let device = common::gpu();
    let driver = common::driver();
    let before = common::current();
    let mut primary = std::ptr::null_mut();
    // SAFETY: retains the primary context, released below.
    let rc = unsafe { (driver.cuDevicePrimaryCtxRetain)(&mut primary, device.as_raw()) };
    assert_eq!(rc, 0);
    with_context(&device, ContextFlags::default(), |owner| {
        let raw = common::handle(owner);
        let push_and_fail = || {
            // SAFETY (of the test): pushes a live context and "forgets" to pop it.
            assert_eq!(unsafe { (driver.cuCtxPushCurrent_v2)(primary) }, 0);
            Err::<(), _>(Error::with_detail(
                "my step",
                ErrorCode::InvalidValue,
                "mine",
            ))
        };
        let entered = owner.share().enter(|_| push_and_fail());
        // SAFETY: `owner`'s context lives until this closure ends.
        let borrowed = unsafe { cuda_brand::with_raw_context(raw, |_| push_and_fail()) };
        for e in [entered.unwrap_err(), borrowed.unwrap_err()] {
            assert_eq!(e.call(), "my step", "the closure's error comes first: {e}");
            let pop = e.teardown_error().expect("the failed pop is kept");
            assert_eq!(pop.call(), "cuCtxPopCurrent_v2");
            assert_eq!(pop.code(), ErrorCode::InvalidContext);
            assert!(pop.detail().unwrap().contains("not on top"), "{e}");
        }
        // each entry left [owner, primary] on the stack, the foreign context put back on top
        for _ in 0..2 {
            let mut popped = std::ptr::null_mut();
            // SAFETY: undoes the test's push, then the crate's push that stayed under it.
            unsafe {
                assert_eq!((driver.cuCtxPopCurrent_v2)(&mut popped), 0);
                assert_eq!(popped, primary);
                assert_eq!((driver.cuCtxPopCurrent_v2)(&mut popped), 0);
                assert_eq!(popped, raw);
            }
        }
        assert_eq!(common::current(), raw);
        Ok::<_, Error>(())
    })
    .unwrap();
    // SAFETY: balances the retain above.
    assert_eq!(
        unsafe { (driver.cuDevicePrimaryCtxRelease_v2)(device.as_raw()) },
        0
    );
    assert_eq!(common::current(), before);
}

gpu_tests!(
    device_properties_are_plausible,
    an_out_of_range_ordinal_is_a_clear_error,
    an_unknown_attribute_is_an_error,
    with_context_makes_its_context_current_and_restores_the_previous_one,
    primary_context_is_one_context_retained_twice_when_nested,
    nesting_restores_the_previous_current_context_and_the_outer_guard_still_works,
    a_panic_in_the_closure_tears_down_and_restores_the_stack,
    a_closure_error_is_returned_and_the_context_still_torn_down,
    a_shared_context_is_entered_from_four_scoped_threads,
    a_panic_inside_enter_restores_the_worker_stack,
    flags_given_at_creation_are_read_back,
    every_getter_and_setter_round_trips,
    an_impossible_limit_is_an_error,
    a_raw_context_is_branded_and_not_destroyed,
    unsafe_code_that_leaves_a_context_pushed_is_reported_at_teardown,
    a_context_left_pushed_in_enter_or_a_raw_context_is_put_back_and_reported,
);
