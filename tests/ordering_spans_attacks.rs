//! Attacks on the second step of the order of synchronous operations (issue 28: accesses by
//! span, the bounce ring, teardown marks; `src/synchronous/`): safe programs (and raw
//! driver calls standing for another library) that try to see a "complete" synchronous
//! operation still running, to race one, or to keep a sync stream past its context.
//!
//! As in `ordering_attacks`, most tests first make a sync stream slow ([`keep_busy`]), so a
//! missing order shows as stale values deterministically. Written by the review of the
//! spans (branch `h28span2`); which test each fix answers is said at each. They ran on an
//! H100 only with the fixes (all pass); none was run on the code before its fix, so that
//! they would fail there is the review's reasoning, not a measurement.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use crate::common;
use crate::common::ordering::{assert_all, keep_busy};

use cuda_brand::prelude::*;

/// 64 MiB of `u32`s.
const N: usize = 16 << 20;
const ROUNDS: usize = 10;
/// 1 GiB of `u32`s: one fill of it takes about 0.3 ms on an H100.
const SLOW_LEN: usize = 1 << 28;

const PTX: &str = include_str!("../kernels/kernels.ptx");

/// `context` pushed on the calling thread while it lives (another library's
/// `cuCtxPushCurrent`, undone by its drop).
struct Pushed;

impl Pushed {
    fn new(context: usize) -> Self {
        // SAFETY (of the test): the caller keeps `context` retained while this lives.
        let rc = unsafe { (common::driver().cuCtxPushCurrent_v2)(context as _) };
        assert_eq!(rc, 0, "cuCtxPushCurrent_v2");
        Pushed
    }
}

impl Drop for Pushed {
    fn drop(&mut self) {
        let mut popped = std::ptr::null_mut();
        // SAFETY (of the test): undoes `new`'s push, the top of this thread's stack.
        let _ = unsafe { (common::driver().cuCtxPopCurrent_v2)(&mut popped) };
    }
}

/// A scope's `copy_from_peer` reads its source, memory of another context: the source
/// written synchronously just before (a fill left pending behind slow fills) must be read
/// after that write. The scope's operation named only its destination, so with accesses
/// by span it waited for nothing (the source's pending write shares no byte with the
/// destination). Written to fail before the fix (`copy_from_peer` names its source's span).
fn a_scope_copy_from_peer_waits_for_a_pending_write_of_its_source() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |a| {
        let mut src = a.zeroed::<u32>(N)?;
        // of `src`'s context, so its fills share `src`'s sync stream (the memory's own
        // context's, or the current one's for pool memory): the fill of `src` is behind them
        let mut slow = a.zeroed::<u32>(SLOW_LEN)?;
        with_context(&device, ContextFlags::default(), |b| {
            let mut dst = b.zeroed::<u32>(N)?; // also gives b a sync stream of this thread
            let stream = b.new_stream()?;
            for round in 0..ROUNDS as u32 {
                keep_busy(&mut slow, 32)?;
                src.fill(round + 60)?;
                stream.scope(|s| s.copy_from_peer(&mut dst, &src, a))?;
                assert_all(
                    &dst.to_vec()?,
                    round + 60,
                    "copy_from_peer of a source with a pending write",
                );
            }
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// A module global written synchronously (4 bytes through the bounce ring, behind slow
/// fills: still pending), then the module dropped (`cuModuleUnload`) and loaded again: the
/// new module's global must hold its initial value (0). Passes only if the unload waits
/// for the pending write, as a free of the memory would (`cuModuleUnload` is not documented
/// to wait for other streams' work); where the new global is elsewhere it is inconclusive.
fn a_module_unloaded_with_a_pending_global_write_leaves_the_next_module_alone() {
    let device = common::gpu();
    let seen_same = with_context(&device, ContextFlags::default(), |ctx| {
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut seen_same = 0;
        for round in 0..ROUNDS as i32 {
            let mut first = Module::from_ptx(ctx, PTX)?;
            // SAFETY (of the test): only the address is taken, to compare.
            let was_at = unsafe { first.global::<i32>("counter")?.as_device_ptr() };
            keep_busy(&mut slow, 320)?; // about 100 ms
            first
                .global_mut::<i32>("counter")?
                .copy_from_host(&[0x5a5a_0000 | round])?;
            drop(first);
            let second = Module::from_ptx(ctx, PTX)?;
            let counter = second.global::<i32>("counter")?;
            // SAFETY (of the test): only the address is taken, to compare.
            let now_at = unsafe { counter.as_device_ptr() };
            let value = counter.to_vec()?; // waits for every pending write of a global
            if now_at != was_at {
                continue;
            }
            seen_same += 1;
            assert_eq!(
                value,
                [0],
                "round {round}: the unloaded module's pending write landed in the new module's global"
            );
        }
        Ok::<_, Error>(seen_same)
    })
    .unwrap();
    if seen_same == 0 {
        common::skip("inconclusive: the new module's global was never at the old one's address");
    }
}

/// A sync stream is made for a context another library made current (`RecordIfKnown`)
/// only while the context has a sync stream already, which is to prove that a scope of
/// the crate holds the context and will end the new one too. A sync stream that a teardown
/// found busy stays in the book, doomed, until its own operation ends it: it proves
/// nothing any more, yet a third thread made its own sync stream beside it, which no
/// teardown then ends (its number is below every later scope's mark). When the other
/// library lets the context go, that sync stream's stream and event outlive it, and the
/// next use of the book touches them (`cuEventQuery` of a destroyed event, or the same
/// thread's next write on a destroyed stream).
///
/// Threads: the main thread enters and leaves the primary context 400 times (a sync stream
/// each time); an uploader keeps a sync stream of the primary context busy with pageable
/// 12 MiB uploads (another library made the primary context current on it); a filler, the
/// primary context current likewise, fills a small buffer in a loop. Racy by nature: a
/// pass on unfixed code is possible, though unlikely over 400 teardowns. Written to fail
/// before the fix (a doomed sync stream does not count as the context's). Runs alone: it holds and
/// destroys the primary context.
fn a_sync_stream_made_beside_a_doomed_one_does_not_outlive_its_context() {
    let device = common::gpu();
    let driver = common::driver();
    let mut primary = std::ptr::null_mut();
    // SAFETY (of the test): released below, after both threads popped it.
    unsafe {
        assert_eq!(
            (driver.cuDevicePrimaryCtxRetain)(&mut primary, device.as_raw()),
            0
        );
    }
    let primary = primary as usize;
    let stop = AtomicBool::new(false);
    let (popped_tx, popped_rx) = mpsc::channel::<()>();
    let (released_tx, released_rx) = mpsc::channel::<()>();
    std::thread::scope(|t| {
        let (device, stop) = (&device, &stop);
        let uploader = t.spawn(move || {
            with_context(device, ContextFlags::default(), |x| {
                let mut buf = x.zeroed::<u8>(12 << 20)?;
                let host = vec![0x11u8; 12 << 20];
                let _current = Pushed::new(primary);
                while !stop.load(Ordering::Acquire) {
                    // pool memory, the primary context current: its sync stream where it
                    // has one, busy for the pageable copy
                    buf.copy_from_host(&host)?;
                }
                Ok::<_, Error>(())
            })
        });
        let filler = t.spawn(move || {
            with_context(device, ContextFlags::default(), |y| {
                let stream = y.new_stream()?;
                let mut small = y.zeroed::<u32>(1024)?;
                {
                    let _current = Pushed::new(primary);
                    let mut k = 0u32;
                    while !stop.load(Ordering::Acquire) {
                        small.fill(k)?;
                        k = k.wrapping_add(1);
                    }
                    small.fill(7)?; // a record left pending where a sync stream took it
                }
                popped_tx.send(()).unwrap();
                released_rx.recv().unwrap();
                // the primary context is destroyed: a scope operation naming no memory
                // looks at every pending record of the book
                stream.scope(|s| s.host_fn(|| ()))?;
                // another library makes the (new) primary context current, and this
                // thread writes pool memory in it
                let mut again = std::ptr::null_mut();
                // SAFETY (of the test): released below.
                unsafe {
                    assert_eq!(
                        (common::driver().cuDevicePrimaryCtxRetain)(&mut again, device.as_raw()),
                        0
                    );
                }
                let same = again as usize == primary;
                let filled = {
                    let _current = Pushed::new(again as usize);
                    small.fill(9)
                };
                // SAFETY (of the test): undoes the retain above.
                unsafe {
                    assert_eq!(
                        (common::driver().cuDevicePrimaryCtxRelease_v2)(device.as_raw()),
                        0
                    );
                }
                filled?;
                assert_all(&small.to_vec()?, 9, "a fill in the new primary context");
                if !same {
                    eprintln!("partly inconclusive: the new primary context has another handle");
                }
                Ok::<_, Error>(())
            })
        });
        for i in 0..400u32 {
            with_primary_context(device, |p| {
                let mut mine = p.zeroed::<u32>(16)?; // a sync stream of the primary context
                mine.fill(i)?;
                std::thread::sleep(std::time::Duration::from_millis(2));
                Ok::<_, Error>(())
            })
            .unwrap();
        }
        stop.store(true, Ordering::Release);
        uploader.join().unwrap().unwrap();
        popped_rx.recv().unwrap();
        // the other library lets go: nothing holds the primary context, which is destroyed
        // SAFETY (of the test): undoes the retain at the start.
        unsafe {
            assert_eq!((driver.cuDevicePrimaryCtxRelease_v2)(device.as_raw()), 0);
        }
        released_tx.send(()).unwrap();
        filler.join().unwrap().unwrap();
    });
}

/// Pins the bounce ring: more small uploads than it has slots, each into its own buffer,
/// behind slow fills (so every slot's copy is still queued when the next upload takes a
/// slot), each source buffer overwritten on the host right after its upload returns;
/// then every buffer read in a scope on another thread and synchronously. Checked sound
/// by the review (a slot is rewritten only after its event; the latest record covers the
/// earlier ones).
fn small_uploads_through_every_slot_of_the_bounce_ring_keep_their_values() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            let mut host = vec![0u32; 16 << 10]; // 64 KiB: bounced
            let mut bufs = Vec::new();
            for k in 0..9u32 {
                host.fill(round * 100 + k);
                let mut buf = ctx.zeroed::<u32>(host.len())?;
                buf.copy_from_host(&host)?;
                host.fill(0xdead_0000); // the upload is complete: the host buffer is free
                bufs.push(buf);
            }
            std::thread::scope(|t| {
                t.spawn(|| {
                    shared.enter(|g| {
                        let stream = g.new_stream()?;
                        for (k, buf) in bufs.iter().enumerate() {
                            let mut seen = vec![0u32; buf.len()];
                            stream.scope(|s| s.copy_to_host(&mut seen, buf))?;
                            assert_all(&seen, round * 100 + k as u32, "read in a scope");
                        }
                        Ok::<_, Error>(())
                    })
                })
                .join()
                .unwrap()
            })?;
            for (k, buf) in bufs.iter().enumerate() {
                assert_all(&buf.to_vec()?, round * 100 + k as u32, "read synchronously");
            }
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// Pins sub-ranges: a pending fill of a whole buffer, then a scope writing one half and a
/// synchronous read of the other half on another thread; and a pending fill of one half
/// read whole. Checked sound by the review (spans overlap by address).
fn halves_and_wholes_wait_for_each_others_pending_writes() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let stream = ctx.new_stream()?;
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut buf = ctx.zeroed::<u32>(N)?;
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            buf.fill(round + 1)?; // whole, pending
            let (lo, hi) = buf.split_at_mut(N / 2);
            stream.scope(|s| s.fill(&mut *lo, round + 1000))?;
            let hi_seen =
                std::thread::scope(|t| t.spawn(|| shared.enter(|_| hi.to_vec())).join().unwrap())?;
            assert_all(&hi_seen, round + 1, "the other half, on another thread");
            assert_all(
                &lo.to_vec()?,
                round + 1000,
                "the half a scope wrote after the fill",
            );
            keep_busy(&mut slow, 32)?;
            buf[N / 4..N / 2 + N / 4].fill(round + 7)?; // a middle part, pending
            let mut whole = vec![0u32; N];
            stream.scope(|s| s.copy_to_host(&mut whole, &buf))?;
            assert_all(
                &whole[N / 4..N / 2 + N / 4],
                round + 7,
                "the middle, read whole",
            );
            assert_all(&whole[N / 2 + N / 4..], round + 1, "the rest, read whole");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// Pins block reuse across sizes: a buffer with a pending fill dropped (its block back to
/// the pool), then a smaller allocation inside a scope on another thread (likely a part of
/// the same block) read right away: it holds whatever the scope wrote, never the late
/// fill. Checked sound by the review (the freed block's pending write stays in the book,
/// and the scope's operations name the new allocation's addresses).
fn a_smaller_scope_allocation_in_a_freed_block_is_not_overwritten_by_its_pending_fill() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        for round in 0..ROUNDS as u32 {
            let mut dirty = ctx.zeroed::<u32>(N)?;
            keep_busy(&mut slow, 32)?;
            dirty.fill(0xffff_ffff)?;
            drop(dirty);
            let seen = std::thread::scope(|t| {
                t.spawn(|| {
                    shared.enter(|g| {
                        let stream = g.new_stream()?;
                        let mut host = vec![0u32; N / 4];
                        stream.scope(|s| {
                            let fresh = s.alloc_zeroed::<u32>(N / 4)?;
                            s.fill(fresh, round + 3)?;
                            s.copy_to_host(&mut host, fresh.into_ref())
                        })?;
                        Ok::<_, Error>(host)
                    })
                })
                .join()
                .unwrap()
            })?;
            assert_all(&seen, round + 3, "a scope allocation in a freed block");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

gpu_tests!(
    a_scope_copy_from_peer_waits_for_a_pending_write_of_its_source,
    a_module_unloaded_with_a_pending_global_write_leaves_the_next_module_alone,
    small_uploads_through_every_slot_of_the_bounce_ring_keep_their_values,
    halves_and_wholes_wait_for_each_others_pending_writes,
    a_smaller_scope_allocation_in_a_freed_block_is_not_overwritten_by_its_pending_fill,
);

/// Tests that run alone: the primary context.
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    Vec::from([Test {
        name: "a_sync_stream_made_beside_a_doomed_one_does_not_outlive_its_context",
        needs: Needs::Gpu,
        body: a_sync_stream_made_beside_a_doomed_one_does_not_outlive_its_context,
    }])
}
