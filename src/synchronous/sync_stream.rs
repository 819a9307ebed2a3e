//! The calling thread's sync stream: the process's book of sync streams behind its lock,
//! a synchronous operation's use of its thread's sync stream ([`SyncStream`], from
//! [`SyncStream::begin`] to its end), and what the context layer calls at a context's
//! teardown and in `ContextGuard::synchronize` ([`HOOKS`], registered before the first
//! sync stream is made).

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use super::book::Book;
use super::lifecycle::{end_sync_stream, free_rings, make_bounce, make_sync_stream, may_register};
use crate::context::teardown::{self, SyncHooks};
use crate::driver::{self, CUcontext, CUevent, CUstream};
use crate::error::Result;
use crate::span::Touched;

/// The process's book; handles as numbers (`CUevent` and `CUstream` are raw pointers, not
/// `Send`).
pub(super) static BOOK: Mutex<Book<usize>> = Mutex::new(Book::new());

/// The book, locked: refused inside a host function (a driver thread), whose every driver
/// call is refused anyway, so that no host function can ever wait for the lock while its
/// holder waits for the GPU (`wait_on_host` synchronizes events under it).
pub(super) fn book() -> Result<MutexGuard<'static, Book<usize>>> {
    if driver::in_host_fn() {
        return Err(driver::driver_call_refused(
            "the order of synchronous operations",
        ));
    }
    // every critical section leaves the book consistent (a push, a store, a removal)
    Ok(BOOK.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Publishes how many accesses are pending in the book ([`Book::pending`]), for the readers
/// without its lock ([`is_settled`], the context layer's teardowns:
/// `teardown::publish_sync_pending`). Called under the lock after every change.
pub(super) fn publish(book: &Book<usize>) {
    teardown::publish_sync_pending(book.pending() as u64);
}

/// Publishes how many sync streams were made and how many live, for the context layer's
/// teardowns (`teardown::count_sync_streams`). Called under the book's lock after every
/// making ([`add_sync_stream`]) and ending (`lifecycle::end_sync_stream`).
fn publish_counts(book: &Book<usize>) {
    teardown::count_sync_streams(book.made, book.entries.len() as u64);
}

/// `done` for [`Book::wait_conflicting`]: whether the event's latest record is complete.
pub(super) fn event_done(event: usize) -> Result<bool> {
    // SAFETY: the event is alive while its entry is in the book, under the lock held by
    // every caller of `wait_conflicting`.
    unsafe { driver::event_query(event as CUevent) }
}

/// The most accesses one sync stream keeps pending: past it, the sync stream's latest
/// record is waited for on the host (a thread that queues this many device writes without
/// any synchronization waits for the GPU to catch up), so the book stays small.
const MAX_PENDING: usize = 64;

/// This thread's token: the address of a thread-local, distinct among the live threads. A
/// thread started after another ended may get that thread's token, and its sync streams: a
/// sync stream is not tied to a thread by the driver, only by the book (one user at a
/// time).
pub(super) fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| t as *const u8 as usize)
}

/// `CUDA_BRAND_SYNC_WRITES=wait` in the environment (read once): every synchronous
/// operation runs on the legacy stream and is waited for on the host, as before the sync
/// streams, so that one benchmark session measures both (`scripts/bench-ordering`).
/// Anything else, or unset: sync streams.
pub(super) fn host_waits() -> bool {
    static WAITS: OnceLock<bool> = OnceLock::new();
    *WAITS.get_or_init(|| std::env::var("CUDA_BRAND_SYNC_WRITES").is_ok_and(|v| v == "wait"))
}

/// Waits on the host for the current context's legacy stream.
pub(crate) fn legacy_wait() -> Result<()> {
    // SAFETY: null is the current context's legacy default stream.
    unsafe { driver::stream_wait_idle(std::ptr::null_mut()) }
}

/// What the context layer calls at a context's teardown, in `ContextGuard::synchronize` and
/// after destroying a context (`context::teardown::SyncHooks`), registered before every
/// sync stream is made ([`add_sync_stream`]).
const HOOKS: SyncHooks = SyncHooks {
    end_since: end_sync_streams_since,
    wait_on_host,
    after_destroy: super::lifecycle::after_destroy,
    #[cfg(feature = "staging")]
    holds,
};

/// Makes the calling thread's sync stream in `ctx` (current) and adds it to the book, once
/// the context layer has the hooks that end it ([`HOOKS`]): its index in the book.
pub(super) fn add_sync_stream(
    book: &mut Book<usize>,
    ctx: CUcontext,
    thread: usize,
) -> Result<usize> {
    teardown::register_sync_hooks(HOOKS);
    let i = book.add(ctx as usize, thread, || make_sync_stream(ctx))?;
    publish_counts(book);
    Ok(i)
}

#[cfg(feature = "staging")] // used by the bulk-copy staging alone
/// Whether `raw` has a sync stream that is not doomed (`Book::holds`: made under a scope
/// that has not torn down yet): [`SyncHooks::holds`].
fn holds(raw: CUcontext) -> bool {
    book().is_ok_and(|book| book.holds(raw as usize))
}

/// A synchronous operation's use of the calling thread's sync stream in the current
/// context, between [`SyncStream::begin`] and its end ([`SyncStream::end`],
/// [`SyncStream::end_after_sync`] or [`SyncStream::abandon`]).
pub(crate) struct SyncStream {
    pub(super) ctx: usize,
    pub(super) thread: usize,
    pub(super) stream: CUstream,
    /// The bounce slot lent to this operation (`begin` with `slot`).
    pub(super) slot: Option<BounceSlot>,
    /// `begin` was asked for a slot, and the sync stream has no bounce ring yet: the first
    /// [`SyncStream::slot`] makes it.
    pub(super) needs_ring: bool,
    /// The ring it makes is page-locked (`lifecycle::may_register`).
    pub(super) register: bool,
}

/// A slot of a sync stream's bounce ring, lent to one small upload.
#[derive(Clone, Copy)]
pub(crate) struct BounceSlot {
    index: usize,
    /// [`BOUNCE_SLOT`](super::book::BOUNCE_SLOT) bytes of host memory of the crate's own.
    pub(crate) host: *mut u8,
    /// Recorded after the last copy out of the slot: complete once the slot is free.
    pub(crate) event: CUevent,
    /// Whether that copy may still be queued: else the slot is free without a wait (its
    /// sync stream was synchronized, or a later record of it was found complete, since).
    pub(crate) in_flight: bool,
}

impl BounceSlot {
    fn new((index, host, event, in_flight): (usize, usize, usize, bool)) -> BounceSlot {
        BounceSlot {
            index,
            host: host as *mut u8,
            event: event as CUevent,
            in_flight,
        }
    }
}

impl SyncStream {
    /// The calling thread's sync stream in `ctx` (current on it), ordered after every
    /// pending record of other sync streams: the stream a synchronous operation then queues
    /// its work on. `make`: a sync stream may be made for `ctx` if this thread has none (a
    /// context the crate entered, whose teardown ends the sync stream); without it, one is
    /// made only where `ctx` has a sync stream of another thread already (the crate holds
    /// that context, and its teardown ends every sync stream of it). `None`: no sync stream
    /// (none may be made, making one failed, or `CUDA_BRAND_SYNC_WRITES=wait`): the
    /// operation runs on the legacy stream (`outside::before_legacy_op`) and is waited for on the
    /// host. `slot`: lend the operation the next slot of the sync stream's bounce ring
    /// ([`SyncStream::slot`], which makes the ring if the sync stream has none). `touched`: what the operation
    /// touches (device memory), which the sync stream waits for every conflicting pending
    /// access of another sync stream before.
    ///
    /// # Safety
    /// `ctx` is alive and current on the calling thread until the sync stream's operation
    /// ends.
    pub(crate) unsafe fn begin(
        ctx: CUcontext,
        make: bool,
        slot: bool,
        touched: Touched<'_>,
    ) -> Result<Option<SyncStream>> {
        if host_waits() {
            return Ok(None);
        }
        let thread = thread_token();
        let mut book = book()?;
        let i = match book.find(ctx as usize, thread) {
            Some(i) => i,
            // not beside a doomed sync stream alone (`Book::holds`)
            None if make || book.holds(ctx as usize) => {
                match add_sync_stream(&mut book, ctx, thread) {
                    Ok(i) => i,
                    Err(_) => return Ok(None),
                }
            }
            None => return Ok(None),
        };
        let stream = book.entries[i].stream;
        let waited = book.wait_conflicting(touched, Some(i), event_done, |event| {
            // SAFETY: the stream is alive while its entry is in the book; the event
            // likewise, under the lock held here.
            unsafe { driver::stream_wait_event(stream as CUstream, event as CUevent) }
        });
        publish(&book);
        waited?;
        let needs_ring = slot && book.needs_ring(i);
        let register = needs_ring && may_register(&book, i);
        if needs_ring {
            book.reserve_ring(i, register);
        }
        let slot = match slot {
            true => book.take_slot(i).map(BounceSlot::new),
            false => None,
        };
        book.entries[i].busy = true;
        Ok(Some(SyncStream {
            ctx: ctx as usize,
            thread,
            stream: stream as CUstream,
            slot,
            needs_ring,
            register,
        }))
    }

    /// The stream.
    pub(crate) fn stream(&self) -> CUstream {
        self.stream
    }

    /// The bounce slot lent to this operation: `None` where `begin` was not asked for one
    /// or the ring could not be made. Its memory is this operation's alone until it ends;
    /// an earlier copy out of it may still be queued until the slot's event completes.
    /// Ending the operation with [`SyncStream::end`] records the slot's event. The sync
    /// stream's first slot makes its ring here, outside the book's lock (every thread's
    /// synchronous operations take that lock).
    pub(crate) fn slot(&mut self) -> Option<BounceSlot> {
        if self.needs_ring {
            // the context is current (`begin`'s promise); the sync stream is busy, so its
            // entry stays in the book until this operation ends
            let made = make_bounce(self.register);
            let mut book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(i) = book.find(self.ctx, self.thread) else {
                unreachable!("a busy sync stream stays in the book")
            };
            book.install_ring(i, made);
            // only now: an operation that unwound before this point still releases its
            // reservation (`Ring::Coming`) in `Drop`, so that no sync stream is left without
            // a ring, and no place of the cap taken, for good
            self.needs_ring = false;
            self.slot = book.take_slot(i).map(BounceSlot::new);
        }
        self.slot
    }

    /// Ends a write of device memory alone, which touched `touched`: records the sync
    /// stream's event after it (the slot's, for a bounced upload), which later users of
    /// that memory wait for on the GPU. Where the record fails, waits for the sync stream
    /// on the host instead.
    pub(crate) fn end(self, touched: Touched<'_>) -> Result<()> {
        self.finish(Some(touched), false)
    }

    /// Ends the operation, recording the sync stream's event after it where `record` says
    /// what it touched; `synced`: the sync stream was synchronized without error, so every
    /// record of it is complete.
    pub(super) fn finish(self, record: Option<Touched<'_>>, synced: bool) -> Result<()> {
        let result = self.finish_in_place(record, synced);
        // ended: `Drop` is for an operation that never reaches its end
        std::mem::forget(self);
        result
    }

    /// [`finish`](SyncStream::finish), for `finish` and `Drop`.
    fn finish_in_place(&self, record: Option<Touched<'_>>, synced: bool) -> Result<()> {
        let mut book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(i) = book.find(self.ctx, self.thread) else {
            unreachable!("a busy sync stream stays in the book")
        };
        book.entries[i].busy = false;
        if self.needs_ring {
            // `slot` was never asked for: the ring is made by a later operation
            book.unreserve_ring(i);
        }
        if synced {
            book.entries[i].settled();
        }
        let mut result = Ok(());
        if let Some(touched) = record {
            let slot = self.slot.map(|s| s.index);
            let recorded = book.record(i, slot, touched, |event, stream| {
                // SAFETY: the event and stream are the sync stream's, alive while it is in
                // the book.
                unsafe { driver::event_record(event as CUevent, stream as CUstream) }
            });
            if recorded.is_err() || book.entries[i].pending.len() > MAX_PENDING {
                // SAFETY: as above.
                result = unsafe { driver::stream_wait_idle(self.stream) };
                if result.is_ok() {
                    book.entries[i].settled();
                } else if recorded.is_err() && slot.is_some() {
                    // a copy out of the slot may be queued with no event behind it: the
                    // slot must never be rewritten
                    book.give_up_ring(i);
                }
            }
        }
        let mut ring = None;
        if book.entries[i].doomed {
            // the context ended meanwhile (its teardown could not end a busy sync stream):
            // it is alive and current here still (`begin`'s promise)
            ring = end_sync_stream(&mut book, i);
            publish_counts(&book);
        }
        publish(&book);
        drop(book);
        if ring.is_some() {
            free_rings(ring);
        }
        result
    }

    /// Waits for the sync stream on the host (an operation that touched host memory), then
    /// ends the operation as complete ([`SyncStream::end`] without a record). Where the
    /// wait fails, the sync stream is idle all the same (`stream_wait_idle`) and its error
    /// is returned.
    pub(crate) fn end_after_sync(self) -> Result<()> {
        // SAFETY: the stream is alive while the sync stream is busy.
        match unsafe { driver::stream_wait_idle(self.stream) } {
            Ok(()) => self.finish(None, true),
            Err(e) => {
                let _ = self.finish(None, false);
                Err(e)
            }
        }
    }

    /// Ends an operation that failed part-way: what it queued is waited for on the host
    /// (no error path returns while work may still run), nothing recorded.
    pub(crate) fn abandon(self) {
        // SAFETY: the stream is alive while the sync stream is busy.
        let idle = unsafe { driver::stream_wait_idle(self.stream) };
        let _ = self.finish(None, idle.is_ok());
    }
}

/// An operation that never reached its end (no path of the crate does that, but a panic
/// between `begin` and the end would): abandoned as [`SyncStream::abandon`] does, so that
/// the sync stream is not left busy, which would keep every teardown from ending it.
impl Drop for SyncStream {
    fn drop(&mut self) {
        // SAFETY: the stream is alive while the sync stream is busy.
        let idle = unsafe { driver::stream_wait_idle(self.stream) };
        let _ = self.finish_in_place(None, idle.is_ok());
    }
}

/// Makes the calling thread's sync stream in `ctx` now if it has none (the end of a setup
/// phase: the run phase then creates nothing for its synchronous operations). Best effort:
/// where it cannot be made, the first operation tries again, and runs on the legacy stream
/// if that fails too.
///
/// # Safety
/// `ctx` is alive and current on the calling thread.
pub(crate) unsafe fn prepare(ctx: CUcontext) {
    if host_waits() {
        return;
    }
    let Ok(mut book) = book() else {
        return;
    };
    let thread = thread_token();
    if book.find(ctx as usize, thread).is_none() && add_sync_stream(&mut book, ctx, thread).is_ok()
    {
        publish(&book);
    }
}

/// Whether nothing is pending: no work needs to wait for any sync stream. One atomic load.
#[inline(always)]
pub(crate) fn is_settled() -> bool {
    teardown::sync_writes_settled()
}

/// Waits on the host for every pending record (before `cuMemFree`, which the driver does
/// not promise to order after other streams' work on the memory, and where the crate's
/// contract promises every earlier write complete: `ContextGuard::synchronize`).
pub(crate) fn wait_on_host() -> Result<()> {
    if is_settled() {
        return Ok(());
    }
    let mut book = book()?;
    let waited = book.wait_conflicting(Touched::Anything, None, event_done, |event| {
        // SAFETY: the event is alive while its entry is in the book, under this lock.
        unsafe { driver::event_synchronize(event as CUevent) }
    });
    if waited.is_ok() {
        // every sync stream's latest record is complete now
        book.entries.iter_mut().for_each(|e| e.settled());
    }
    publish(&book);
    waited
}

/// Ends every sync stream of `raw` (alive and current), of any thread, made after `mark`
/// (0: all of them): waited for on the host and ended; a sync stream busy on another thread
/// (a primary context entered on two threads) is doomed, and ended by its own operation
/// ([`SyncStream::end`]). [`SyncHooks::end_since`]: the context layer's
/// `teardown::end_sync_streams` past its fast path, which says which teardowns call it.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
#[inline(never)]
unsafe fn end_sync_streams_since(raw: CUcontext, mark: u64) {
    let Ok(mut book) = book() else {
        return; // not in a host function: teardowns run on the closure's thread
    };
    let mut rings = Vec::new();
    let mut i = 0;
    while i < book.entries.len() {
        let e = &mut book.entries[i];
        if e.ctx != raw as usize || e.made <= mark {
            i += 1;
        } else if e.busy {
            e.doomed = true;
            i += 1;
        } else {
            // swap_remove: index `i` holds the next entry
            rings.extend(end_sync_stream(&mut book, i));
        }
    }
    publish(&book);
    publish_counts(&book);
    drop(book);
    free_rings(rings);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_have_distinct_tokens() {
        let here = thread_token();
        let there = std::thread::spawn(thread_token).join().unwrap();
        assert_eq!(here, thread_token());
        assert_ne!(here, there);
    }
}
