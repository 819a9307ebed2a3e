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
use crate::memory::Span;

/// `CU_EVENT_DISABLE_TIMING`: the record only orders.
const DISABLE_TIMING: u32 = 0x2;
/// `CU_STREAM_NON_BLOCKING`: a sync stream does not synchronize with the legacy stream.
const NON_BLOCKING: u32 = 0x1;

/// The largest upload that goes through a sync stream's bounce ring ([`Bounce`]): one slot.
pub(crate) const BOUNCE_SLOT: usize = 256 << 10;
/// The slots of a bounce ring: up to this many small uploads of one thread in flight.
const BOUNCE_SLOTS: usize = 4;

/// A sync stream's bounce ring: page-locked host memory of [`BOUNCE_SLOTS`] slots of
/// [`BOUNCE_SLOT`] bytes, made at the thread's first small upload in the context. A small
/// upload copies the host data into the next slot, queues the copy from the slot to the
/// device and records the slot's event (the sync stream's record) without waiting: the
/// caller's host buffer is free as soon as the host copy is done, and the slot is reused
/// after its event completes.
struct Bounce<E> {
    /// The base of the page-locked memory, as a number.
    host: usize,
    /// One event per slot, recorded after the copy out of it.
    events: [E; BOUNCE_SLOTS],
    /// The slot the next small upload takes.
    next: usize,
}

/// Whether a sync stream has its bounce ring.
enum Ring<E> {
    /// Not yet: made at the first small upload.
    NotYet,
    /// Making it failed (no page-locked memory left): small uploads wait on the host, as
    /// the others do.
    Failed,
    Made(Bounce<E>),
}

/// The sync stream of one thread in one context: its stream and event, and the epochs.
struct Entry<E> {
    /// The context's handle as a number.
    ctx: usize,
    /// The thread's token ([`thread_token`]).
    thread: usize,
    stream: E,
    /// The event of the sync stream's latest record, which later users wait for: its own
    /// event, or the slot's event of a bounced upload ([`Bounce`]).
    event: E,
    /// The sync stream's own event, recorded after every device write that is not a
    /// bounced upload.
    own: E,
    ring: Ring<E>,
    /// When it was made: the number [`mark`] returns after its making.
    made: u64,
    /// The epoch of `event`'s latest record (0: none).
    last: u64,
    /// What the operations of the records not known to be complete touched: each span
    /// once ([`Span::ALL`] for memory the crate cannot place), all of them covered by
    /// `event`'s latest record. Cleared once that is known complete (the sync stream was
    /// synchronized, or a query found the record done).
    pending: Vec<Span>,
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
    /// How many sync streams were made so far.
    made: u64,
    /// The latest epoch handed out (0: none yet).
    last: u64,
}

impl<E: Copy> Book<E> {
    const fn new() -> Self {
        Book {
            entries: Vec::new(),
            made: 0,
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
        self.made += 1;
        self.entries.push(Entry {
            made: self.made,
            ctx,
            thread,
            stream,
            event,
            own: event,
            ring: Ring::NotYet,
            last: 0,
            pending: Vec::new(),
            busy: false,
            doomed: false,
        });
        Ok(self.entries.len() - 1)
    }

    /// Records an event of sync stream `i` on its stream (`record(event, stream)`): the
    /// event of bounce slot `slot` where given, else its own; that event is then the one
    /// later users wait for. The new epoch, or the error of `record` (then nothing is
    /// recorded and nothing changes).
    /// `touched`: what the recorded operation touched, kept as pending accesses until the
    /// record is known complete.
    fn record(
        &mut self,
        i: usize,
        slot: Option<usize>,
        touched: Touched<'_>,
        record: impl FnOnce(E, E) -> Result<()>,
    ) -> Result<u64> {
        let e = &mut self.entries[i];
        let event = match (slot, &e.ring) {
            (Some(k), Ring::Made(b)) => b.events[k],
            _ => e.own,
        };
        record(event, e.stream)?;
        self.last += 1;
        e.event = event;
        e.last = self.last;
        match touched {
            Touched::Spans(spans) => spans
                .iter()
                .filter(|s| s.bytes != 0)
                .for_each(|&s| add_access(&mut e.pending, s)),
            Touched::Anything => add_access(&mut e.pending, Span::ALL),
        }
        Ok(self.last)
    }

    /// Takes the next slot of sync stream `i`'s bounce ring, making the ring with `make`
    /// first where it has none yet: the slot's index, base address and event; `None` where
    /// the ring cannot be made (then never tried again for this sync stream).
    fn take_slot(
        &mut self,
        i: usize,
        make: impl FnOnce() -> Result<Bounce<E>>,
    ) -> Option<(usize, usize, E)> {
        let e = &mut self.entries[i];
        if let Ring::NotYet = e.ring {
            e.ring = match make() {
                Ok(b) => Ring::Made(b),
                Err(_) => Ring::Failed,
            };
        }
        let Ring::Made(b) = &mut e.ring else {
            return None;
        };
        let k = b.next;
        b.next = (k + 1) % BOUNCE_SLOTS;
        Some((k, b.host + k * BOUNCE_SLOT, b.events[k]))
    }

    /// Orders work that touches `reader` after every pending access of another sync stream
    /// (not `except`) that it conflicts with ([`conflicts`]): for each such sync stream,
    /// `done(event)` says whether its latest record is complete (then its pending accesses
    /// are dropped), else `wait(event)` orders the work after it.
    fn wait_conflicting(
        &mut self,
        reader: Touched<'_>,
        except: Option<usize>,
        mut done: impl FnMut(E) -> Result<bool>,
        mut wait: impl FnMut(E) -> Result<()>,
    ) -> Result<()> {
        for (i, e) in self.entries.iter_mut().enumerate() {
            if Some(i) == except || !e.pending.iter().any(|a| conflicts(reader, a)) {
                continue;
            }
            if done(e.event)? {
                e.pending.clear();
            } else {
                wait(e.event)?;
            }
        }
        Ok(())
    }

    /// How many accesses are pending, over every sync stream.
    fn pending(&self) -> usize {
        self.entries.iter().map(|e| e.pending.len()).sum()
    }
}

/// Adds `access` to a sync stream's pending accesses, unless one of them covers it already
/// (the same memory, written if `access` writes it): repeated writes of one buffer keep
/// one entry.
fn add_access(pending: &mut Vec<Span>, access: Span) {
    let end = |s: &Span| s.start as u128 + s.bytes as u128;
    let covers =
        |p: &Span| (p.write || !access.write) && p.start <= access.start && end(&access) <= end(p);
    if !pending.iter().any(covers) {
        pending.push(access);
    }
}

/// What an operation touches, for the order of synchronous operations.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Touched<'a> {
    /// These spans (memory the crate can place: its own buffers, memory of a pool).
    Spans(&'a [Span]),
    /// Memory the crate cannot place, or an operation whose memory it does not know (a
    /// graph launch, a module global written synchronously, which any kernel of the module
    /// may read): it conflicts with every access.
    Anything,
}

impl<'a> Touched<'a> {
    /// `Spans(spans)` for memory the crate can place (`placed`: its own buffers, memory of
    /// a pool), else `Anything`.
    pub(crate) fn placed(placed: bool, spans: &'a [Span]) -> Self {
        match placed {
            true => Touched::Spans(spans),
            false => Touched::Anything,
        }
    }

    /// `Spans(spans)`, or `Anything` for an empty list (an operation that names no
    /// memory: its memory is not known).
    pub(crate) fn named(spans: &'a [Span]) -> Self {
        match spans.is_empty() {
            true => Touched::Anything,
            false => Touched::Spans(spans),
        }
    }
}

/// Whether work touching `reader` must be ordered after a pending `access`: they share
/// memory and one of them writes it, or either is [`Touched::Anything`].
fn conflicts(reader: Touched<'_>, access: &Span) -> bool {
    if *access == Span::ALL {
        return true;
    }
    match reader {
        Touched::Anything => true,
        Touched::Spans(spans) => spans
            .iter()
            .any(|r| (r.write || access.write) && r.overlaps(access)),
    }
}

/// The process's book; handles as numbers (`CUevent` and `CUstream` are raw pointers, not
/// `Send`).
static BOOK: Mutex<Book<usize>> = Mutex::new(Book::new());
/// How many accesses are pending in the book ([`Book::pending`]), readable without the
/// lock: while it is 0, no work needs to wait for any sync stream.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// `BOOK.made`, readable without the lock ([`mark`]).
static MADE: AtomicU64 = AtomicU64::new(0);
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
    PENDING.store(book.pending() as u64, Ordering::Release);
    MADE.store(book.made, Ordering::Release);
}

/// How many sync streams were made so far: a scope that enters a context without holding
/// it (`with_raw_context`) takes this mark when it begins, and its teardown ends only the
/// sync streams made since ([`on_context_end`]). One atomic load.
#[inline]
pub(crate) fn mark() -> u64 {
    MADE.load(Ordering::Acquire)
}

/// `done` for [`Book::wait_conflicting`]: whether the event's latest record is complete.
fn event_done(event: usize) -> Result<bool> {
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

/// Makes a bounce ring in the current context ([`Bounce`]): page-locked host memory and
/// one event per slot; nothing kept where any part fails.
fn make_bounce() -> Result<Bounce<usize>> {
    let host = driver::mem_host_alloc(BOUNCE_SLOTS * BOUNCE_SLOT, 0)?;
    let mut events = [0usize; BOUNCE_SLOTS];
    for k in 0..BOUNCE_SLOTS {
        match driver::event_create(DISABLE_TIMING) {
            Ok(event) => events[k] = event as usize,
            Err(e) => {
                for &made in &events[..k] {
                    // SAFETY: just made, never recorded.
                    let _ = unsafe { driver::event_destroy(made as CUevent) };
                }
                // SAFETY: just allocated, never used.
                let _ = unsafe { driver::mem_free_host(host) };
                return Err(e);
            }
        }
    }
    Ok(Bounce {
        host: host as usize,
        events,
        next: 0,
    })
}

/// Ends sync stream `i` (taken out of the book): its work is waited for on the host, then
/// its events, stream and bounce ring freed. Its context is alive and current.
fn end_sync_stream(book: &mut Book<usize>, i: usize) {
    let e = book.entries.swap_remove(i);
    // A failure here is the context's sticky error, which its own teardown reports. SAFETY:
    // the sync stream's handles were made in its context, which is alive; out of the book,
    // nothing else uses them.
    let _ = unsafe { driver::stream_wait_idle(e.stream as CUstream) };
    // SAFETY: as above.
    let _ = unsafe { driver::event_destroy(e.own as CUevent) };
    if let Ring::Made(b) = e.ring {
        for event in b.events {
            // SAFETY: as above; every copy out of the ring ran on the stream, now idle.
            let _ = unsafe { driver::event_destroy(event as CUevent) };
        }
        // SAFETY: as above; no copy out of it is pending, and no slot is lent (the entry
        // is not busy, or its own operation is ending it).
        let _ = unsafe { driver::mem_free_host(b.host as *mut std::ffi::c_void) };
    }
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
    /// The bounce slot lent to this operation (`begin` with `slot`).
    slot: Option<Slot>,
}

/// A slot of a sync stream's bounce ring, lent to one small upload.
#[derive(Clone, Copy)]
pub(crate) struct Slot {
    index: usize,
    /// [`BOUNCE_SLOT`] bytes of page-locked host memory.
    pub(crate) host: *mut u8,
    /// Recorded after the last copy out of the slot: complete once the slot is free.
    pub(crate) event: CUevent,
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
    /// host. `slot`: lend the operation the next slot of the sync stream's bounce ring
    /// (made now if it has none; [`SyncStream::slot`]). `touched`: what the operation
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
            None if make || book.entries.iter().any(|e| e.ctx == ctx as usize) => {
                match book.add(ctx as usize, thread, || make_sync_stream(ctx)) {
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
        let slot = match slot {
            true => book
                .take_slot(i, make_bounce)
                .map(|(index, host, event)| Slot {
                    index,
                    host: host as *mut u8,
                    event: event as CUevent,
                }),
            false => None,
        };
        book.entries[i].busy = true;
        Ok(Some(SyncStream {
            ctx: ctx as usize,
            thread,
            stream: stream as CUstream,
            slot,
        }))
    }

    /// The stream.
    pub(crate) fn stream(&self) -> CUstream {
        self.stream
    }

    /// The bounce slot lent to this operation: `None` where `begin` was not asked for one
    /// or the ring could not be made. Its memory is this operation's alone until it ends;
    /// an earlier copy out of it may still be queued until the slot's event completes.
    /// Ending the operation with [`SyncStream::end`] records the slot's event.
    pub(crate) fn slot(&self) -> Option<Slot> {
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
    fn finish(self, record: Option<Touched<'_>>, synced: bool) -> Result<()> {
        let mut book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(i) = book.find(self.ctx, self.thread) else {
            unreachable!("a busy sync stream stays in the book")
        };
        book.entries[i].busy = false;
        if synced {
            book.entries[i].pending.clear();
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
                    book.entries[i].pending.clear();
                }
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

/// Orders the legacy stream of the current context after every pending access that work
/// touching `touched` conflicts with, before that work is queued there (a staged copy, a
/// free on the legacy stream, a synchronous operation without a sync stream). One atomic
/// load while nothing is pending.
pub(crate) fn before_legacy_op(touched: Touched<'_>) -> Result<()> {
    // SAFETY: null is the current context's legacy stream.
    unsafe { stream_after_writes(std::ptr::null_mut(), touched) }
}

/// Whether nothing is pending: no work needs to wait for any sync stream. One atomic load.
#[inline(always)]
pub(crate) fn is_settled() -> bool {
    PENDING.load(Ordering::Acquire) == 0
}

/// Makes `stream` wait for every pending access that work touching `touched` conflicts
/// with, before that work is queued on it (an operation of a scope). One atomic load while
/// nothing is pending.
///
/// # Safety
/// The stream is alive (null: the current context's legacy stream).
pub(crate) unsafe fn stream_after_writes(stream: CUstream, touched: Touched<'_>) -> Result<()> {
    if is_settled() {
        return Ok(());
    }
    let mut book = book()?;
    let waited = book.wait_conflicting(touched, None, event_done, |event| {
        // SAFETY: the caller's promise for the stream; the event is alive while its entry
        // is in the book, under the lock held here.
        unsafe { driver::stream_wait_event(stream, event as CUevent) }
    });
    publish(&book);
    waited
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
        book.entries.iter_mut().for_each(|e| e.pending.clear());
    }
    publish(&book);
    waited
}

/// Teardown of `raw` (alive and current): every sync stream of the context, of any thread,
/// made after `mark` ([`mark`]; 0: all of them), is waited for on the host and ended; a
/// sync stream busy on another thread (a primary context entered on two threads) is ended
/// by its own operation ([`SyncStream::end`]). One atomic load while no sync stream was
/// made since `mark` (or none exists).
///
/// Every sync stream is made while the crate holds its context for a scope (one it
/// entered, or one that has a sync stream made so already), and the teardown of every such
/// scope ends the context's sync streams made since it began: those of a context the crate
/// created or retained (`with_context`, `with_primary_context`, the owning layer) all of
/// them (`mark` 0), since nothing else of the crate holds it once it is given up; those
/// of a context a `with_raw_context` entered only the ones made during it, the earlier
/// ones being ended by the scope they were made under, which holds the context still (an
/// outer scope on this thread, or one on another thread) or ended them already.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
pub(crate) unsafe fn on_context_end(raw: CUcontext, mark: u64) {
    // `MADE` only grows, and is published under the lock after every making: a sync stream
    // of `raw` made since `mark` on any thread was made before this teardown (its scope is
    // inside the one ending here, or began after `mark`) and is counted
    if MADE.load(Ordering::Acquire) <= mark || SYNC_STREAMS.load(Ordering::Acquire) == 0 {
        return;
    }
    let Ok(mut book) = book() else {
        return; // not in a host function: teardowns run on the closure's thread
    };
    let mut i = 0;
    while i < book.entries.len() {
        let e = &mut book.entries[i];
        if e.ctx != raw as usize || e.made <= mark {
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

    fn span(start: u64, bytes: u64, write: bool) -> Span {
        Span {
            start,
            bytes,
            write,
        }
    }

    /// Records an operation of sync stream `i` that touched `touched`.
    fn wrote(book: &mut Book<u32>, i: usize, touched: Touched<'_>) -> u64 {
        book.record(i, None, touched, |_, _| Ok(())).unwrap()
    }

    /// The events a reader touching `reader` waits for (none complete), except `except`'s.
    fn waited(book: &mut Book<u32>, reader: Touched<'_>, except: Option<usize>) -> Vec<u32> {
        let mut w = Vec::new();
        book.wait_conflicting(
            reader,
            except,
            |_| Ok(false),
            |e| {
                w.push(e);
                Ok(())
            },
        )
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
        let none = Touched::Spans(&[]);
        assert_eq!(book.record(0, None, none, &mut push).unwrap(), 1);
        assert_eq!(book.record(1, None, none, &mut push).unwrap(), 2);
        assert_eq!(book.record(0, None, none, &mut push).unwrap(), 3);
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
    fn a_reader_waits_only_for_the_sync_streams_that_touched_its_memory() {
        let mut book = sync_streams(3);
        wrote(&mut book, 0, Touched::Spans(&[span(0x1000, 0x100, true)]));
        wrote(&mut book, 1, Touched::Spans(&[span(0x2000, 0x100, true)]));
        let a = [span(0x1080, 4, false)];
        assert_eq!(waited(&mut book, Touched::Spans(&a), None), [11]);
        let b = [span(0x20ff, 1, true)];
        assert_eq!(waited(&mut book, Touched::Spans(&b), None), [21]);
        let neither = [span(0x1100, 0xf00, true), span(0x2100, 8, false)];
        assert_eq!(
            waited(&mut book, Touched::Spans(&neither), None),
            Vec::<u32>::new(),
            "adjacent memory is not shared"
        );
        let both = [span(0x1000, 1, false), span(0x2000, 1, false)];
        assert_eq!(waited(&mut book, Touched::Spans(&both), None), [11, 21]);
        assert_eq!(
            waited(&mut book, Touched::Spans(&both), Some(0)),
            [21],
            "its own stream is ordered"
        );
        assert_eq!(
            waited(&mut book, Touched::Anything, None),
            [11, 21],
            "unknown memory waits for every pending write"
        );
        assert_eq!(
            waited(&mut book, Touched::Spans(&[span(0, 0, false)]), None),
            Vec::<u32>::new(),
            "scalars touch nothing"
        );
    }

    #[test]
    fn reads_wait_for_writes_and_writes_for_reads_but_reads_not_for_reads() {
        let mut book = sync_streams(2);
        // a device-to-device copy of sync stream 0: reads 0x1000, writes 0x2000
        let copy = [span(0x1000, 16, false), span(0x2000, 16, true)];
        wrote(&mut book, 0, Touched::Spans(&copy));
        let read_src = [span(0x1000, 16, false)];
        assert_eq!(
            waited(&mut book, Touched::Spans(&read_src), None),
            Vec::<u32>::new(),
            "two reads"
        );
        let write_src = [span(0x1008, 4, true)];
        assert_eq!(
            waited(&mut book, Touched::Spans(&write_src), None),
            [11],
            "a write of a pending copy's source"
        );
        let read_dst = [span(0x2000, 16, false)];
        assert_eq!(waited(&mut book, Touched::Spans(&read_dst), None), [11]);
    }

    #[test]
    fn repeated_writes_of_one_buffer_keep_one_access() {
        let mut book = sync_streams(1);
        let buf = [span(0x1000, 0x100, true)];
        for _ in 0..1000 {
            wrote(&mut book, 0, Touched::Spans(&buf));
        }
        assert_eq!(book.pending(), 1);
        wrote(&mut book, 0, Touched::Spans(&[span(0x1010, 0x10, false)]));
        assert_eq!(book.pending(), 1, "a read inside a pending write");
        wrote(&mut book, 0, Touched::Spans(&[span(0x10f0, 0x20, true)]));
        assert_eq!(book.pending(), 2, "reaching past it");
        wrote(&mut book, 0, Touched::Anything);
        wrote(&mut book, 0, Touched::Spans(&[span(0x9000, 8, true)]));
        assert_eq!(book.pending(), 3, "everything covers it");
        assert_eq!(book.entries[0].last, 1004);
    }

    #[test]
    fn memory_the_crate_cannot_place_orders_every_later_user() {
        let mut book = sync_streams(2);
        wrote(&mut book, 0, Touched::Anything); // a module global, written synchronously
        let kernel_scalars = [span(0, 0, false)];
        assert_eq!(
            waited(&mut book, Touched::Spans(&kernel_scalars), None),
            [11],
            "a launch with no buffers may read the global"
        );
        assert_eq!(
            waited(&mut book, Touched::Spans(&[span(0x5000, 8, false)]), None),
            [11]
        );
    }

    #[test]
    fn a_complete_record_is_forgotten_instead_of_waited_for() {
        let mut book = sync_streams(2);
        wrote(&mut book, 0, Touched::Spans(&[span(0x1000, 8, true)]));
        wrote(&mut book, 1, Touched::Spans(&[span(0x1000, 8, true)]));
        assert_eq!(book.pending(), 2);
        let mut w = Vec::new();
        book.wait_conflicting(
            Touched::Anything,
            None,
            |e| Ok(e == 11),
            |e| {
                w.push(e);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(w, [21], "sync stream 0's record was complete");
        assert_eq!(book.pending(), 1);
        assert!(book.entries[0].pending.is_empty());
        let fail = |_| Err(Error::new("cuEventQuery", ErrorCode::IllegalAddress));
        let r = book.wait_conflicting(Touched::Anything, None, fail, |_| Ok(()));
        assert!(r.is_err(), "a failed query is the caller's error");
        assert_eq!(book.pending(), 1, "and forgets nothing");
    }

    #[test]
    fn a_failed_record_or_sync_stream_takes_no_epoch() {
        let mut book = sync_streams(1);
        let fail = |_, _| Err(Error::new("cuEventRecord", ErrorCode::InvalidHandle));
        assert!(book.record(0, None, Touched::Anything, fail).is_err());
        assert_eq!(book.last, 0);
        assert_eq!(book.pending(), 0, "nothing pending for a failed record");
        let fail = || Err(Error::new("cuStreamCreate", ErrorCode::OutOfMemory));
        assert!(book.add(1, 7, fail).is_err());
        assert_eq!(book.entries.len(), 1, "no sync stream for thread 7");
    }

    #[test]
    fn a_bounced_upload_records_its_slots_event_which_later_users_wait_for() {
        let mut book = sync_streams(2);
        let ring = || {
            Ok(Bounce {
                host: 1 << 20,
                events: [100, 101, 102, 103],
                next: 0,
            })
        };
        let mut taken = Vec::new();
        for _ in 0..5 {
            taken.push(book.take_slot(0, ring).unwrap());
        }
        let base = 1 << 20;
        assert_eq!(
            taken,
            [
                (0, base, 100),
                (1, base + BOUNCE_SLOT, 101),
                (2, base + 2 * BOUNCE_SLOT, 102),
                (3, base + 3 * BOUNCE_SLOT, 103),
                (0, base, 100),
            ],
            "the slots in turn, each with its own memory and event"
        );
        let dst = [span(0x1000, 4, true)];
        let mut on = Vec::new();
        book.record(0, Some(2), Touched::Spans(&dst), |e, s| {
            on.push((e, s));
            Ok(())
        })
        .unwrap();
        assert_eq!(on, [(102, 10)], "the slot's event, on the sync stream");
        let all = Touched::Anything;
        assert_eq!(
            waited(&mut book, all, None),
            [102],
            "later users wait for it"
        );
        book.record(0, None, Touched::Spans(&dst), |e, _| {
            on.push((e, 0));
            Ok(())
        })
        .unwrap();
        assert_eq!(on[1].0, 11, "a fill records the sync stream's own event");
        assert_eq!(
            waited(&mut book, all, None),
            [11],
            "which then covers the slot's"
        );
        let fail = |_, _| Err(Error::new("cuEventRecord", ErrorCode::InvalidHandle));
        assert!(book.record(0, Some(1), all, fail).is_err());
        assert_eq!(
            (book.entries[0].event, book.entries[0].last),
            (11, 2),
            "a failed record changes nothing"
        );
    }

    #[test]
    fn a_ring_that_cannot_be_made_is_not_tried_again() {
        let mut book = sync_streams(1);
        let mut tries = 0;
        for _ in 0..3 {
            let slot = book.take_slot(0, || {
                tries += 1;
                Err(Error::new("cuMemHostAlloc", ErrorCode::OutOfMemory))
            });
            assert_eq!(slot, None);
        }
        assert_eq!(tries, 1);
        let slot = book.take_slot(0, || unreachable!("not tried again"));
        assert_eq!(slot, None, "the upload then waits on the host");
        let mut on = Vec::new();
        book.record(0, Some(0), Touched::Anything, |e, _| {
            on.push(e);
            Ok(())
        })
        .unwrap();
        assert_eq!(on, [11], "no ring: its own event");
    }

    #[test]
    fn threads_have_distinct_tokens() {
        let here = thread_token();
        let there = std::thread::spawn(thread_token).join().unwrap();
        assert_eq!(here, thread_token());
        assert_ne!(here, there);
    }
}
