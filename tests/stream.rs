//! Streams, scopes and events on a real GPU. Skips without a device; fails instead with
//! `CUDA_BRAND_REQUIRE_GPU=1`.

use crate::common;

use cuda_brand::{
    ContextFlags, DeviceBuffer, Error, ErrorCode, Event, EventFlags, PinnedBuffer, Stream,
    StreamFlags, with_context,
};

fn async_copies_through_pinned_memory_round_trip_in_a_scope() {
    common::in_context(|ctx| {
        let n = 4 << 20; // 16 MiB of f32
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let src = PinnedBuffer::from_slice(ctx, &(0..n).map(|i| i as f32).collect::<Vec<_>>())?;
        let mut dst = PinnedBuffer::<f32>::zeroed(ctx, n)?;
        let mut dev = DeviceBuffer::<f32>::zeroed(ctx, n)?;
        stream.scope(|s| {
            let d = s.bind_mut(&mut dev);
            s.copy_from_host(d, &src)?;
            s.copy_to_host(&mut dst, d.into_ref())?;
            Ok::<_, Error>(())
        })?;
        assert!(stream.is_idle()?, "the scope synchronized");
        assert!(dst.iter().enumerate().all(|(i, &x)| x == i as f32));
        Ok(())
    });
}

fn async_copies_from_plain_slices_device_to_device_and_fill() {
    common::in_context(|ctx| {
        let stream = Stream::new(ctx, StreamFlags::Default)?;
        let host: Vec<u32> = (0..10_000).collect();
        let mut a = DeviceBuffer::<u32>::zeroed(ctx, host.len())?;
        let mut b = DeviceBuffer::<u32>::zeroed(ctx, host.len())?;
        let mut back = vec![0u32; host.len()];
        let mut head = vec![0u32; 10];
        stream.scope(|s| {
            let (a, b) = (s.bind_mut(&mut a), s.bind_mut(&mut b));
            s.copy_from_host(a, &host)?;
            s.copy_from_device(b, a.into_ref())?;
            s.fill(a, 5u32)?;
            s.copy_to_host(&mut back, b.into_ref())?;
            s.copy_to_host(&mut head, a.slice(..10).into_ref())?;
            assert_eq!(a.slice(4..=5).len(), 2);
            Ok::<_, Error>(())
        })?;
        assert_eq!(back, host);
        assert_eq!(head, [5; 10]);
        assert_eq!(a.to_vec()?, vec![5; host.len()]);
        Ok(())
    });
}

fn stream_ordered_allocation_is_zeroed_usable_and_freed() {
    common::in_context(|ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut out = vec![1u32; 1 << 16];
        let mut out2 = vec![0i16; 300];
        stream.scope(|s| {
            let zeroed = s.alloc_zeroed::<u32>(1 << 16)?;
            assert_ne!(
                // SAFETY: only queried while the scope holds `zeroed`.
                common::mempool_of(unsafe { zeroed.as_device_ptr() }),
                0,
                "from the stream's memory pool"
            );
            s.copy_to_host(&mut out, zeroed.into_ref())?;
            // SAFETY: filled before it is read.
            let raw = unsafe { s.alloc::<i16>(300) }?;
            s.fill(raw, -9i16)?;
            s.copy_to_host(&mut out2, raw.into_ref())?;
            let empty = s.alloc_zeroed::<u8>(0)?;
            assert!(empty.is_empty());
            Ok::<_, Error>(())
        })?;
        assert!(out.iter().all(|&x| x == 0));
        assert_eq!(out2, vec![-9; 300]);
        // many allocations in a row all come back (the sanitizer run checks for leaks)
        for _ in 0..100 {
            stream.scope(|s| s.alloc_zeroed::<u8>(1024).map(drop))?;
        }
        Ok(())
    });
}

fn a_scope_synchronizes_even_when_its_closure_fails_or_panics() {
    // The copy lands in pinned memory behind a kernel that spins for about 50 ms, so a scope
    // that returned without waiting would leave `host` untouched: only the synchronization
    // makes it complete when the scope returns.
    common::in_context(|ctx| {
        let module = cuda_brand::Module::from_ptx(ctx, include_str!("../kernels/kernels.ptx"))?;
        // SAFETY: spin(long long) writes nothing.
        let spin = unsafe { module.kernel::<(i64,)>("spin") }?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let n = 1 << 20;
        let dev = DeviceBuffer::from_slice(ctx, &vec![7u32; n])?;
        let mut host = PinnedBuffer::<u32>::zeroed(ctx, n)?;
        let result: Result<(), Error> = stream.scope(|s| {
            s.launch(
                &spin,
                cuda_brand::LaunchConfig::linear(1, 1),
                (100_000_000i64,),
            )?;
            s.copy_to_host(&mut host, &dev)?;
            Err(Error::new("my step", ErrorCode::NotReady))
        });
        assert_eq!(result.unwrap_err().call(), "my step");
        assert!(host.iter().all(|&x| x == 7), "complete after an Err");
        host.fill(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = stream.scope(|s| -> Result<(), Error> {
                s.launch(
                    &spin,
                    cuda_brand::LaunchConfig::linear(1, 1),
                    (100_000_000i64,),
                )?;
                s.copy_to_host(&mut host, &dev)?;
                panic!("mid-scope")
            });
        }));
        assert!(caught.is_err());
        assert!(
            host.iter().all(|&x| x == 7),
            "complete before the panic resumed"
        );
        assert!(stream.is_idle()?);
        Ok(())
    });
}

fn events_time_a_copy() {
    common::in_context(|ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let (mut start, mut end) = (
            Event::new(ctx, EventFlags::new())?,
            Event::new(ctx, EventFlags::new())?,
        );
        let host = PinnedBuffer::<u8>::zeroed(ctx, 64 << 20)?;
        let mut dev = DeviceBuffer::<u8>::zeroed(ctx, 64 << 20)?;
        let (t0, t1) = stream.scope(|s| {
            let t0 = start.record(s)?;
            s.copy_from_host(&mut dev, &host)?;
            end.record(s).map(|t1| (t0, t1))
        })?;
        assert!(t1.is_complete()?);
        t1.synchronize()?;
        let ms = t0.elapsed(&t1)?.as_secs_f32() * 1e3;
        let gbps = (64 << 20) as f64 / (ms as f64 * 1e-3) / 1e9;
        println!("64 MiB host-to-device from pinned memory: {ms:.3} ms, {gbps:.1} GB/s");
        assert!(ms > 0.0 && gbps < 1000.0, "{ms} ms");
        // (an event without timing cannot be timed: a compile error now,
        // ui-tests/fail/9_typestate/event_timed_without_timing.rs)
        let mut untimed = Event::without_timing(ctx, EventFlags::new())?;
        let done = untimed.record(&stream)?;
        done.synchronize()?;
        assert!(done.is_complete()?);
        Ok(())
    });
}

fn stream_priorities_are_validated_against_the_context_range() {
    common::in_context(|ctx| {
        let range = ctx.stream_priority_range()?;
        let high = Stream::with_priority(ctx, StreamFlags::NonBlocking, range.greatest)?;
        assert_eq!(high.priority()?, range.greatest);
        assert_eq!(high.flags()?, StreamFlags::NonBlocking);
        let low = Stream::new(ctx, StreamFlags::Default)?;
        assert_eq!(low.priority()?, range.least);
        assert_eq!(low.flags()?, StreamFlags::Default);
        let e = Stream::with_priority(ctx, StreamFlags::Default, range.greatest - 1).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(
            e.to_string(),
            format!(
                "Stream::with_priority failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): priority {} is outside the context's range {} (highest) to {} (lowest)",
                range.greatest - 1,
                range.greatest,
                range.least
            )
        );
        assert!(Stream::with_priority(ctx, StreamFlags::Default, range.least + 1).is_err());
        Ok(())
    });
}

fn two_streams_are_ordered_by_an_event() {
    common::in_context(|ctx| {
        let (a, b) = (
            Stream::new(ctx, StreamFlags::NonBlocking)?,
            Stream::new(ctx, StreamFlags::NonBlocking)?,
        );
        let mut done = Event::without_timing(ctx, EventFlags::new())?;
        let n = 64 << 20;
        let mut big = DeviceBuffer::<u8>::zeroed(ctx, n)?;
        let mut host = PinnedBuffer::<u8>::zeroed(ctx, n)?;
        for round in 1..=3u8 {
            a.scope_pair(&b, |sa, sb| {
                let d = sa.bind_mut(&mut big);
                sa.fill(d, round)?;
                sa.fill(d, round.wrapping_mul(3))?;
                let filled = done.record(&a)?;
                sb.wait_event(&filled)?;
                sb.copy_to_host(&mut host, d.into_ref())?;
                Ok::<_, Error>(())
            })?;
            let want = round.wrapping_mul(3);
            assert!(
                host.iter().all(|&x| x == want),
                "round {round}: b read before a finished"
            );
        }
        Ok(())
    });
}

fn a_stream_of_an_outer_context_works_inside_a_nested_one() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |outer| {
        let stream = Stream::new(outer, StreamFlags::NonBlocking)?;
        let mut buf = DeviceBuffer::<u32>::zeroed(outer, 1000)?;
        let mut host = vec![0u32; 1000];
        with_context(&device, ContextFlags::default(), |inner| {
            stream.scope(|s| {
                let d = s.bind_mut(&mut buf);
                s.fill(d, 12345u32)?;
                let extra = s.alloc_zeroed::<u32>(1000)?;
                s.copy_from_device(extra, d.into_ref())?;
                s.copy_to_host(&mut host, extra.into_ref())?;
                Ok::<_, Error>(())
            })?;
            assert_eq!(common::current(), common::handle(inner));
            Ok::<_, Error>(())
        })?;
        assert_eq!(host, vec![12345; 1000]);
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn streams_and_events_are_used_and_dropped_on_scoped_threads() {
    common::in_context(|ctx| {
        let shared = ctx.share();
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut event = Event::new(ctx, EventFlags::new())?;
        std::thread::scope(|s| {
            s.spawn(|| {
                // no current context on this thread
                let recorded = event.record(&stream).unwrap();
                stream.synchronize().unwrap();
                assert!(recorded.is_complete().unwrap());
            });
            s.spawn(move || {
                shared
                    .enter(|ctx| {
                        let own = Stream::new(ctx, StreamFlags::NonBlocking)?;
                        let mut buf = DeviceBuffer::<u8>::zeroed(ctx, 16)?;
                        own.scope(|s| s.fill(&mut buf, 1u8))?;
                        assert_eq!(buf.to_vec()?, [1; 16]);
                        Ok::<_, Error>(())
                    })
                    .unwrap();
            });
        });
        // handles moved to a thread with no current context, used and dropped there
        let (stream2, mut event2) = (
            Stream::new(ctx, StreamFlags::NonBlocking)?,
            Event::new(ctx, EventFlags::new())?,
        );
        let module = cuda_brand::Module::from_ptx(ctx, include_str!("../kernels/kernels.ptx"))?;
        let mut buf = DeviceBuffer::<u32>::zeroed(ctx, 64)?;
        std::thread::scope(|s| {
            s.spawn(move || {
                assert!(common::current().is_null());
                let mut host = vec![0u32; 64];
                stream2
                    .scope(|s| {
                        let scratch = s.alloc_zeroed::<u32>(64)?;
                        s.fill(scratch, 9u32)?;
                        s.copy_from_device(&mut buf, scratch.into_ref())?;
                        s.copy_to_host(&mut host, scratch.into_ref())
                    })
                    .unwrap();
                assert_eq!(host, vec![9; 64]);
                event2.record(&stream2).unwrap().synchronize().unwrap();
                drop((stream2, event2, module, buf));
                assert!(common::current().is_null());
            });
        });
        drop(stream);
        drop(event);
        Ok(())
    });
}

fn synchronous_fills_and_copies_are_complete_before_a_non_blocking_stream_reads() {
    // The driver's cuMemset and device-to-device cuMemcpy return before the GPU is done,
    // and non-blocking streams are not ordered after them: the crate waits, so this holds.
    common::in_context(|ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let n = 64 << 20;
        let mut buf = DeviceBuffer::<u8>::zeroed(ctx, n)?;
        let mut other = DeviceBuffer::<u8>::zeroed(ctx, n)?;
        let mut host = PinnedBuffer::<u8>::zeroed(ctx, n)?;
        for round in 1..=4u8 {
            buf.fill(round)?;
            stream.scope(|s| s.copy_to_host(&mut host, &buf))?;
            assert!(host.iter().all(|&x| x == round), "fill round {round}");
            other.copy_from_device(&buf)?;
            stream.scope(|s| s.copy_to_host(&mut host, &other))?;
            assert!(
                host.iter().all(|&x| x == round),
                "device copy round {round}"
            );
        }
        Ok(())
    });
}

fn copy_to_vec_appends_once_the_scope_has_synchronized() {
    common::in_context(|ctx| {
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        let host: Vec<u32> = (0..100_003).map(|i| i * 3 + 1).collect();
        let mut out = vec![9u32, 8];
        let mut empty: Vec<u32> = Vec::new();
        let mut twice = Vec::with_capacity(4);
        a.scope(|s| {
            let d = s.alloc_from_slice(&host)?;
            s.copy_to_vec(&mut out, d.into_ref())?;
            s.copy_to_vec(&mut empty, d.slice(..0).into_ref())?;
            s.copy_to_vec(&mut twice, d.slice(5..7).into_ref())
        })?;
        assert_eq!(out.len(), host.len() + 2);
        assert_eq!(out[..2], [9, 8]);
        assert_eq!(out[2..], host[..]);
        assert!(empty.is_empty());
        assert_eq!(twice, [16, 19]);
        // a closure that fails after queueing: the copy is complete, the length grows
        let mut after_error = Vec::new();
        let r = a.scope(|s| {
            let d = s.alloc_from_slice(&host[..10])?;
            s.copy_to_vec(&mut after_error, d.into_ref())?;
            Err::<(), _>(Error::new("test", ErrorCode::InvalidValue))
        });
        assert!(r.is_err());
        assert_eq!(after_error, host[..10]);
        // two streams: b appends what a wrote, ordered by the crate
        let mut dev = ctx.zeroed::<u32>(1 << 20)?;
        let mut filled = Vec::new();
        a.scope_pair(&b, |sa, sb| {
            let d = sa.bind_mut(&mut dev);
            sa.fill(d, 77)?;
            sb.copy_to_vec(&mut filled, d.into_ref())
        })?;
        assert_eq!(filled, vec![77u32; 1 << 20]);
        Ok(())
    });
}

gpu_tests!(
    async_copies_through_pinned_memory_round_trip_in_a_scope,
    async_copies_from_plain_slices_device_to_device_and_fill,
    stream_ordered_allocation_is_zeroed_usable_and_freed,
    a_scope_synchronizes_even_when_its_closure_fails_or_panics,
    events_time_a_copy,
    stream_priorities_are_validated_against_the_context_range,
    two_streams_are_ordered_by_an_event,
    a_stream_of_an_outer_context_works_inside_a_nested_one,
    streams_and_events_are_used_and_dropped_on_scoped_threads,
    synchronous_fills_and_copies_are_complete_before_a_non_blocking_stream_reads,
    copy_to_vec_appends_once_the_scope_has_synchronized,
);
