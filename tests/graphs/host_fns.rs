//! Host functions and every scope form, and host functions and other threads. A module of
//! `tests/graphs.rs`, which lists these tests.
//!
//! * A host function's panic surfaces from every scope form that can queue one: `scope`,
//!   `scope_pair`, `scope_all`, `scope_within`, `scope_all_within`, the three `_and_teardown`
//!   forms,
//!   and a scope inside a capture's closure. (Scopes of preallocated streams, from
//!   `with_phases`, have no host functions; captures offer none, so no replayed graph runs
//!   one.)
//! * A call on another thread that waits for a running host function's stream does not
//!   return before the host function; a call that does not wait for it returns while the
//!   host function runs. Both are shown without a deadlock: the host function waits for the
//!   other thread's call with a timeout.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use cuda_brand::{
    ContextGuard, DeviceBuffer, DeviceBuffer2D, DeviceSlice, Error, KeepWaiting, Stream,
    StreamFlags, StreamScope,
};

use crate::common;

// ---- a host function's panic, in every scope form -----------------------------------------

/// The host memory of [`queue_a_panicking_host_fn`] once its scope has returned: `[0]` the
/// copy of the stream's fill, `[1]` written by the panicking host function from `[0]`,
/// `[2]` not written (the function panicked first), `[3]` written by the host function
/// queued after the panic (the stream went on).
const OUTPUT: [u32; 4] = [5, 6, 0, 8];

/// A deadline that the work of these tests never reaches.
const LONG: Duration = Duration::from_secs(60);

/// Queues the work every scope-form test checks. `producer` fills `dev` (one element) with
/// 5 and copies it into `out[0]`; `consumer` (the same scope, or another stream of the same
/// multi-stream scope, which the lane record makes wait for the copy) queues a host function
/// that writes `out[1] = out[0] + 1` and then panics with the payload `form`, before it
/// writes `out[2]`, and another host function that writes `out[3] = 8`. So `out` ends as
/// [`OUTPUT`].
fn queue_a_panicking_host_fn<'s, 'e, 'ctx>(
    form: &'static str,
    producer: &'s StreamScope<'s, 'e, 'ctx>,
    consumer: &'s StreamScope<'s, 'e, 'ctx>,
    dev: &'s mut DeviceSlice<'ctx, u32>,
    out: &'s mut [u32],
) -> Result<(), Error> {
    let (d, o) = (producer.bind_mut(dev), producer.bind_host_mut(out));
    producer.fill(d, 5)?;
    producer.copy_to_host_view(o.slice(..1), d.into_ref())?;
    consumer.host_fn_on(o.slice(..3), move |v| {
        v[1] = v[0] + 1;
        if v[1] == 6 {
            panic::panic_any(form);
        }
        v[2] = 99; // reached only if the function ran before the copy
    })?;
    consumer.host_fn_on(o.slice(3..), |v| v[0] = 8)
}

/// Runs one scope form (`run`, which opens the scope on one or both of two fresh streams
/// and queues [`queue_a_panicking_host_fn`] in it) under `catch_unwind`, and checks that
/// the host function's panic surfaced from the scope with its payload, that the host
/// memory is [`OUTPUT`], and that the streams and the buffer work afterwards.
fn a_host_functions_panic_surfaces(
    form: &'static str,
    run: impl for<'ctx> FnOnce(
        ContextGuard<'ctx>,
        &[Stream<'ctx>; 2],
        &mut DeviceSlice<'ctx, u32>,
        &mut [u32],
    ),
) {
    common::in_context(|ctx| {
        let streams = [ctx.new_stream()?, ctx.new_stream()?];
        let mut dev = ctx.zeroed::<u32>(1)?;
        let mut out = [0u32; 4];
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            run(ctx, &streams, &mut dev, &mut out);
        }));
        match caught {
            Ok(()) => panic!(
                "{form}: the scope returned, and the host function's panic was lost (host memory {out:?})"
            ),
            Err(payload) => assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&form),
                "{form}: a panic other than the host function's"
            ),
        }
        assert_eq!(out, OUTPUT, "{form}");
        Stream::scope_all(&streams.each_ref(), |s| {
            s[0].fill(&mut dev, 1)?;
            s[1].host_fn(|| out[0] = 2)
        })?;
        assert_eq!(
            (dev.to_vec()?, out[0]),
            (vec![1], 2),
            "{form}: usable afterwards"
        );
        Ok(())
    });
}

pub fn a_host_functions_panic_surfaces_from_scope() {
    a_host_functions_panic_surfaces("scope", |_, [a, _], dev, out| {
        let _ = a.scope(|s| queue_a_panicking_host_fn("scope", s, s, dev, out));
    });
}

pub fn a_host_functions_panic_surfaces_from_scope_pair() {
    a_host_functions_panic_surfaces("scope_pair", |_, [a, b], dev, out| {
        let _ = a.scope_pair(b, |x, y| {
            queue_a_panicking_host_fn("scope_pair", x, y, dev, out)
        });
    });
}

pub fn a_host_functions_panic_surfaces_from_scope_all() {
    a_host_functions_panic_surfaces("scope_all", |_, streams, dev, out| {
        let _ = Stream::scope_all(&streams.each_ref(), |s| {
            queue_a_panicking_host_fn("scope_all", &s[0], &s[1], dev, out)
        });
    });
}

pub fn a_host_functions_panic_surfaces_from_scope_within() {
    a_host_functions_panic_surfaces("scope_within", |_, [a, _], dev, out| {
        let _ = a.scope_within(
            LONG,
            |_| KeepWaiting::until_idle(),
            |s| queue_a_panicking_host_fn("scope_within", s, s, dev, out),
        );
    });
}

/// With a deadline of zero, so that the overrun handler may be called (whenever a stream
/// is still busy at the first poll) before the scope's end.
pub fn a_host_functions_panic_surfaces_from_scope_all_within() {
    a_host_functions_panic_surfaces("scope_all_within", |_, streams, dev, out| {
        let _ = Stream::scope_all_within(
            &streams.each_ref(),
            Duration::ZERO,
            |_| KeepWaiting::for_another(Duration::from_millis(1)),
            |s| queue_a_panicking_host_fn("scope_all_within", &s[0], &s[1], dev, out),
        );
    });
}

pub fn a_host_functions_panic_surfaces_from_scope_and_teardown() {
    a_host_functions_panic_surfaces("scope_and_teardown", |_, [a, _], dev, out| {
        let _ = a.scope_and_teardown(|s| {
            queue_a_panicking_host_fn("scope_and_teardown", s, s, dev, out)
        });
    });
}

pub fn a_host_functions_panic_surfaces_from_scope_pair_and_teardown() {
    a_host_functions_panic_surfaces("scope_pair_and_teardown", |_, [a, b], dev, out| {
        let _ = a.scope_pair_and_teardown(b, |x, y| {
            queue_a_panicking_host_fn("scope_pair_and_teardown", x, y, dev, out)
        });
    });
}

pub fn a_host_functions_panic_surfaces_from_scope_all_and_teardown() {
    a_host_functions_panic_surfaces("scope_all_and_teardown", |_, streams, dev, out| {
        let _ = Stream::scope_all_and_teardown(&streams.each_ref(), |s| {
            queue_a_panicking_host_fn("scope_all_and_teardown", &s[0], &s[1], dev, out)
        });
    });
}

/// A capture cannot queue a host function, but its closure can open a scope that does:
/// the panic surfaces from the scope, then from `capture` (which ends the capture and
/// destroys the partial graph on the way), and the context captures again afterwards.
pub fn a_host_functions_panic_surfaces_from_a_scope_inside_a_capture() {
    a_host_functions_panic_surfaces("a scope inside a capture", |ctx, [a, b], dev, out| {
        let mut x = DeviceBuffer::from_slice(ctx, &[0u32; 4]).unwrap();
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            let _ = ctx.capture(|g| {
                g.fill(g.bind_mut(&mut x), 3)?; // captured, never replayed
                a.scope(|s| queue_a_panicking_host_fn("a scope inside a capture", s, s, dev, out))
            });
        }));
        let (graph, ()) = ctx
            .capture(|g| g.fill(g.bind_mut(&mut x), 4))
            .expect("the context captures again");
        let exec = graph.instantiate().unwrap();
        b.scope(|s| exec.launch(s)).unwrap();
        drop(exec);
        assert_eq!(x.to_vec().unwrap(), [4; 4], "only the second capture ran");
        if let Err(payload) = caught {
            panic::resume_unwind(payload); // for the checks of the caller
        }
    });
}

// ---- host functions and other threads -------------------------------------------------------

/// How long a host function waits for a call on another thread that cannot return before
/// the host function has returned.
const BLOCKED_FOR: Duration = Duration::from_millis(300);

/// How long a host function waits for a call on another thread that should return at
/// once (a generous bound for a loaded machine).
const FREE_WITHIN: Duration = Duration::from_secs(10);

/// Runs `call` on a worker thread (started before the scope) while a host function on
/// `stream` runs: the host function signals the worker through a channel, then waits up to
/// `patience` for the worker to report that `call` has returned, then returns. Returns
/// whether the report came while the host function waited, and what `call` returned
/// (after the scope, once the worker is joined). Never deadlocks: the host function stops
/// waiting after `patience` whatever `call` waits for.
fn call_while_a_host_function_waits<R: Send>(
    stream: &Stream<'_>,
    patience: Duration,
    call: impl FnOnce() -> R + Send,
) -> Result<(bool, R), Error> {
    let (start, started) = mpsc::channel::<()>();
    let (returned, report) = mpsc::channel::<()>();
    let in_time = Mutex::new(None);
    std::thread::scope(|t| {
        let worker = t.spawn(move || {
            // None: the host function never ran (its scope failed before)
            started.recv().ok()?;
            let value = call();
            let _ = returned.send(()); // the host function may have stopped waiting
            Some(value)
        });
        let in_time = &in_time;
        let scoped = stream.scope(|s| {
            s.host_fn(move || {
                start.send(()).expect("the worker waits for the start");
                *in_time.lock().unwrap() = Some(report.recv_timeout(patience).is_ok());
            })
        });
        let value = worker.join().expect("the worker did not panic");
        scoped?;
        let in_time = in_time.lock().unwrap().expect("the host function ran");
        Ok((in_time, value.expect("the worker made its call")))
    })
}

/// Inside a host function every call through the crate is refused with
/// `CUDA_ERROR_NOT_PERMITTED` before it reaches the driver, so nothing it asks for runs:
/// a synchronous fill, a whole scope on another stream, entering the context.
pub fn crate_calls_inside_a_host_function_are_refused_and_nothing_runs() {
    common::in_context(|ctx| {
        let shared = ctx.share();
        let (stream, other) = (ctx.new_stream()?, ctx.new_stream()?);
        let mut filled = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?;
        let mut scoped = DeviceBuffer::from_slice(ctx, &[4u32, 5, 6])?;
        let results = Mutex::new(Vec::new());
        stream.scope(|s| {
            s.host_fn(|| {
                let mut r = results.lock().unwrap();
                r.push(("DeviceSlice::fill", filled.fill(9)));
                r.push(("Stream::scope", other.scope(|o| o.fill(&mut scoped, 9))));
                r.push((
                    "SharedContext::enter",
                    shared.enter(|g| g.zeroed::<u32>(4).map(drop)),
                ));
            })
        })?;
        let results = results.into_inner().unwrap();
        assert_eq!(results.len(), 3);
        for (call, r) in results {
            let e = r.expect_err(call);
            assert_eq!(e.code(), cuda_brand::ErrorCode::NotPermitted, "{call}: {e}");
            assert!(e.to_string().contains("host function"), "{call}: {e}");
        }
        assert_eq!(filled.to_vec()?, [1, 2, 3], "the fill did not run");
        assert_eq!(scoped.to_vec()?, [4, 5, 6], "the scope's fill did not run");
        Ok(())
    });
}

/// While a host function runs, a call on another thread that waits for its stream does not
/// return: here the host function waits 300 ms for the call, sees it has not returned, and
/// returns; then the call completes with the right values. (A host function that waited
/// for such a call without a timeout would never return: a deadlock.) The calls, on a
/// non-blocking stream: `Stream::synchronize`, a scope on the same stream, and
/// `ContextGuard::synchronize`. The crate's synchronous copy to the host and synchronous
/// fill run on the calling thread's own non-blocking stream (its sync stream,
/// `docs/design/ordering.md`), which waits for no `StreamFlags::Default` stream: they
/// return while the host function runs.
pub fn a_call_that_waits_for_a_running_host_functions_stream_returns_only_after_it() {
    common::in_context(|ctx| {
        let shared = ctx.share();
        let blocking = Stream::new(ctx, StreamFlags::Default)?;
        let nonblocking = ctx.new_stream()?;
        let src = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?;
        let mut filled = ctx.zeroed::<u32>(3)?;
        let mut scoped = ctx.zeroed::<u32>(3)?;

        let (in_time, copied) = call_while_a_host_function_waits(&blocking, FREE_WITHIN, || {
            shared.enter(|_| src.to_vec())
        })?;
        assert!(
            in_time,
            "to_vec waited on the host for the host function's stream"
        );
        assert_eq!(copied?, [1, 2, 3]);

        // A synchronous fill is not waited for on the host (it runs on the thread's sync
        // stream, `docs/design/ordering.md`): it returns while the host function runs, and
        // the next reader sees it.
        let (in_time, done) = call_while_a_host_function_waits(&blocking, FREE_WITHIN, || {
            shared.enter(|_| filled.fill(4))
        })?;
        assert!(
            in_time,
            "fill waited on the host for the host function's stream"
        );
        done?;
        assert_eq!(filled.to_vec()?, [4, 4, 4]);

        let (in_time, done) = call_while_a_host_function_waits(&nonblocking, BLOCKED_FOR, || {
            nonblocking.synchronize()
        })?;
        assert!(
            !in_time,
            "Stream::synchronize returned while the host function ran"
        );
        done?;

        let (in_time, done) = call_while_a_host_function_waits(&nonblocking, BLOCKED_FOR, || {
            nonblocking.scope(|s| s.fill(&mut scoped, 6))
        })?;
        assert!(
            !in_time,
            "a scope on its stream ended while the host function ran"
        );
        done?;
        assert_eq!(scoped.to_vec()?, [6, 6, 6]);

        let (in_time, done) = call_while_a_host_function_waits(&nonblocking, BLOCKED_FOR, || {
            shared.enter(|g| g.synchronize())
        })?;
        assert!(
            !in_time,
            "ContextGuard::synchronize returned while the host function ran"
        );
        done?;
        Ok(())
    });
}

/// While a host function runs on a non-blocking stream (what `ctx.new_stream()` makes), calls
/// on another thread that do not wait for that stream return: the crate's synchronous copy
/// (on the legacy default stream, which waits for no non-blocking stream) and a whole scope
/// on another non-blocking stream. The host function receives their reports while it waits.
pub fn calls_that_do_not_wait_for_a_host_functions_stream_return_while_it_runs() {
    common::in_context(|ctx| {
        let shared = ctx.share();
        let (stream, other) = (ctx.new_stream()?, ctx.new_stream()?);
        let src = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?;
        let mut dev = ctx.zeroed::<u32>(3)?;
        let mut back = [0u32; 3];

        let (in_time, copied) = call_while_a_host_function_waits(&stream, FREE_WITHIN, || {
            shared.enter(|_| src.to_vec())
        })?;
        assert!(
            in_time,
            "to_vec waited for the host function's non-blocking stream"
        );
        assert_eq!(copied?, [1, 2, 3]);

        let (in_time, done) = call_while_a_host_function_waits(&stream, FREE_WITHIN, || {
            other.scope(|s| {
                let d = s.bind_mut(&mut dev);
                s.fill(d, 7)?;
                s.copy_to_host(&mut back, d.into_ref())
            })
        })?;
        assert!(
            in_time,
            "a scope on another stream waited for the host function"
        );
        done?;
        assert_eq!(back, [7, 7, 7]);
        Ok(())
    });
}

/// While a host function runs on a non-blocking stream, calls on another thread that the
/// driver documents as possibly waiting for it, beyond the ones the crate lists as waiting:
/// freeing memory that is not from a pool (`cuMemFree` of a `DeviceBuffer2D`,
/// `cuMemFreeHost` of a `PinnedBuffer`: "may perform implicit synchronization"), and a scope
/// on another non-blocking stream that queues a host function of its own (the driver "may
/// serialize" host functions of independent streams, so that scope's end may wait for
/// this one). A host function that waited for any of them without a timeout could
/// deadlock. Each is shown without one: the host function stops waiting after 300 ms. The
/// test prints whether each call returned while the host function ran (`waited: false`) or
/// only after it (`waited: true`), and checks that each did its work.
pub fn calls_the_driver_may_make_wait_for_a_running_host_function() {
    common::in_context(|ctx| {
        let (stream, other) = (ctx.new_stream()?, ctx.new_stream()?);

        let pitched = DeviceBuffer2D::<u32>::zeroed(ctx, 64, 4)?;
        assert_eq!(pitched.to_vec()?, vec![0u32; 256]);
        let (in_time, closed) =
            call_while_a_host_function_waits(&stream, BLOCKED_FOR, || pitched.close())?;
        closed?;
        println!("DeviceBuffer2D::close (cuMemFree): waited: {}", !in_time);

        let pinned = ctx.pinned_from_slice(&[3u32; 1024])?;
        assert_eq!(pinned[1023], 3);
        let (in_time, closed) =
            call_while_a_host_function_waits(&stream, BLOCKED_FOR, || pinned.close())?;
        closed?;
        println!("PinnedBuffer::close (cuMemFreeHost): waited: {}", !in_time);

        let ran = AtomicBool::new(false);
        let (in_time, done) = call_while_a_host_function_waits(&stream, BLOCKED_FOR, || {
            other.scope(|s| s.host_fn(|| ran.store(true, Ordering::Relaxed)))
        })?;
        done?;
        assert!(
            ran.load(Ordering::Relaxed),
            "the other scope's host function ran"
        );
        println!(
            "a scope on another non-blocking stream with a host function of its own: waited: {}",
            !in_time
        );
        Ok(())
    });
}

/// A buffer moved into a host function and dropped there is not freed (its free is refused
/// on the host function's thread) and the refusal is reported by its context's teardown:
/// the `with_context` that made it returns `CUDA_ERROR_NOT_PERMITTED`, naming
/// `DeviceBuffer::drop`, although its closure returned `Ok`.
pub fn a_buffer_dropped_inside_a_host_function_is_reported_by_its_contexts_teardown() {
    let device = common::gpu();
    let result = cuda_brand::with_context(&device, cuda_brand::ContextFlags::default(), |ctx| {
        let buf = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?;
        ctx.new_stream()?.scope(|s| s.host_fn(move || drop(buf)))?;
        Ok::<_, Error>(7)
    });
    let e = result.expect_err("the refused free is reported");
    assert_eq!(e.code(), cuda_brand::ErrorCode::NotPermitted, "{e}");
    assert!(e.to_string().contains("`DeviceBuffer::drop` failed"), "{e}");
}

// ---- a StreamFlags::Default stream's host function and the staged copies (issue 46) --------

/// How long the child of a deadlock test may take before the parent kills it and fails.
const DEADLINE: Duration = Duration::from_secs(30);

/// How long a host function of a deadlock test waits for the test's thread: longer than
/// [`DEADLINE`], so that a deadlock holds until the parent kills the child (the bound only
/// keeps a child run by hand from hanging for good).
const HOST_FN_PATIENCE: Duration = Duration::from_secs(90);

/// Sets its flag when dropped: the host function of a deadlock test is released when the
/// scope's closure returns, also on an error path (which would otherwise look like a
/// deadlock).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Waits (polling) until `flag` is set or `patience` has passed: whether it was set.
fn wait_for(flag: &AtomicBool, patience: Duration) -> bool {
    let start = std::time::Instant::now();
    while !flag.load(Ordering::SeqCst) {
        if start.elapsed() > patience {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Staged bulk copies (downloads from 1 MiB, uploads from 512 KiB, pageable memory) queue
/// their DMA on the calling thread's sync stream, a non-blocking stream: they return while
/// a host function of a `StreamFlags::Default` stream waits, here for a flag that the
/// test's thread sets only after the copies returned. Before the fix (issue 46, item 4)
/// they queued it on the legacy stream, which waits for every `StreamFlags::Default`
/// stream of the context: the first copy never returned. Runs in a child process (a
/// deadlock is a failure, not a hung binary); asserts every copied value, and that the
/// copies were staged.
pub fn staged_copies_return_while_a_default_streams_host_function_waits_for_them() {
    const NAME: &str = "staged_copies_return_while_a_default_streams_host_function_waits_for_them";
    if !common::child::is_child() {
        return common::child::run_within(
            NAME,
            DEADLINE,
            "a staged copy waited for the StreamFlags::Default stream whose host function waits for the copy to return",
        );
    }
    common::in_context(|ctx| {
        let n = (4 << 20) / 4; // 4 MiB of u32: staged both ways
        let pattern: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let up: Vec<u32> = pattern.iter().map(|&x| !x).collect();
        // staged too, before the scope: the context's staging exists when the scope's copies
        // come, so that they page-lock nothing while the host function waits
        let src = DeviceBuffer::from_slice(ctx, &pattern)?;
        if cuda_brand::__staging::bytes_of(ctx) == 0 {
            common::child::not_arisen("this machine stages no copy (one core)");
            return Ok(());
        }
        let mut dst = ctx.zeroed::<u32>(n)?;
        let mut back = vec![0u32; n];
        let blocking = Stream::new(ctx, StreamFlags::Default)?;
        let released = AtomicBool::new(false);
        let in_time = AtomicBool::new(false);
        let down = blocking.scope(|s| {
            s.host_fn(|| in_time.store(wait_for(&released, HOST_FN_PATIENCE), Ordering::SeqCst))?;
            let _release = SetOnDrop(&released); // after the copies, or on an error
            eprintln!("step: a host function waits on the StreamFlags::Default stream");
            let down = src.to_vec()?; // into a new Vec, 4 MiB
            eprintln!("step: a staged to_vec returned");
            src.copy_to_host(&mut back)?; // into a Vec written before
            eprintln!("step: a staged copy_to_host returned");
            dst.copy_from_host(&up)?;
            eprintln!("step: a staged copy_from_host returned");
            Ok(down)
        })?;
        assert!(
            in_time.load(Ordering::SeqCst),
            "the host function stopped waiting: a staged copy waited for it"
        );
        assert!(down == pattern, "to_vec's values");
        assert!(back == pattern, "copy_to_host's values");
        assert!(dst.to_vec()? == up, "copy_from_host's values");
        Ok(())
    });
    common::child::end_child();
}

/// A pool buffer dropped while a host function of a `StreamFlags::Default` stream waits
/// returns at once, with and without a pending synchronous write of the buffer (which the
/// free is ordered after, through the thread's sync stream): the free is `cuMemFreeAsync`
/// on the legacy stream, queued behind the Default stream's work but not waited for on the
/// host. The host function waits for a flag the test's thread sets after both drops; the
/// memory is usable afterwards. Runs in a child process, as the test above.
pub fn a_pool_buffer_freed_while_a_default_streams_host_function_waits_returns() {
    const NAME: &str = "a_pool_buffer_freed_while_a_default_streams_host_function_waits_returns";
    if !common::child::is_child() {
        return common::child::run_within(
            NAME,
            DEADLINE,
            "a buffer's free waited for the StreamFlags::Default stream whose host function waits for the free to return",
        );
    }
    common::in_context(|ctx| {
        let n = (4 << 20) / 4;
        let quiet = ctx.zeroed::<u32>(n)?;
        let mut written = ctx.zeroed::<u32>(n)?;
        ctx.synchronize()?; // nothing pending: the first drop takes the fast path
        let blocking = Stream::new(ctx, StreamFlags::Default)?;
        let released = AtomicBool::new(false);
        let in_time = AtomicBool::new(false);
        blocking.scope(|s| {
            s.host_fn(|| in_time.store(wait_for(&released, HOST_FN_PATIENCE), Ordering::SeqCst))?;
            let _release = SetOnDrop(&released); // after the drops, or on an error
            eprintln!("step: a host function waits on the StreamFlags::Default stream");
            drop(quiet);
            eprintln!("step: a buffer with nothing pending was dropped");
            written.fill(7)?; // pending on this thread's sync stream
            drop(written);
            eprintln!("step: a buffer with a pending write was dropped");
            Ok(())
        })?;
        assert!(
            in_time.load(Ordering::SeqCst),
            "the host function stopped waiting: a free waited for it"
        );
        let again = ctx.zeroed::<u32>(n)?;
        assert!(
            again.to_vec()?.iter().all(|&x| x == 0),
            "memory usable afterwards"
        );
        Ok(())
    });
}
