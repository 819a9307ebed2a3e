//! The order of synchronous operations: synchronous device writes ordered on the GPU
//! instead of waited for on the host (issue 28; the design and the table of every consumer:
//! `docs/design/ordering.md`).
//!
//! A synchronous copy or fill (`copy_from_host`, `fill`, `zeroed`, `copy_from_device`, a 2D
//! or 3D copy, `to_vec`) runs on the calling thread's **sync stream** in the context: a
//! non-blocking stream the crate keeps for that thread and context ([`SyncStream`]), with
//! the driver's `*Async` calls. Threads of one context never queue behind each other's
//! synchronous work there (the driver's "synchronous" calls all use the context's one
//! legacy stream, and a pageable upload synchronizes it first).
//!
//! * An operation that touches host memory (an upload or a download) is complete when it
//!   returns: the sync stream is synchronized before the call returns, so the host buffer
//!   is neither read nor written afterwards.
//! * A write of device memory alone (a fill, a device-to-device copy) records the sync
//!   stream's event instead: the sync stream's *record*. Every later user of device memory
//!   that is not ordered after that sync stream orders itself after every pending record
//!   first: each operation of a stream scope, on the scope's stream, before it is queued
//!   ([`is_settled`], [`stream_after_writes`]; a scope may bind memory written
//!   synchronously after it opened, so a wait when it opens would not be enough); each
//!   synchronous operation of another sync stream, on that sync stream
//!   ([`SyncStream::begin`]); work on a legacy stream ([`before_legacy_op`]); a free the
//!   driver does not order ([`wait_on_host`]).
//!
//! # Epochs
//!
//! One book for the process, behind one lock: every record takes the next *epoch*
//! (`Book::last`), and each sync stream's entry keeps the epoch of its latest record.
//! `DONE` says "every record up to this epoch is complete": a scope whose stream waited for
//! every record up to epoch `g` ([`stream_after_writes`] returns `g`, which the scope
//! keeps) raises `DONE` to `g` once its streams are synchronized ([`settle`]). An operation
//! of a scope finds nothing to wait for while `LAST` is at most the larger of `DONE` and
//! its stream's `g`: one or two atomic loads and a load of the scope's field.
//!
//! # Why a wait covers every write before it, on every thread
//!
//! All records of one sync stream are made on its stream, which runs in order: a record
//! covers every write queued on the sync stream before it. `cuStreamWaitEvent` waits for
//! the event's most recent record at the time of the call. A writer records its event
//! *then* takes its epoch, both under the book's lock; a reader takes the lock, so every
//! record whose epoch it can see was made before its `cuStreamWaitEvent`, and the wait
//! covers it (or a later record of the same sync stream, which covers it too). A thread
//! that hands a buffer to another (a channel, a join, a scoped thread's end: each a
//! happens-before edge) made its records before the hand-off, so the receiving thread's
//! scope or sync stream sees them.
//!
//! Only contexts the crate entered get a sync stream made for them (their teardown takes it
//! out again, [`on_context_end`]): a write made while another library's context is current
//! uses a sync stream only where this thread has one in that context already, and runs on
//! the legacy stream with a wait on the host otherwise (`memory::legacy::Completion`).
//!
//! Records are kept per sync stream, not per buffer: the branded handle types are one
//! pointer (and a length) wide (the size facts of the crate root), so a buffer cannot carry
//! the epoch of its last write; a scope compares the process-wide epochs instead, and waits
//! on the records still pending (one event per sync stream that wrote since the last
//! settled scope).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::driver::{self, CUcontext, CUevent, CUstream};
use crate::error::Result;

/// `CU_EVENT_DISABLE_TIMING`: the record only orders.
const DISABLE_TIMING: u32 = 0x2;
/// `CU_STREAM_NON_BLOCKING`: a sync stream does not synchronize with the legacy stream.
const NON_BLOCKING: u32 = 0x1;

/// The sync stream of one thread in one context: its stream and event, and the epochs.
struct Entry<E> {
    /// The context's handle as a number.
    ctx: usize,
    /// The thread's token ([`thread_token`]).
    thread: usize,
    stream: E,
    event: E,
    /// The epoch of the event's latest record (0: none).
    last: u64,
    /// Every record of another sync stream up to this epoch is ordered before the sync
    /// stream's later work (it waited for them, or they were complete).
    covered: u64,
    /// An operation runs on the sync stream now (from [`SyncStream::begin`] to its end).
    busy: bool,
    /// Its context ended while the sync stream was busy: the sync stream's own operation
    /// ends it.
    doomed: bool,
}

/// The sync streams of every thread and context, generic over the handles so the
/// bookkeeping is tested without a GPU.
struct Book<E> {
    entries: Vec<Entry<E>>,
    /// The latest epoch handed out (0: none yet).
    last: u64,
}

impl<E: Copy> Book<E> {
    const fn new() -> Self {
        Book {
            entries: Vec::new(),
            last: 0,
        }
    }

    fn find(&self, ctx: usize, thread: usize) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.ctx == ctx && e.thread == thread)
    }

    /// Adds a sync stream, whose stream and event `make` returns; its index.
    fn add(
        &mut self,
        ctx: usize,
        thread: usize,
        make: impl FnOnce() -> Result<(E, E)>,
    ) -> Result<usize> {
        let (stream, event) = make()?;
        self.entries.push(Entry {
            ctx,
            thread,
            stream,
            event,
            last: 0,
            // the new stream has no work: nothing before it needs a wait from it
            // but what is pending now, which `begin` waits for
            covered: 0,
            busy: false,
            doomed: false,
        });
        Ok(self.entries.len() - 1)
    }

    /// Records sync stream `i`'s event on its stream (`record(event, stream)`); the new
    /// epoch, or the error of `record` (then nothing is recorded).
    fn record(&mut self, i: usize, record: impl FnOnce(E, E) -> Result<()>) -> Result<u64> {
        let e = &self.entries[i];
        record(e.event, e.stream)?;
        self.last += 1;
        self.entries[i].last = self.last;
        Ok(self.last)
    }

    /// Calls `wait(event)` for the record of every sync stream but `except` newer than
    /// `done`.
    fn wait_pending(
        &self,
        done: u64,
        except: Option<usize>,
        mut wait: impl FnMut(E) -> Result<()>,
    ) -> Result<()> {
        for (i, e) in self.entries.iter().enumerate() {
            if e.last > done && Some(i) != except {
                wait(e.event)?;
            }
        }
        Ok(())
    }
}

/// The process's book; handles as numbers (`CUevent` and `CUstream` are raw pointers, not
/// `Send`).
static BOOK: Mutex<Book<usize>> = Mutex::new(Book::new());
/// `BOOK.last`, readable without the lock.
static LAST: AtomicU64 = AtomicU64::new(0);
/// Every record up to this epoch is complete.
static DONE: AtomicU64 = AtomicU64::new(0);
/// How many sync streams exist (a teardown's fast path).
static SYNC_STREAMS: AtomicU64 = AtomicU64::new(0);

/// The book, locked: refused inside a host function (a driver thread), whose every driver
/// call is refused anyway, so that no host function can ever wait for the lock while its
/// holder waits for the GPU (`wait_on_host` synchronizes events under it).
fn book() -> Result<MutexGuard<'static, Book<usize>>> {
    if driver::in_host_fn() {
        return Err(driver::driver_call_refused(
            "the order of synchronous operations",
        ));
    }
    // every critical section leaves the book consistent (a push, a store, a removal)
    Ok(BOOK.lock().unwrap_or_else(PoisonError::into_inner))
}

fn publish(book: &Book<usize>) {
    SYNC_STREAMS.store(book.entries.len() as u64, Ordering::Release);
    LAST.store(book.last, Ordering::Release);
}

/// This thread's token: the address of a thread-local, distinct among the live threads. A
/// thread started after another ended may get that thread's token, and its sync streams: a
/// sync stream is not tied to a thread by the driver, only by the book (one user at a
/// time).
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| t as *const u8 as usize)
}

/// `CUDA_BRAND_SYNC_WRITES=wait` in the environment (read once): every synchronous
/// operation runs on the legacy stream and is waited for on the host, as before the sync
/// streams, so that one benchmark session measures both (`scripts/bench-ordering`).
/// Anything else, or unset: sync streams.
fn host_waits() -> bool {
    static WAITS: OnceLock<bool> = OnceLock::new();
    *WAITS.get_or_init(|| std::env::var("CUDA_BRAND_SYNC_WRITES").is_ok_and(|v| v == "wait"))
}

/// Waits on the host for the current context's legacy stream.
pub(crate) fn legacy_wait() -> Result<()> {
    // SAFETY: null is the current context's legacy default stream.
    unsafe { driver::stream_wait_idle(std::ptr::null_mut()) }
}

/// Makes a stream and event in `ctx`, which is current: a green context's stream
/// where `ctx` is a partition's (its work stays on the partition's SMs).
fn make_sync_stream(ctx: CUcontext) -> Result<(usize, usize)> {
    let stream = match super::partition::green_of(ctx) {
        // SAFETY: a partition entered on this thread is alive while it is current here.
        Some(green) => unsafe { driver::green_stream_create(green, NON_BLOCKING, 0) }?,
        None => driver::stream_create(NON_BLOCKING, 0)?,
    };
    match driver::event_create(DISABLE_TIMING) {
        Ok(event) => Ok((stream as usize, event as usize)),
        Err(e) => {
            // SAFETY: just made, unused.
            let _ = unsafe { driver::stream_destroy(stream) };
            Err(e)
        }
    }
}

/// Ends sync stream `i` (taken out of the book): its records are waited for on the host,
/// then its event and stream destroyed. Its context is alive and current.
fn end_sync_stream(book: &mut Book<usize>, i: usize) {
    let e = book.entries.swap_remove(i);
    // A failure here is the context's sticky error, which its own teardown reports. SAFETY:
    // the sync stream's handles were made in its context, which is alive; out of the book,
    // nothing else uses them.
    let _ = unsafe { driver::event_synchronize(e.event as CUevent) };
    // SAFETY: as above.
    let _ = unsafe { driver::event_destroy(e.event as CUevent) };
    // SAFETY: as above.
    let _ = unsafe { driver::stream_destroy(e.stream as CUstream) };
}

/// A synchronous operation's use of the calling thread's sync stream in the current
/// context, between [`SyncStream::begin`] and its end ([`SyncStream::end`],
/// [`SyncStream::end_after_sync`] or [`SyncStream::abandon`]).
pub(crate) struct SyncStream {
    ctx: usize,
    thread: usize,
    stream: CUstream,
}

impl SyncStream {
    /// The calling thread's sync stream in `ctx` (current on it), ordered after every
    /// pending record of other sync streams: the stream a synchronous operation then queues
    /// its work on. `make`: a sync stream may be made for `ctx` if this thread has none (a
    /// context the crate entered, whose teardown ends the sync stream); without it, one is
    /// made only where `ctx` has a sync stream of another thread already (the crate holds
    /// that context, and its teardown ends every sync stream of it). `None`: no sync stream
    /// (none may be made, making one failed, or `CUDA_BRAND_SYNC_WRITES=wait`): the
    /// operation runs on the legacy stream ([`before_legacy_op`]) and is waited for on the
    /// host.
    ///
    /// # Safety
    /// `ctx` is alive and current on the calling thread until the sync stream's operation
    /// ends.
    pub(crate) unsafe fn begin(ctx: CUcontext, make: bool) -> Result<Option<SyncStream>> {
        if host_waits() {
            return Ok(None);
        }
        let thread = thread_token();
        let mut book = book()?;
        let i = match book.find(ctx as usize, thread) {
            Some(i) => i,
            None if make || book.entries.iter().any(|e| e.ctx == ctx as usize) => {
                match book.add(ctx as usize, thread, || make_sync_stream(ctx)) {
                    Ok(i) => {
                        publish(&book);
                        i
                    }
                    Err(_) => return Ok(None),
                }
            }
            None => return Ok(None),
        };
        let done = DONE.load(Ordering::Acquire).max(book.entries[i].covered);
        let stream = book.entries[i].stream;
        if book.last > done {
            book.wait_pending(done, Some(i), |event| {
                // SAFETY: the stream is alive while its entry is in the book; the
                // event likewise, under the lock held here.
                unsafe { driver::stream_wait_event(stream as CUstream, event as CUevent) }
            })?;
        }
        let last = book.last;
        let entry = &mut book.entries[i];
        entry.covered = last;
        entry.busy = true;
        Ok(Some(SyncStream {
            ctx: ctx as usize,
            thread,
            stream: stream as CUstream,
        }))
    }

    /// The stream.
    pub(crate) fn stream(&self) -> CUstream {
        self.stream
    }

    /// Ends a write of device memory alone: records the sync stream's event after it, which
    /// later users wait for on the GPU. Where the record fails, waits for the sync stream
    /// on the host instead.
    pub(crate) fn end(self) -> Result<()> {
        self.finish(true, false)
    }

    /// Ends the operation, recording the sync stream's event after it where `record`;
    /// `synced`: the sync stream was synchronized without error, so every record it waited
    /// for is complete too (`DONE` rises to its `covered`).
    fn finish(self, record: bool, synced: bool) -> Result<()> {
        let mut book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(i) = book.find(self.ctx, self.thread) else {
            unreachable!("a busy sync stream stays in the book")
        };
        book.entries[i].busy = false;
        if synced {
            settle(book.entries[i].covered);
        }
        let mut result = Ok(());
        if record {
            let recorded = book.record(i, |event, stream| {
                // SAFETY: the event and stream are the sync stream's, alive while it is in
                // the book.
                unsafe { driver::event_record(event as CUevent, stream as CUstream) }
            });
            if recorded.is_err() {
                // SAFETY: as above.
                result = unsafe { driver::stream_wait_idle(self.stream) };
            }
        }
        if book.entries[i].doomed {
            // the context ended meanwhile (its teardown could not end a busy sync stream):
            // it is alive and current here still (`begin`'s promise)
            end_sync_stream(&mut book, i);
        }
        publish(&book);
        result
    }

    /// Waits for the sync stream on the host (an operation that touched host memory), then
    /// ends the operation as complete ([`SyncStream::end`] without a record). Where the
    /// wait fails, the sync stream is idle all the same (`stream_wait_idle`) and its error
    /// is returned.
    pub(crate) fn end_after_sync(self) -> Result<()> {
        // SAFETY: the stream is alive while the sync stream is busy.
        match unsafe { driver::stream_wait_idle(self.stream) } {
            Ok(()) => self.finish(false, true),
            Err(e) => {
                let _ = self.finish(false, false);
                Err(e)
            }
        }
    }

    /// Ends an operation that failed part-way: what it queued is waited for on the host
    /// (no error path returns while work may still run), nothing recorded.
    pub(crate) fn abandon(self) {
        // SAFETY: the stream is alive while the sync stream is busy.
        let _ = unsafe { driver::stream_wait_idle(self.stream) };
        let _ = self.finish(false, false);
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
    if book.find(ctx as usize, thread).is_none()
        && book
            .add(ctx as usize, thread, || make_sync_stream(ctx))
            .is_ok()
    {
        publish(&book);
    }
}

/// Orders the legacy stream of the current context after every pending record, before work
/// queued there that touches device memory (a staged copy, a peer copy, a free on the
/// legacy stream, a synchronous operation without a sync stream). One or two atomic loads
/// while nothing is pending.
pub(crate) fn before_legacy_op() -> Result<()> {
    let done = DONE.load(Ordering::Acquire);
    if LAST.load(Ordering::Acquire) <= done {
        return Ok(());
    }
    let book = book()?;
    book.wait_pending(done, None, |event| {
        // SAFETY: null is the current context's legacy stream; the event is alive while
        // its entry is in the book, under the lock held here.
        unsafe { driver::stream_wait_event(std::ptr::null_mut(), event as CUevent) }
    })
}

/// Whether a stream that waited for the records up to epoch `covered` needs no wait: no
/// record is newer than `covered`, or every newer one is complete. One atomic load while
/// nothing was ever recorded, two otherwise.
#[inline(always)]
pub(crate) fn is_settled(covered: u64) -> bool {
    let last = LAST.load(Ordering::Acquire);
    last <= covered || last <= DONE.load(Ordering::Acquire)
}

/// Makes `stream`, which waited for the records up to epoch `covered` already, wait for
/// every newer pending record, before an operation of a scope on it. Returns the epoch it
/// now covers, for the next call and for [`settle`] once the stream is synchronized.
///
/// # Safety
/// The stream is alive.
pub(crate) unsafe fn stream_after_writes(stream: CUstream, covered: u64) -> Result<u64> {
    let book = book()?;
    let done = DONE.load(Ordering::Acquire).max(covered);
    book.wait_pending(done, None, |event| {
        // SAFETY: the caller's promise for the stream; the event is alive while its entry
        // is in the book, under the lock held here.
        unsafe { driver::stream_wait_event(stream, event as CUevent) }
    })?;
    Ok(book.last)
}

/// Every record up to `covered` is complete: a scope whose streams waited for them
/// ([`stream_after_writes`]) has synchronized those streams without error.
#[inline]
pub(crate) fn settle(covered: u64) {
    if covered != 0 {
        DONE.fetch_max(covered, Ordering::AcqRel);
    }
}

/// Waits on the host for every pending record (before `cuMemFree`, which the driver does
/// not promise to order after other streams' work on the memory).
pub(crate) fn wait_on_host() -> Result<()> {
    let done = DONE.load(Ordering::Acquire);
    if LAST.load(Ordering::Acquire) <= done {
        return Ok(());
    }
    let book = book()?;
    let covered = book.last;
    book.wait_pending(done, None, |event| {
        // SAFETY: the event is alive while its entry is in the book, under this lock.
        unsafe { driver::event_synchronize(event as CUevent) }
    })?;
    drop(book);
    settle(covered);
    Ok(())
}

/// Teardown of `raw` (alive and current): every sync stream of the context, of any thread,
/// is waited for on the host and ended; a sync stream busy on another thread (a primary
/// context entered on two threads) is ended by its own operation ([`SyncStream::end`]).
/// Waited for before the lock is released: a record of it that a scope finds no entry for
/// any more must be complete. One atomic load while there are no sync streams.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
pub(crate) unsafe fn on_context_end(raw: CUcontext) {
    if SYNC_STREAMS.load(Ordering::Acquire) == 0 {
        return;
    }
    let Ok(mut book) = book() else {
        return; // not in a host function: teardowns run on the closure's thread
    };
    let mut i = 0;
    while i < book.entries.len() {
        let e = &mut book.entries[i];
        if e.ctx != raw as usize {
            i += 1;
        } else if e.busy {
            e.doomed = true;
            i += 1;
        } else {
            end_sync_stream(&mut book, i); // swap_remove: index `i` holds the next entry
        }
    }
    publish(&book);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorCode};

    fn sync_streams(n: usize) -> Book<u32> {
        let mut book = Book::<u32>::new();
        for i in 0..n {
            let h = 10 * (i as u32 + 1);
            book.add(1, i, || Ok((h, h + 1))).unwrap();
        }
        book
    }

    fn waited(book: &Book<u32>, done: u64, except: Option<usize>) -> Vec<u32> {
        let mut w = Vec::new();
        book.wait_pending(done, except, |e| {
            w.push(e);
            Ok(())
        })
        .unwrap();
        w.sort();
        w
    }

    #[test]
    fn each_record_takes_the_next_epoch_on_its_own_sync_stream() {
        let mut book = sync_streams(2);
        let mut on = Vec::new();
        let mut push = |e, s| {
            on.push((e, s));
            Ok(())
        };
        assert_eq!(book.record(0, &mut push).unwrap(), 1);
        assert_eq!(book.record(1, &mut push).unwrap(), 2);
        assert_eq!(book.record(0, &mut push).unwrap(), 3);
        assert_eq!(
            on,
            [(11, 10), (21, 20), (11, 10)],
            "(event, its own stream)"
        );
        assert_eq!((book.entries[0].last, book.entries[1].last), (3, 2));
        assert_eq!(book.find(1, 1), Some(1));
        assert_eq!(book.find(1, 2), None);
        assert_eq!(
            book.find(2, 0),
            None,
            "a sync stream is per thread and context"
        );
    }

    #[test]
    fn a_sync_stream_waits_for_the_other_sync_streams_records_newer_than_done_only() {
        let mut book = sync_streams(3);
        book.record(0, |_, _| Ok(())).unwrap(); // epoch 1
        book.record(1, |_, _| Ok(())).unwrap(); // epoch 2
        book.record(0, |_, _| Ok(())).unwrap(); // epoch 3: sync stream 0 again
        assert_eq!(waited(&book, 0, None), [11, 21], "a scope waits for both");
        assert_eq!(
            waited(&book, 2, None),
            [11],
            "sync stream 1's record is done"
        );
        assert_eq!(waited(&book, 3, None), Vec::<u32>::new());
        assert_eq!(waited(&book, 0, Some(0)), [21], "its own stream is ordered");
        assert_eq!(
            waited(&book, 0, Some(2)),
            [11, 21],
            "sync stream 2 never recorded"
        );
    }

    #[test]
    fn a_failed_record_or_sync_stream_takes_no_epoch() {
        let mut book = sync_streams(1);
        let fail = |_, _| Err(Error::new("cuEventRecord", ErrorCode::InvalidHandle));
        assert!(book.record(0, fail).is_err());
        assert_eq!(book.last, 0);
        let fail = || Err(Error::new("cuStreamCreate", ErrorCode::OutOfMemory));
        assert!(book.add(1, 7, fail).is_err());
        assert_eq!(book.entries.len(), 1, "no sync stream for thread 7");
        assert!(
            waited(&book, 0, None).is_empty(),
            "sync stream 0 has no record"
        );
    }

    #[test]
    fn settling_never_lowers_done() {
        // the process-wide atomics: other tests of the crate do not touch them without a
        // GPU
        let before = DONE.load(Ordering::Acquire);
        settle(before + 5);
        settle(before + 2);
        assert_eq!(DONE.load(Ordering::Acquire), before + 5);
        settle(0);
        assert_eq!(DONE.load(Ordering::Acquire), before + 5);
    }

    #[test]
    fn threads_have_distinct_tokens() {
        let here = thread_token();
        let there = std::thread::spawn(thread_token).join().unwrap();
        assert_eq!(here, thread_token());
        assert_ne!(here, there);
    }
}
