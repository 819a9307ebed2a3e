//! The owning layer on a real GPU: owned handles bound across entries and threads, refused
//! binds, the last handle's teardown, releases parked by host functions, and awaited
//! batches (values, drops mid-flight, forgotten futures, panics, a failed context).
//! Skips without a device; fails instead with `CUDA_BRAND_REQUIRE_GPU=1`.

use crate::common;

use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use cuda_brand::owned::{
    OwnedContext, OwnedDeviceBuffer, OwnedKernel, OwnedModule, OwnedStream, Pending,
    release_deferred,
};
use cuda_brand::{
    ContextFlags, Device, Error, ErrorCode, LaunchConfig, MemoryPool, Out, with_context,
    with_primary_context,
};

/// A waker that unparks the thread that polls, and counts its wakes.
struct Unpark {
    thread: std::thread::Thread,
    wakes: AtomicUsize,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// Polls `future` to its end on this thread, parking between polls (the smallest
/// executor: no runtime); returns the output and how many times it was woken.
pub(crate) fn block_on<F: Future>(future: F) -> (F::Output, usize) {
    let unpark = Arc::new(Unpark {
        thread: std::thread::current(),
        wakes: AtomicUsize::new(0),
    });
    let waker = Waker::from(Arc::clone(&unpark));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return (out, unpark.wakes.load(Ordering::SeqCst));
        }
        std::thread::park_timeout(Duration::from_secs(10));
    }
}

/// A created context with the sample kernels' module and a stream, owned.
pub(crate) fn owned_setup(device: &Device) -> (OwnedContext, Arc<OwnedModule>, Arc<OwnedStream>) {
    let home = OwnedContext::new(device, ContextFlags::default()).unwrap();
    let (module, stream) = home
        .enter(|ctx| {
            let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
            let stream = ctx.new_stream()?;
            Ok::<_, Error>((home.unbind(ctx, module)?, home.unbind(ctx, stream)?))
        })
        .unwrap();
    (home, Arc::new(module), Arc::new(stream))
}

pub(crate) type Scale = (Out<f32>, f32);

pub(crate) fn scale_kernel(module: &Arc<OwnedModule>) -> Arc<OwnedKernel<Scale>> {
    // SAFETY: scale(float *x, size_t x_len, float k) writes x[0..x_len] only.
    Arc::new(unsafe { OwnedKernel::<Scale>::new(module, "scale") }.unwrap())
}

pub(crate) fn spin_kernel(module: &Arc<OwnedModule>) -> Arc<OwnedKernel<(i64,)>> {
    // SAFETY: spin(long long) busy-waits and touches no memory.
    Arc::new(unsafe { OwnedKernel::<(i64,)>::new(module, "spin") }.unwrap())
}

pub(crate) fn owned_buffer(home: &OwnedContext, host: &[f32]) -> OwnedDeviceBuffer<f32> {
    home.enter(|ctx| {
        let buf = ctx.from_slice(host)?;
        home.unbind(ctx, buf)
    })
    .unwrap()
}

/// About `ms` milliseconds of GPU time for `spin` (an H100 runs near 2 GHz; the exact time
/// does not matter, only that it is long against a host call).
pub(crate) fn cycles(ms: i64) -> i64 {
    ms * 2_000_000
}

fn an_owned_buffer_made_in_one_entry_is_read_in_another_on_another_thread() {
    let device = common::gpu();
    let before = common::current();
    let home = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    assert_eq!(common::current(), before, "creating leaves nothing current");
    let host: Vec<f32> = (0..4099).map(|i| i as f32 * 0.5).collect();
    let buf = owned_buffer(&home, &host);
    assert_eq!(common::current(), before, "entering restores the stack");
    let back = std::thread::spawn(move || {
        let before = common::current();
        let back = buf.context().enter(|ctx| buf.bind(ctx)?.to_vec()).unwrap();
        assert_eq!(common::current(), before, "the other thread's stack too");
        back
    })
    .join()
    .unwrap();
    assert_eq!(back, host);
    assert_eq!(home.handles(), 1, "the last handle");
    home.close().unwrap();
}

fn a_guard_of_another_context_is_refused_naming_both() {
    let device = common::gpu();
    let a = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    let b = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    let mut on_a = owned_buffer(&a, &[1.0, 2.0]);
    let refused = b.enter(|ctx| {
        let e = on_a.bind(ctx).map(|_| ()).unwrap_err();
        assert!(!a.is(ctx) && b.is(ctx));
        let e2 = on_a.bind_mut(ctx).map(|_| ()).unwrap_err();
        assert_eq!(e2.code(), ErrorCode::InvalidInput);
        // a value of b refused by a
        let of_b = ctx.zeroed::<f32>(4)?;
        let e3 = a.unbind(ctx, of_b).map(|_| ()).unwrap_err();
        assert_eq!(e3.code(), ErrorCode::InvalidInput);
        Ok::<_, Error>(e)
    });
    let e = refused.unwrap();
    assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
    let detail = e.to_string();
    // SAFETY: only formatted.
    let (raw_a, raw_b) = unsafe { (a.as_raw(), b.as_raw()) };
    assert!(
        detail.contains(&format!("{raw_a:p}")) && detail.contains(&format!("{raw_b:p}")),
        "names both contexts: {detail}"
    );
    // a plain `with_context` guard is refused too
    with_context(&device, ContextFlags::default(), |ctx| {
        assert_eq!(
            on_a.bind(ctx).map(|_| ()).unwrap_err().code(),
            ErrorCode::InvalidInput
        );
        Ok::<_, Error>(())
    })
    .unwrap();
    // and the handle is still good in its own context
    assert_eq!(
        a.enter(|ctx| on_a.bind(ctx)?.to_vec()).unwrap(),
        vec![1.0, 2.0]
    );
    // `into_bound` with the wrong guard drops the handle; with the right one it is a
    // branded buffer of the entry
    let moved = a.enter(|ctx| {
        let buf = on_a.into_bound(ctx)?;
        buf.to_vec()
    });
    assert_eq!(moved.unwrap(), vec![1.0, 2.0]);
}

fn an_owned_handle_of_the_primary_context_binds_inside_with_primary_context() {
    let device = common::gpu();
    let home = OwnedContext::primary(&device).unwrap();
    let mut buf = owned_buffer(&home, &[3.0; 8]);
    with_primary_context(&device, |ctx| {
        assert!(home.is(ctx));
        buf.bind_mut(ctx)?.copy_from_host(&[4.0; 8])?;
        // a value of the primary context made here is taken over by the owned handle
        let made_here = ctx.from_slice(&[5u32; 3])?;
        let owned = home.unbind(ctx, made_here)?;
        assert_eq!(owned.bind(ctx)?.to_vec()?, vec![5; 3]);
        Ok::<_, Error>(())
    })
    .unwrap();
    // the primary context outlived `with_primary_context`'s release: the handle holds it
    assert_eq!(
        home.enter(|ctx| buf.bind(ctx)?.to_vec()).unwrap(),
        vec![4.0; 8]
    );
}

fn close_tears_down_only_with_the_last_handle() {
    let device = common::gpu();
    let home = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    let buf = owned_buffer(&home, &[1.0; 16]);
    let other = home.clone();
    assert_eq!(other.handles(), 3, "`home`, `other` and `buf`");
    other.close().unwrap(); // `home` and `buf` still hold it
    assert_eq!(home.handles(), 2);
    home.close().unwrap(); // `buf` still holds it
    let kept = buf.context().clone();
    drop(buf);
    assert_eq!(kept.handles(), 1, "the last handle");
    let before = common::current();
    kept.close().unwrap(); // the teardown
    assert_eq!(common::current(), before);
}

fn handles_dropped_on_another_thread_while_the_context_is_entered_here() {
    let device = common::gpu();
    let home = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    let bufs: Vec<_> = (0..8)
        .map(|i| owned_buffer(&home, &[i as f32; 1024]))
        .collect();
    let other = home.clone();
    let barrier = Arc::new(Barrier::new(2));
    let b2 = Arc::clone(&barrier);
    let dropper = std::thread::spawn(move || {
        b2.wait(); // the main thread is inside `enter`
        let before = common::current();
        drop(bufs); // freed here: pushed, freed, popped
        drop(other);
        assert_eq!(common::current(), before);
        b2.wait();
    });
    let seen = home
        .enter(|ctx| {
            barrier.wait();
            barrier.wait(); // the other thread has dropped its handles
            let fresh = ctx.from_slice(&[9.0f32; 64])?;
            fresh.to_vec()
        })
        .unwrap();
    dropper.join().unwrap();
    assert_eq!(seen, vec![9.0; 64]);
    assert_eq!(home.handles(), 1);
    home.close().unwrap();
}

fn an_owned_buffer_dropped_in_a_host_function_is_released_at_the_next_release_point() {
    let device = common::gpu();
    let home = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    let bytes = 8 << 20;
    let buf = owned_buffer(&home, &vec![1.0f32; bytes / 4]);
    let used = |home: &OwnedContext| {
        home.enter(|ctx| MemoryPool::of_device(ctx)?.used_bytes())
            .unwrap()
    };
    let with_buf = used(&home);
    let kept = home.clone();
    release_deferred();
    home.enter(|ctx| {
        let stream = ctx.new_stream()?;
        stream.scope(|s| s.host_fn(move || drop(buf)))
    })
    .unwrap();
    // parked: the host function could not free it; entering (a release point) frees it
    let after = used(&kept);
    assert!(
        with_buf - after >= bytes as u64,
        "released at the next entry: {with_buf} -> {after}"
    );
}

fn an_awaited_batch_hands_back_its_buffers_with_the_results() {
    let device = common::gpu();
    let (home, module, stream) = owned_setup(&device);
    let (scale, spin) = (scale_kernel(&module), spin_kernel(&module));
    let n = 1 << 16;
    let buf = owned_buffer(&home, &vec![0.0; n]);
    // page-locked, so that the batch is still running when it is first polled (a copy
    // into a `Vec` would make `submit` wait for it)
    let mut host = home
        .enter(|ctx| home.unbind(ctx, ctx.pinned_zeroed::<f32>(n)?))
        .unwrap();
    for (i, x) in host.iter_mut().enumerate() {
        *x = i as f32;
    }
    let work = stream.submit(
        (buf, host, scale, spin),
        move |s, (d, host, scale, spin)| {
            s.launch(spin, LaunchConfig::linear(1, 1), (cycles(5),))?;
            s.copy_from_host_view(d, host.into_ref())?;
            s.launch(scale, LaunchConfig::linear(64, 256), (d, 2.0f32))?;
            s.copy_to_host_view(host, d.into_ref())
        },
    );
    assert!(!work.is_done());
    let ((result, (buf, host, _scale, _spin)), wakes) = block_on(work);
    result.unwrap();
    assert!(wakes >= 1, "woken by the driver (the armed notifier)");
    let want: Vec<f32> = (0..n).map(|i| i as f32 * 2.0).collect();
    assert_eq!(&host[..], &want[..]);
    assert_eq!(home.enter(|ctx| buf.bind(ctx)?.to_vec()).unwrap(), want);
    // the same with the blocking `wait`
    let (result, (buf, host)) = stream
        .submit((buf, vec![0.0f32; n]), |s, (d, host)| {
            s.copy_to_host_view(host, d.into_ref())
        })
        .wait();
    result.unwrap();
    assert_eq!(host, want);
    drop(buf);
}

fn many_batches_in_flight_on_several_streams_all_complete_with_their_values() {
    let device = common::gpu();
    let (home, module, _stream) = owned_setup(&device);
    let scale = scale_kernel(&module);
    let streams: Vec<Arc<OwnedStream>> = (0..4)
        .map(|_| {
            Arc::new(
                home.enter(|ctx| home.unbind(ctx, ctx.new_stream()?))
                    .unwrap(),
            )
        })
        .collect();
    let pending: Vec<Pending<_>> = (0..64)
        .map(|i| {
            let buf = owned_buffer(&home, &[i as f32; 4096]);
            streams[i % 4].submit(
                (buf, vec![0.0f32; 4096], Arc::clone(&scale)),
                move |s, (d, h, k)| {
                    s.launch(k, LaunchConfig::linear(16, 256), (d, 3.0f32))?;
                    s.copy_to_host_view(h, d.into_ref())
                },
            )
        })
        .collect();
    for (i, p) in pending.into_iter().enumerate() {
        let ((result, (_buf, host, _)), _) = block_on(p);
        result.unwrap();
        assert!(host.iter().all(|&x| x == i as f32 * 3.0), "batch {i}");
    }
}

fn a_pending_future_dropped_mid_flight_waits_for_its_work() {
    let device = common::gpu();
    let (home, module, stream) = owned_setup(&device);
    let spin = spin_kernel(&module);
    let buf = owned_buffer(&home, &[7.0; 1 << 20]);
    // page-locked host memory: a copy into a `Vec` (pageable) is synchronous in the driver,
    // so `submit` itself would wait for the kernel before it
    let host = home
        .enter(|ctx| home.unbind(ctx, ctx.pinned_zeroed::<f32>(1 << 20)?))
        .unwrap();
    // compute-sanitizer slows the host calls (`submit` took 82 ms there, on an H200): the
    // kernel is ten times longer there
    let kernel_ms = if common::under_sanitizer() { 1000 } else { 100 };
    let submitted = Instant::now();
    let work = stream.submit((spin, buf, host), move |s, (spin, d, h)| {
        s.launch(spin, LaunchConfig::linear(1, 1), (cycles(kernel_ms),))?;
        s.copy_to_host_view(h, d.into_ref())
    });
    // well before the kernel's end
    assert!(
        submitted.elapsed() < Duration::from_millis(kernel_ms as u64 * 6 / 10),
        "submit returns before the {kernel_ms} ms kernel is done: {:?}",
        submitted.elapsed()
    );
    assert!(!work.is_done(), "a {kernel_ms} ms kernel is still running");
    let started = Instant::now();
    drop(work); // waits, then frees the batch
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(20),
        "the drop waited for the work: {waited:?}"
    );
    // the stream is idle: nothing of the dropped batch can still run
    let idle = home.enter(|ctx| stream.bind(ctx)?.is_idle()).unwrap();
    assert!(idle);
}

fn a_forgotten_pending_future_leaks_its_batch_and_frees_nothing_early() {
    let device = common::gpu();
    let (home, module, stream) = owned_setup(&device);
    let spin = spin_kernel(&module);
    let bytes = 4 << 20;
    let buf = owned_buffer(&home, &vec![1.0; bytes / 4]);
    let used = || {
        home.enter(|ctx| MemoryPool::of_device(ctx)?.used_bytes())
            .unwrap()
    };
    let before = used();
    let work = stream.submit((spin, buf), |s, (spin, _d)| {
        s.launch(spin, LaunchConfig::linear(1, 1), (cycles(20),))
    });
    std::mem::forget(work);
    // the work ends; the buffer is never freed (leaked)
    let idle = home
        .enter(|ctx| {
            ctx.synchronize()?;
            stream.bind(ctx)?.is_idle()
        })
        .unwrap();
    assert!(idle);
    release_deferred();
    assert_eq!(
        used(),
        before,
        "the forgotten batch's buffer is still allocated"
    );
}

fn a_panic_in_a_host_function_of_a_batch_surfaces_from_the_future() {
    let device = common::gpu();
    let (home, _module, stream) = owned_setup(&device);
    let buf = owned_buffer(&home, &[1.0; 256]);
    let work = stream.submit((buf, vec![0.0f32; 256]), |s, (d, h)| {
        s.copy_to_host_view(h, d.into_ref())?;
        s.host_fn(|| panic!("in a batch's host function"))
    });
    let caught = panic::catch_unwind(AssertUnwindSafe(|| block_on(work)));
    let payload = caught.expect_err("the host function's panic is resumed by poll");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("in a batch's host function")
    );
    // the stream and context still work
    let (result, _) = stream.submit((), |_, ()| Ok(())).wait();
    result.unwrap();
}

fn a_panic_in_a_batch_closure_resumes_after_its_work_is_done() {
    let device = common::gpu();
    let (home, module, stream) = owned_setup(&device);
    let spin = spin_kernel(&module);
    let buf = owned_buffer(&home, &[1.0; 256]);
    let started = Instant::now();
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        let _never = stream.submit((spin, buf), |s, (spin, _)| {
            s.launch(spin, LaunchConfig::linear(1, 1), (cycles(50),))?;
            panic!("in a batch's closure")
        });
    }));
    assert!(caught.is_err());
    assert!(
        started.elapsed() >= Duration::from_millis(10),
        "waited first"
    );
    assert!(home.enter(|ctx| stream.bind(ctx)?.is_idle()).unwrap());
}

fn a_batch_with_a_part_of_another_context_is_refused_before_any_work() {
    let device = common::gpu();
    let (_home, _module, stream) = owned_setup(&device);
    let other = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    let foreign = owned_buffer(&other, &[2.0; 4]);
    let work = stream.submit((foreign, vec![0.0f32; 4]), |s, (d, h)| {
        s.copy_to_host_view(h, d.into_ref())
    });
    assert!(work.is_done(), "refused at once");
    let (result, (foreign, host)) = work.wait();
    let e = result.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidInput);
    assert!(
        matches!(e.invalid(), Some(cuda_brand::Invalid::WrongContext { .. })),
        "{e}"
    );
    assert_eq!(host, vec![0.0; 4], "nothing ran");
    assert_eq!(
        other.enter(|ctx| foreign.bind(ctx)?.to_vec()).unwrap(),
        vec![2.0; 4]
    );
}

fn a_batch_may_allocate_scratch_and_queue_host_functions() {
    let device = common::gpu();
    let (home, _module, stream) = owned_setup(&device);
    let out = owned_buffer(&home, &[0.0; 512]);
    let seen = Arc::new(AtomicUsize::new(0));
    let seen2 = Arc::clone(&seen);
    let work = stream.submit((out, vec![0.0f32; 512]), move |s, (d, h)| {
        let scratch = s.alloc_zeroed::<f32>(512)?;
        s.fill(scratch, 5.0f32)?;
        s.copy_from_device(d, scratch.into_ref())?;
        s.copy_to_host_view(h, d.into_ref())?;
        s.host_fn_on(h, move |h| {
            seen2.store(h.iter().filter(|&&x| x == 5.0).count(), Ordering::SeqCst)
        })
    });
    let ((result, (_out, host)), _) = block_on(work);
    result.unwrap();
    assert_eq!(host, vec![5.0; 512]);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        512,
        "the host function saw the copy"
    );
}

fn waiting_for_a_batch_inside_a_host_function_panics_and_leaks_the_batch() {
    let device = common::gpu();
    let (home, module, stream) = owned_setup(&device);
    let spin = spin_kernel(&module);
    let host = home
        .enter(|ctx| home.unbind(ctx, ctx.pinned_zeroed::<f32>(1024)?))
        .unwrap();
    let buf = owned_buffer(&home, &[4.0; 1024]);
    let pending = stream.submit((spin, buf, host), |s, (spin, d, h)| {
        s.launch(spin, LaunchConfig::linear(1, 1), (cycles(20),))?;
        s.copy_to_host_view(h, d.into_ref())
    });
    let slot = Arc::new(std::sync::Mutex::new(Some(pending)));
    let in_fn = Arc::clone(&slot);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        home.enter(|ctx| {
            let other = ctx.new_stream()?;
            other.scope(|s| {
                s.host_fn(move || {
                    let pending = in_fn.lock().unwrap().take().unwrap();
                    let _ = pending.wait(); // cannot wait here: panics, the batch leaked
                })
            })
        })
    }));
    let payload = caught.expect_err("the host function's panic is resumed by its scope");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        message.contains("Pending::wait") && message.contains("cannot be waited for here"),
        "{message}"
    );
    assert!(slot.lock().unwrap().is_none(), "taken by the host function");
    // the leaked batch's work still ends, and the stream is usable
    let idle = home
        .enter(|ctx| {
            ctx.synchronize()?;
            stream.bind(ctx)?.is_idle()
        })
        .unwrap();
    assert!(idle);
}

/// Set in the child process of `a_failed_context_wakes_every_pending_batch_with_its_error`.
const STICKY_CHILD: &str = "CUDA_BRAND_TEST_OWNED_STICKY_CHILD";

fn a_failed_context_wakes_every_pending_batch_with_its_error() {
    if std::env::var_os(STICKY_CHILD).is_some() {
        let device = common::gpu();
        let (home, module, stream) = owned_setup(&device);
        // SAFETY: NOT true: write_wild writes through a wild pointer; this child process
        // exists to see the crate report the fault to every pending batch.
        let wild =
            Arc::new(unsafe { OwnedKernel::<(Out<f32>,)>::new(&module, "write_wild") }.unwrap());
        let buf = owned_buffer(&home, &[0.0; 4]);
        let spin = spin_kernel(&module);
        // the fault comes after a spin of 200 ms, so both batches are armed before it: their
        // stream callbacks, queued then, are what the driver calls with the error
        let faulting = stream.submit((spin, wild, buf), |s, (spin, k, d)| {
            s.launch(spin, LaunchConfig::linear(1, 1), (cycles(200),))?;
            s.launch(k, LaunchConfig::linear(1, 1), (d,))
        });
        let behind = stream.submit(vec![0.0f32; 4], |_, _| Ok(()));
        let (mut faulting, mut behind) = (faulting, behind);
        let idle = Waker::from(Arc::new(Unpark {
            thread: std::thread::current(),
            wakes: AtomicUsize::new(0),
        }));
        let mut cx = Context::from_waker(&idle);
        assert!(std::pin::Pin::new(&mut faulting).poll(&mut cx).is_pending());
        assert!(std::pin::Pin::new(&mut behind).poll(&mut cx).is_pending());
        let started = Instant::now();
        let ((first, _), wakes) = block_on(&mut faulting);
        assert!(
            wakes >= 1,
            "woken by the callback, not by block_on's timeout"
        );
        // the batch behind is marked done by its own callback, without a poll
        while !behind.is_done() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(behind.is_done(), "the callback of the batch behind ran too");
        let ((second, _), _) = block_on(behind);
        eprintln!(
            "first: {:?}; second: {:?}; after {:?}",
            first.as_ref().map_err(|e| e.code()),
            second.as_ref().map_err(|e| e.code()),
            started.elapsed()
        );
        assert_eq!(first.unwrap_err().code(), ErrorCode::IllegalAddress);
        assert!(second.is_err());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "woken, not hung"
        );
        eprintln!("child: both batches failed");
        return;
    }
    common::gpu();
    common::skip_under_sanitizer("an illegal address");
    let name = "a_failed_context_wakes_every_pending_batch_with_its_error";
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(STICKY_CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("child: both batches failed"),
        "{}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
}

crate::gpu_tests!(
    an_owned_buffer_made_in_one_entry_is_read_in_another_on_another_thread,
    a_guard_of_another_context_is_refused_naming_both,
    an_owned_handle_of_the_primary_context_binds_inside_with_primary_context,
    close_tears_down_only_with_the_last_handle,
    handles_dropped_on_another_thread_while_the_context_is_entered_here,
    an_awaited_batch_hands_back_its_buffers_with_the_results,
    many_batches_in_flight_on_several_streams_all_complete_with_their_values,
    a_pending_future_dropped_mid_flight_waits_for_its_work,
    a_panic_in_a_host_function_of_a_batch_surfaces_from_the_future,
    a_panic_in_a_batch_closure_resumes_after_its_work_is_done,
    a_batch_with_a_part_of_another_context_is_refused_before_any_work,
    a_batch_may_allocate_scratch_and_queue_host_functions,
    waiting_for_a_batch_inside_a_host_function_panics_and_leaks_the_batch,
    a_failed_context_wakes_every_pending_batch_with_its_error,
);

/// Tests that read the crate's pool of the device (shared by the process): each runs with
/// no other test of the binary beside it (`tests/gpu.rs` runs them after the others).
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    Vec::from([
        Test {
            name: "an_owned_buffer_dropped_in_a_host_function_is_released_at_the_next_release_point",
            needs: Needs::Gpu,
            body: an_owned_buffer_dropped_in_a_host_function_is_released_at_the_next_release_point,
        },
        Test {
            name: "a_forgotten_pending_future_leaks_its_batch_and_frees_nothing_early",
            needs: Needs::Gpu,
            body: a_forgotten_pending_future_leaks_its_batch_and_frees_nothing_early,
        },
    ])
}
