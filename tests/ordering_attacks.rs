//! Attacks on the order of synchronous operations (issue 28, `docs/design/ordering.md`,
//! `src/synchronous/`): safe programs (and raw driver calls standing for another
//! library, or for the documented contract of `as_device_ptr`) that try to see a
//! "complete" synchronous operation still running, or to race one.
//!
//! Most tests make the calling thread's sync stream slow first ([`keep_busy`]: fills of a
//! 1 GiB buffer queued on it, which return at once), so that an operation queued behind
//! them is still pending for milliseconds when the call returns: a missing order then
//! shows as stale values, deterministically rather than by luck. Each round writes a new
//! value and asserts every element.
//!
//! Written by the review of the sync streams (branch `h28rev`); the first three tests
//! failed before the fixes of that review (`copy_from_device` from managed memory,
//! `ContextGuard::synchronize`, the teardown of `with_phases`), the others pin behaviour the
//! review found sound.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::common;
use crate::common::ordering::{assert_all, keep_busy, lent_copy_graph, raw_read, read_in_scope};

use cuda_brand::owned::OwnedContext;
use cuda_brand::prelude::*;
use cuda_brand::{ErrorCode, ManagedBuffer, MemoryPool, with_phases};

/// 64 MiB of `u32`s.
const N: usize = 16 << 20;
const ROUNDS: usize = 10;
/// 1 GiB of `u32`s: one fill of it takes about 0.3 ms on an H100.
const SLOW_LEN: usize = 1 << 28;

/// `copy_from_device` is "complete when it returns", so the host may write its source the
/// moment it returns. The source here is managed memory (`ManagedBuffer::as_device`), which
/// the host writes directly: a copy left pending on the sync stream (only a record, as for
/// device memory) reads what the host wrote after the call. Failed before the review's fix
/// (the destination alone decided how the copy completes).
fn copy_from_device_has_read_a_managed_source_when_it_returns() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut src = match ManagedBuffer::<u32>::zeroed(ctx, N) {
            Ok(src) => src,
            Err(e) if e.code() == ErrorCode::NotSupported => {
                common::skip(format!("no concurrent managed access here ({e})"))
            }
            Err(e) => return Err(e),
        };
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut dst = ctx.zeroed::<u32>(N)?;
        for round in 0..ROUNDS as u32 {
            src[..].fill(round * 2 + 1); // the host writes the source
            keep_busy(&mut slow, 32)?;
            dst.copy_from_device(src.as_device())?;
            // complete: the host may write the source again
            src[..].fill(0xdead_0000 | round);
            assert_all(
                &dst.to_vec()?,
                round * 2 + 1,
                "copy_from_device of a managed source",
            );
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// `ContextGuard::synchronize` promises every earlier synchronous write complete, so raw
/// work given an address taken before the write finds it done. A write into pool memory
/// made while another context of the device was current runs on that context's sync
/// stream, which `cuCtxSynchronize` of the memory's own context does not wait for. Failed
/// before the review's fix (`synchronize` now also waits for every pending synchronous
/// write, of any context). The address is taken once, before the writes, so that its own
/// wait (`as_device_ptr` waits for what is pending on its memory) does not stand in for
/// `synchronize`'s.
fn context_synchronize_covers_a_pool_write_made_while_another_context_was_current() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |a| {
        let mut buf = a.zeroed::<u32>(N)?;
        let raw_a = common::handle(a);
        with_context(&device, ContextFlags::default(), |b| {
            // b gets a sync stream of this thread (its own memory), and keeps it busy
            let mut slow = b.zeroed::<u32>(SLOW_LEN)?;
            // SAFETY (of the test): only the address is taken; `buf` outlives the reads.
            let ptr = unsafe { buf.as_device_ptr() };
            for round in 0..ROUNDS as u32 {
                keep_busy(&mut slow, 32)?;
                // pool memory, b current: b's sync stream, behind the slow fills
                buf.fill(round + 100)?;
                a.synchronize()?;
                assert_all(
                    &raw_read(raw_a, ptr, N),
                    round + 100,
                    "raw read after ContextGuard::synchronize",
                );
            }
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// The teardown of `with_phases` frees the setup phase's memory. Pool memory written
/// while another context of the device was current (here an owned context that outlives
/// the phases) may still be written on that context's sync stream; the free must follow
/// that write, or the block goes back to the pool (here the device's default pool, which
/// other libraries share) and the pending write lands in the next owner's allocation (a
/// raw allocation standing for another library). Failed before the review's fix (the
/// teardown synchronized only its own context). Runs alone: it watches the default pool.
fn setup_pool_memory_is_freed_after_another_contexts_pending_write() {
    let device = common::gpu();
    let driver = common::driver();
    let mut default_pool = std::ptr::null_mut();
    let mut primary = std::ptr::null_mut();
    // SAFETY (of the test): out-pointers to live locals; the retain is undone below.
    unsafe {
        assert_eq!(
            (driver.cuDeviceGetDefaultMemPool)(&mut default_pool, device.as_raw()),
            0
        );
        assert_eq!(
            (driver.cuDevicePrimaryCtxRetain)(&mut primary, device.as_raw()),
            0
        );
    }
    let home = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    let mut slow = home
        .enter(|y| {
            let slow = y.zeroed::<u32>(SLOW_LEN)?;
            home.unbind(y, slow)
        })
        .unwrap();
    let mut freed_at = 0u64;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (mut setup_buf, _run) = phases.setup(|s| {
            let pool = MemoryPool::device_default(s)?;
            // freed blocks stay reserved (not unmapped at the next synchronization), so the
            // next allocation of that size gets the same block: restored below
            pool.set_release_threshold(u64::MAX)?;
            DeviceBuffer::<u32>::zeroed_in(s, &pool, N)
        })?;
        // SAFETY (of the test): only the address is taken, to compare.
        freed_at = unsafe { setup_buf.as_device_ptr() };
        home.enter(|y| {
            // about 200 ms of fills on this thread's sync stream of the owned context
            keep_busy(slow.bind_mut(y)?, 640)?;
            // pool memory, the owned context current: its sync stream, behind the fills
            setup_buf.fill(0x0bad_0bad)
        })?;
        Ok::<_, Error>(())
    })
    .unwrap(); // the teardown frees `setup_buf` into the default pool
    // another library allocates from the default pool in the primary context, writes and
    // reads its memory with the driver's synchronous calls
    let mut popped = std::ptr::null_mut();
    let mut mine = 0u64;
    let (first, later);
    // SAFETY (of the test): the primary context is retained (above); `mine` is the test's
    // own allocation of `N` `u32`s, freed below; the push is undone.
    unsafe {
        assert_eq!((driver.cuCtxPushCurrent_v2)(primary), 0);
        assert_eq!(
            (driver.cuMemAllocFromPoolAsync)(&mut mine, N * 4, default_pool, std::ptr::null_mut()),
            0
        );
        assert_eq!((driver.cuMemsetD32_v2)(mine, 7, N), 0);
        assert_eq!((driver.cuCtxSynchronize)(), 0);
        first = raw_read(primary, mine, N);
        std::thread::sleep(Duration::from_millis(1500)); // the owned context's fills end
        later = raw_read(primary, mine, N);
        assert_eq!((driver.cuMemFreeAsync)(mine, std::ptr::null_mut()), 0);
        assert_eq!((driver.cuCtxSynchronize)(), 0);
        assert_eq!((driver.cuCtxPopCurrent_v2)(&mut popped), 0);
        assert_eq!((driver.cuDevicePrimaryCtxRelease_v2)(device.as_raw()), 0);
    }
    drop(slow);
    drop(home);
    with_context(&device, ContextFlags::default(), |c| {
        MemoryPool::device_default(c)?.set_release_threshold(0) // the driver's default
    })
    .unwrap();
    if mine != freed_at {
        common::skip(format!(
            "inconclusive: the default pool gave another block ({mine:#x}, the setup buffer was at {freed_at:#x})"
        ));
    }
    assert_all(&first, 7, "another library's allocation, at once");
    assert_all(&later, 7, "another library's allocation, 1.5 s later");
}

/// A scope's stream waits (on the GPU) for a record of a context that is destroyed before
/// the stream reaches the wait: the stream here is busy with 1 GiB fills, a nested context
/// makes a record, the scope's next operation waits for it, and the nested context ends
/// (its sync stream and event are ended, then the context destroyed) while the wait is
/// still queued. The driver documents no rule for a wait on an event of a destroyed
/// context; the crate assumes the wait, already satisfied, is harmless. A hang or an error
/// here says otherwise. Run on a thread of its own, so that a hang fails the test.
fn a_queued_wait_on_a_record_of_a_destroyed_context_completes() {
    let device = common::gpu();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = with_context(&device, ContextFlags::default(), |a| {
            let stream = a.new_stream()?;
            let mut big = a.zeroed::<u32>(SLOW_LEN)?;
            let mut out = a.zeroed::<u32>(N)?;
            for round in 0..ROUNDS as u32 {
                let mut host = vec![0u32; N];
                stream.scope(|s| {
                    let b = s.bind_mut(&mut big);
                    for i in 0..640 {
                        s.fill(b, i)?;
                    }
                    let o = s.bind_mut(&mut out);
                    with_context(&device, ContextFlags::default(), |x| {
                        let _recorded = x.zeroed::<u32>(1 << 20)?; // a record of x
                        s.fill(o, round + 1) // waits for it, behind the fills
                    })?; // x ends: its record's event and context are destroyed
                    s.copy_to_host(&mut host, o.into_ref())
                })?;
                assert_all(
                    &host,
                    round + 1,
                    "after a wait on a destroyed context's record",
                );
            }
            Ok::<_, Error>(())
        });
        let _ = tx.send(outcome);
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(outcome) => outcome.unwrap(),
        Err(_) => panic!("no answer after 120 s: the wait on a destroyed context's record hung"),
    }
}

/// A primary context entered on two threads: one thread's teardown ends every sync stream
/// of the context, the other thread's too (or dooms it while an operation of it runs, for
/// that operation to end). The other thread keeps writing and reading synchronously and
/// in scopes, 200 teardowns long. Runs alone: it enters the primary context.
fn teardowns_on_one_thread_end_another_threads_sync_streams_safely() {
    let device = common::gpu();
    let stop = AtomicBool::new(false);
    std::thread::scope(|t| {
        let worker = t.spawn(|| {
            with_primary_context(&device, |p| {
                let stream = p.new_stream()?;
                let (mut buf, mut copy) = (p.zeroed::<u32>(1 << 20)?, p.zeroed::<u32>(1 << 20)?);
                let mut round = 0u32;
                while !stop.load(Ordering::Acquire) || round < 50 {
                    buf.fill(round)?;
                    assert_all(&read_in_scope(&stream, &buf), round, "scope after fill");
                    copy.copy_from_device(&buf)?;
                    assert_all(&copy.to_vec()?, round, "copy_from_device");
                    round += 1;
                }
                Ok::<_, Error>(round)
            })
        });
        for i in 0..200u32 {
            with_primary_context(&device, |p| {
                let mut mine = p.zeroed::<u32>(1 << 16)?;
                mine.fill(i)?;
                Ok::<_, Error>(())
            })
            .unwrap();
        }
        stop.store(true, Ordering::Release);
        let rounds = worker.join().unwrap().unwrap();
        eprintln!("{rounds} rounds beside 200 teardowns");
    });
}

/// Threads that ended leave their sync streams in the book, and a new thread may take an
/// ended thread's token and its sync stream. Each round a new thread leaves a fill pending
/// (behind slow fills) and ends; the buffer is read in a scope on the first thread.
fn a_pending_write_of_an_ended_thread_is_seen() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let stream = ctx.new_stream()?;
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        for round in 0..ROUNDS as u32 {
            let slow = &mut slow;
            let buf = std::thread::scope(|t| {
                t.spawn(move || {
                    shared.enter(|g| {
                        keep_busy(slow, 32)?;
                        let mut buf = g.zeroed::<u32>(N)?;
                        buf.fill(round ^ 0x3c3c)?;
                        Ok::<_, Error>(buf)
                    })
                })
                .join()
                .unwrap()
            })?;
            assert_all(
                &read_in_scope(&stream, &buf),
                round ^ 0x3c3c,
                "an ended thread's fill",
            );
            assert_all(&buf.to_vec()?, round ^ 0x3c3c, "to_vec of it");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// A synchronous copy into managed memory (the host reads it right after) from device
/// memory whose fill is still pending on the sync stream: the copy runs on the legacy
/// stream after every pending record, then waits on the host.
fn a_copy_into_managed_memory_follows_a_pending_fill() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut managed = match ManagedBuffer::<u32>::zeroed(ctx, N) {
            Ok(m) => m,
            Err(e) if e.code() == ErrorCode::NotSupported => {
                common::skip(format!("no concurrent managed access here ({e})"))
            }
            Err(e) => return Err(e),
        };
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut src = ctx.zeroed::<u32>(N)?;
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            src.fill(round + 5)?;
            managed.as_device_mut().copy_from_device(&src)?;
            assert_all(&managed[..], round + 5, "managed, read by the host");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// `into_raw_parts` hands the memory to another library, which reads it with raw calls on
/// its own (legacy) stream: the pending fill is waited for first.
fn into_raw_parts_waits_for_a_pending_fill() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let raw = common::handle(ctx);
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        for round in 0..ROUNDS as u32 {
            let mut buf = ctx.zeroed::<u32>(N)?;
            keep_busy(&mut slow, 32)?;
            buf.fill(round + 9)?;
            // SAFETY (of the test): read below, then taken back unchanged.
            let (ptr, len) = unsafe { buf.into_raw_parts() };
            assert_all(&raw_read(raw, ptr, len), round + 9, "after into_raw_parts");
            // SAFETY: `into_raw_parts` of this context gave `ptr` and `len`; no work uses
            // the memory.
            drop(unsafe { DeviceBuffer::<u32>::from_raw_parts(ctx, ptr, len) }?);
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// A buffer dropped while its fill is pending goes back to the pool (the free follows the
/// fill on the legacy stream); another thread's `zeroed` right after likely gets the same
/// block, and must see zeros: its sync stream waits for the first thread's record before
/// its memset.
fn a_block_freed_with_a_pending_fill_is_zeroed_for_the_next_thread() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        std::thread::scope(|t| {
            let (freed_tx, freed_rx) = mpsc::sync_channel::<()>(0);
            let (next_tx, next_rx) = mpsc::sync_channel::<()>(0);
            let writer = t.spawn(move || {
                shared.enter(|g| {
                    let mut slow = g.zeroed::<u32>(SLOW_LEN)?;
                    for _ in 0..ROUNDS {
                        let mut dirty = g.zeroed::<u32>(N)?;
                        keep_busy(&mut slow, 32)?;
                        dirty.fill(0xffff_ffff)?;
                        drop(dirty);
                        freed_tx.send(()).unwrap();
                        next_rx.recv().unwrap();
                    }
                    Ok::<_, Error>(())
                })
            });
            let reader = t.spawn(move || {
                shared.enter(|g| {
                    let stream = g.new_stream()?;
                    for _ in 0..ROUNDS {
                        freed_rx.recv().unwrap();
                        let fresh = g.zeroed::<u32>(N)?;
                        assert_all(&read_in_scope(&stream, &fresh), 0, "zeroed after a free");
                        drop(fresh);
                        next_tx.send(()).unwrap();
                    }
                    Ok::<_, Error>(())
                })
            });
            writer.join().unwrap().unwrap();
            reader.join().unwrap().unwrap();
        });
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// A synchronous copy leaves its read of the source pending; the source is handed to
/// another thread, whose scope overwrites it: the copy must have read the old values.
fn a_scope_write_on_another_thread_follows_a_pending_synchronous_read() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        std::thread::scope(|t| {
            let (to_writer, from_reader) = mpsc::sync_channel(0);
            let (to_reader, back) = mpsc::sync_channel(0);
            let writer = t.spawn(move || {
                shared.enter(|g| {
                    let stream = g.new_stream()?;
                    for mut src in from_reader {
                        let src: &mut DeviceBuffer<'_, u32> = &mut src;
                        stream.scope(|s| s.fill(&mut *src, 0xeeee_eeee_u32))?;
                        to_reader.send(()).unwrap();
                    }
                    Ok::<_, Error>(())
                })
            });
            let reader = t.spawn(move || {
                shared.enter(|g| {
                    let mut slow = g.zeroed::<u32>(SLOW_LEN)?;
                    let mut copy = g.zeroed::<u32>(N)?;
                    for round in 0..ROUNDS as u32 {
                        let src = g.from_slice(&vec![round + 1; N])?;
                        keep_busy(&mut slow, 32)?;
                        copy.copy_from_device(&src)?; // reads `src` behind the fills
                        to_writer.send(src).unwrap();
                        back.recv().unwrap();
                        assert_all(&copy.to_vec()?, round + 1, "the copy read the old source");
                    }
                    drop(to_writer);
                    Ok::<_, Error>(())
                })
            });
            reader.join().unwrap().unwrap();
            writer.join().unwrap().unwrap();
        });
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// A graph's lent buffer written synchronously between replays (behind slow fills), then
/// replayed in a scope: the replay is a scope operation and waits for the write.
fn a_graph_replay_sees_a_synchronous_write_of_a_lent_buffer() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let (mut input, mut output) = (ctx.zeroed::<u32>(N)?, ctx.zeroed::<u32>(N)?);
        let (graph, (input_key, output_key)) = lent_copy_graph(ctx, &mut input, &mut output)?;
        let mut exec = graph.instantiate()?;
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            exec.device_mut(input_key).fill(round + 40)?;
            stream.scope(|s| exec.launch(s))?;
            assert_all(
                &exec.device(output_key).to_vec()?,
                round + 40,
                "graph replay",
            );
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

// ---- the book's lock and a stream whose queue is full (issue 46, item 5) ----------------------

/// How long the child of the deadlock test may take before the parent kills it and fails.
const DEADLOCK_LIMIT: Duration = Duration::from_secs(60);
/// How long the test's host function waits for the mutex: longer than [`DEADLOCK_LIMIT`],
/// so that a deadlock holds until the parent kills the child.
const PATIENCE: Duration = Duration::from_secs(120);
/// The most raw operations the filling thread queues on the scope's stream.
const FILL_CAP: usize = 1_000_000;
/// The filling thread is taken to be blocked in the driver (the stream's queue full) when
/// it has queued nothing for this long.
const STALLED_FOR: Duration = Duration::from_millis(500);

/// What the holder of the mutex is told once the scope's stream is full.
enum Next {
    /// Make a synchronous operation, then release the mutex.
    Go,
    /// The scenario cannot arise here: release the mutex.
    GiveUp,
}

/// A scope's stream whose queue is full behind a host function that waits for a mutex,
/// while the mutex's holder makes a synchronous operation (which takes the book's lock),
/// and the scope's next operation must wait for a pending synchronous write of another
/// thread (the slow path of `StreamScope::ordered`). Before the fix (issue 46, item 5)
/// that operation queued its `cuStreamWaitEvent` on the full stream while holding the
/// book's lock: the driver blocked it until the host function returned, the holder waited
/// for the lock, the host function for the holder: a deadlock. Now the wait on the user's
/// stream is queued outside the lock (through the thread's own sync stream), the holder's
/// fill returns, and everything completes with the right values.
///
/// The queue is filled by a thread queueing raw `cuMemsetD32Async` calls on the stream
/// until the driver blocks it (nothing queued for 500 ms); a probe then checks that
/// another stream still takes work (else the driver blocks every enqueue, and no crate
/// could help). Where the queue never fills, the probe blocks, or the pending write ends
/// too soon, the scenario did not arise: the test reports itself ignored, with the reason. Runs in a
/// child process (a deadlock is a failure, not a hung binary).
fn a_scope_operation_waits_for_a_pending_write_outside_the_books_lock() {
    const NAME: &str = "a_scope_operation_waits_for_a_pending_write_outside_the_books_lock";
    if !common::child::is_child() {
        return common::child::run_within(
            NAME,
            DEADLOCK_LIMIT,
            "a scope operation queued a wait on its full stream under the book's lock, which the holder of the host function's mutex waits for",
        );
    }
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let (len, fills) = slow_fills();
        let mut slow = ctx.zeroed::<u32>(len)?;
        let mut pending = ctx.zeroed::<u32>(1024)?;
        let mut other = ctx.zeroed::<u32>(1024)?;
        let stream = ctx.new_stream()?;
        // the raw handles and the address before the pending fill: a raw escape waits for
        // the synchronous writes pending when it is taken
        let raw = Raw {
            ctx: common::handle(ctx) as usize,
            // SAFETY (of the test): only raw memsets of the test's own memory are queued
            // through the handle, inside the scope below, which waits for them
            stream: unsafe { stream.as_raw() } as usize,
        };
        // SAFETY (of the test): only the address is taken.
        let at = unsafe { pending.as_device_ptr() };
        // another thread's sync stream busy for seconds, and a fill of `pending` behind
        std::thread::scope(|t| {
            t.spawn(|| {
                shared.enter(|_| {
                    keep_busy(&mut slow, fills)?;
                    pending.fill(5)
                })
            })
            .join()
            .unwrap()
        })?;
        eprintln!("step: a fill of `pending` is queued behind {fills} fills of {len} words");
        let words = RawWords::new();
        let m = Mutex::new(());
        let got_lock = AtomicBool::new(false);
        let mut out = vec![0u32; 1024];
        let (tell, told) = mpsc::channel::<Next>();
        let (locked, is_locked) = mpsc::channel::<()>();
        let (reproduced, held) = std::thread::scope(|t| {
            let (m, other) = (&m, &mut other);
            let holder = t.spawn(move || {
                let guard = m.lock().unwrap();
                locked.send(()).unwrap();
                let made = match told.recv() {
                    Ok(Next::Go) => {
                        std::thread::sleep(Duration::from_millis(300));
                        eprintln!("step: the mutex's holder makes a synchronous fill");
                        let made = shared.enter(|_| other.fill(9));
                        eprintln!("step: the holder's fill returned");
                        made
                    }
                    _ => Ok(()),
                };
                drop(guard);
                made
            });
            is_locked.recv().unwrap();
            let reproduced = stream.scope(|s| {
                // moved in: dropped when the closure returns (or unwinds) without `Go`,
                // which the holder takes as `GiveUp`
                let tell = tell;
                s.host_fn(|| got_lock.store(lock_within(m, PATIENCE), Ordering::SeqCst))?;
                if !fill_and_probe(raw, &words, &tell)? {
                    return Ok(false);
                }
                if cuda_brand::__order::incomplete_writes_of(at, 4096)? == 0 {
                    common::child::not_arisen(
                        "the pending fill completed before the scope's operation",
                    );
                    tell.send(Next::GiveUp).unwrap();
                    return Ok(false);
                }
                tell.send(Next::Go).unwrap();
                eprintln!(
                    "step: the stream is full; its next operation waits for the pending fill"
                );
                s.copy_to_host(&mut out, &pending)?;
                eprintln!("step: the scope's operation returned");
                Ok::<_, Error>(true)
            });
            (reproduced, holder.join().unwrap())
        });
        let reproduced = reproduced?;
        held?;
        words.free();
        if reproduced {
            assert!(
                got_lock.load(Ordering::SeqCst),
                "the host function got the mutex in time"
            );
            assert_all(&out, 5, "the scope's copy of the pending fill");
            assert_all(&other.to_vec()?, 9, "the holder's fill");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    common::child::end_child();
}

/// The length of the slow buffer (`u32`s) and how many fills of it keep a sync stream busy
/// for seconds: up to 16 GiB (a quarter of the free memory at most), about 16 TB written.
fn slow_fills() -> (usize, usize) {
    let bytes = (common::free_memory() / 4).min(16 << 30) & !0xfff;
    let fills = (16_000_000_000_000 / bytes).clamp(32, 1024);
    (bytes / 4, fills)
}

/// The raw handles the filling thread and the probe use (as numbers: they cross threads).
#[derive(Clone, Copy)]
struct Raw {
    ctx: usize,
    stream: usize,
}

/// Two words of device memory from `cuMemAlloc`, which raw memsets write.
struct RawWords(u64);

impl RawWords {
    fn new() -> RawWords {
        let mut ptr = 0;
        // SAFETY (of the test): a context is current; the out-pointer is a live local.
        assert_eq!(unsafe { (common::driver().cuMemAlloc_v2)(&mut ptr, 8) }, 0);
        RawWords(ptr)
    }

    fn free(self) {
        // SAFETY (of the test): allocated above; the scope that wrote it has waited.
        assert_eq!(unsafe { (common::driver().cuMemFree_v2)(self.0) }, 0);
    }
}

/// Runs `f` with the raw context pushed on this thread.
fn pushed<T>(ctx: usize, f: impl FnOnce() -> T) -> T {
    let driver = common::driver();
    let mut popped = std::ptr::null_mut();
    // SAFETY (of the test): the context is alive (its guard is in scope); popped below.
    assert_eq!(unsafe { (driver.cuCtxPushCurrent_v2)(ctx as _) }, 0);
    let value = f();
    // SAFETY (of the test): pops the push above.
    assert_eq!(unsafe { (driver.cuCtxPopCurrent_v2)(&mut popped) }, 0);
    value
}

/// Fills `raw.stream`'s queue (blocked behind the scope's host function) from another
/// thread until the driver blocks that thread, then probes another stream. `Ok(true)`: the
/// stream is full and other streams take work; `Ok(false)`: the scenario cannot arise here
/// (said, and the holder told to give up). The filling thread is told to stop before this
/// returns, and is joined once the stream drains.
fn fill_and_probe(raw: Raw, words: &RawWords, tell: &mpsc::Sender<Next>) -> Result<bool, Error> {
    let (count, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
    let word = words.0;
    std::thread::scope(|t| {
        let filler = t.spawn(|| {
            pushed(raw.ctx, || {
                for i in 0..FILL_CAP {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    // SAFETY (of the test): a word of the test's memory, on the live stream.
                    let rc = unsafe {
                        (common::driver().cuMemsetD32Async)(word, i as u32, 1, raw.stream as _)
                    };
                    assert_eq!(rc, 0, "cuMemsetD32Async");
                    count.fetch_add(1, Ordering::SeqCst);
                }
            })
        });
        let full = wait_until_stalled(&count, &filler);
        stop.store(true, Ordering::SeqCst);
        if !full {
            common::child::not_arisen(format!(
                "the driver queued {FILL_CAP} operations behind the host function without blocking"
            ));
            tell.send(Next::GiveUp).unwrap();
            return Ok(false);
        }
        eprintln!(
            "step: the driver blocked the filling thread after {} operations",
            count.load(Ordering::SeqCst)
        );
        let (probed, probe) = mpsc::channel();
        t.spawn(move || {
            pushed(raw.ctx, || probe_another_stream(word + 4));
            let _ = probed.send(());
        });
        match probe.recv_timeout(Duration::from_secs(5)) {
            Ok(()) => Ok(true),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                common::child::not_arisen(
                    "the driver blocks work on every stream while one stream is full",
                );
                tell.send(Next::GiveUp).unwrap();
                Ok(false)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the probe failed"),
        }
    })
}

/// Waits until the filling thread has queued nothing for [`STALLED_FOR`] (`true`) or has
/// finished (`false`).
fn wait_until_stalled(count: &AtomicUsize, filler: &std::thread::ScopedJoinHandle<'_, ()>) -> bool {
    let (mut seen, mut since) = (0, std::time::Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if filler.is_finished() {
            return false;
        }
        let now = count.load(Ordering::SeqCst);
        if now != seen {
            (seen, since) = (now, std::time::Instant::now());
        } else if now > 0 && since.elapsed() > STALLED_FOR {
            return true;
        }
    }
}

/// A memset on a new non-blocking stream, waited for: returns at once unless the driver
/// blocks every stream.
fn probe_another_stream(word: u64) {
    let driver = common::driver();
    let mut z = std::ptr::null_mut();
    // SAFETY (of the test): a context is pushed; the stream is made, used, waited for and
    // destroyed here; the word is the test's memory.
    unsafe {
        assert_eq!((driver.cuStreamCreate)(&mut z, 1), 0);
        assert_eq!((driver.cuMemsetD32Async)(word, 1, 1, z), 0);
        assert_eq!((driver.cuStreamSynchronize)(z), 0);
        assert_eq!((driver.cuStreamDestroy_v2)(z), 0);
    }
}

/// Takes and releases `m` (polling), or gives up after `patience`: whether it got it.
fn lock_within(m: &Mutex<()>, patience: Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        if m.try_lock().is_ok() {
            return true;
        }
        if start.elapsed() > patience {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

gpu_tests!(
    copy_from_device_has_read_a_managed_source_when_it_returns,
    context_synchronize_covers_a_pool_write_made_while_another_context_was_current,
    a_queued_wait_on_a_record_of_a_destroyed_context_completes,
    a_pending_write_of_an_ended_thread_is_seen,
    a_copy_into_managed_memory_follows_a_pending_fill,
    into_raw_parts_waits_for_a_pending_fill,
    a_block_freed_with_a_pending_fill_is_zeroed_for_the_next_thread,
    a_scope_write_on_another_thread_follows_a_pending_synchronous_read,
    a_graph_replay_sees_a_synchronous_write_of_a_lent_buffer,
    a_scope_operation_waits_for_a_pending_write_outside_the_books_lock,
);

/// Tests that run alone: the default pool's blocks, the primary context.
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    Vec::from([
        Test {
            name: "teardowns_on_one_thread_end_another_threads_sync_streams_safely",
            needs: Needs::Gpu,
            body: teardowns_on_one_thread_end_another_threads_sync_streams_safely,
        },
        Test {
            name: "setup_pool_memory_is_freed_after_another_contexts_pending_write",
            needs: Needs::Gpu,
            body: setup_pool_memory_is_freed_after_another_contexts_pending_write,
        },
    ])
}
