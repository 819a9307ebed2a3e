//! The order of synchronous operations: synchronous device writes ordered on the GPU
//! instead of waited for on the host, each after exactly the earlier synchronous work on
//! the memory it touches (issue 28; the design and the table of every consumer:
//! `docs/design/ordering.md`).
//!
//! A synchronous copy or fill (`copy_from_host`, `fill`, `zeroed`, `copy_from_device`, a 2D
//! or 3D copy, `to_vec`) runs on the calling thread's **sync stream** in the context: a
//! non-blocking stream the crate keeps for that thread and context ([`SyncStream`]), with
//! the driver's `*Async` calls. Threads of one context never queue behind each other's
//! synchronous work there (the driver's "synchronous" calls all use the context's one
//! legacy stream, and a pageable upload synchronizes it first).
//!
//! * An operation that reads or writes host memory the caller lends (a download, an upload
//!   of more than [`BOUNCE_SLOT`] bytes) is complete when it returns: the sync stream is
//!   synchronized before the call returns, so the host buffer is neither read nor written
//!   afterwards.
//! * A write of device memory alone (a fill, a device-to-device copy, and an upload of up to
//!   [`BOUNCE_SLOT`] bytes, copied on the host into a slot of the sync stream's
//!   bounce ring first, [`Bounce`]; page-locked in a context the crate destroys itself,
//!   [`RING_LAYOUT`]) records the sync stream's event instead: the sync
//!   stream's *record*, with the spans of memory the operation touched (its *accesses*).
//!   Every later user of device memory that is not ordered after that sync stream orders
//!   itself after the records whose accesses conflict with what it touches (shared bytes,
//!   one side writing; [`conflicts`](access::conflicts)): each operation of a stream scope, on the scope's
//!   stream, before it is queued ([`stream_after_writes`]; a scope may bind memory written
//!   synchronously after it opened, so a wait when it opens would not be enough); each
//!   synchronous operation of another sync stream, on that sync stream
//!   ([`SyncStream::begin`]); work on a legacy stream ([`before_legacy_op`]: a free, an
//!   operation that may use no sync stream); and, waiting on the host for every record, a
//!   free the driver does not order and `ContextGuard::synchronize` ([`wait_on_host`]);
//!   and each raw escape, which hands memory or a handle to code the crate cannot see: on
//!   the host, for the records that conflict with what it hands out (an address, raw
//!   parts, a raw context, module, function or graph: [`before_raw_escape`]), or, for a
//!   raw stream, on that stream for every record ([`stream_after_writes`] of anything).
//!   Nothing is queued on a stream the crate does not own (a scope's, a legacy stream)
//!   while the book's lock is held: the waits go through the calling thread's sync stream
//!   (`outside.rs`).
//!
//! # Accesses
//!
//! One book for the process, behind one lock: each sync stream's entry keeps the spans its
//! pending records touched (each span once: repeated writes of one buffer keep one), all
//! covered by the entry's latest record. Memory the crate cannot place is recorded as
//! touching everything ([`Touched::Anything`]): a module global (any kernel of its module
//! may read it, whatever its arguments name), plain `cuMemAlloc` memory reached through a
//! view, a pitched buffer. An operation that names no memory (a graph launch) waits for
//! every pending record. A record is forgotten once it is known complete: its sync stream
//! was synchronized, or a query before a wait found it done, or [`wait_on_host`] waited for
//! it; past [`MAX_PENDING`] spans a sync stream is waited for on the host. While nothing is
//! pending anywhere, a scope operation costs one atomic load ([`is_settled`]).
//!
//! # Why a wait covers every conflicting write before it, on every thread
//!
//! All records of one sync stream are made on its stream, which runs in order: a record
//! covers every operation queued on the sync stream before it. `cuStreamWaitEvent` waits
//! for the event's most recent record at the time of the call. A writer records its event
//! *then* adds its accesses, both under the book's lock; a reader takes the lock, so every
//! access it can see was recorded before its `cuStreamWaitEvent`, and the wait covers it
//! (or a later record of the same sync stream, which covers it too). A thread that hands a
//! buffer to another (a channel, a join, a scoped thread's end: each a happens-before
//! edge) made its records before the hand-off, so the receiving thread's scope or sync
//! stream sees them. Memory freed with a pending access keeps it: a later allocation of the
//! same addresses conflicts with it until it is complete.
//!
//! Only contexts the crate entered get a sync stream made for them (the teardown of the
//! scope they were made under takes them out again, [`on_context_end`]): a write made
//! while another library's context is current uses a sync stream only where the context
//! has one already, and runs on the legacy stream with a wait on the host otherwise
//! (`memory::legacy::Completion`).
//!
//! Accesses are kept per sync stream, not per buffer: the branded handle types are one
//! pointer (and a length) wide (the size facts of the crate root), so a buffer cannot carry
//! its last write; an operation compares its spans with the pending accesses instead.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::driver::{self, CUcontext, CUevent, CUstream};
use crate::error::{Error, ErrorCode, Result};

/// `CU_EVENT_DISABLE_TIMING`: the record only orders.
const DISABLE_TIMING: u32 = 0x2;
/// `CU_STREAM_NON_BLOCKING`: a sync stream does not synchronize with the legacy stream.
const NON_BLOCKING: u32 = 0x1;

mod access;
mod book;
mod outside;

pub(crate) use access::{Span, Touched};
pub(crate) use book::BOUNCE_SLOT;
use book::{BOUNCE_SLOTS, Book, Bounce, Ring};
pub(crate) use outside::{before_legacy_op, before_raw_escape, stream_after_writes};

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
/// How many bounce rings' memory is allocated ([`make_bounce`] to [`free_rings`]), for the
/// crate's tests (`hidden::live_rings`).
static LIVE_RINGS: AtomicU64 = AtomicU64::new(0);

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
    let stream = match super::confined::green_of(ctx) {
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

/// Makes a bounce ring in the current context ([`Bounce`]): one event per slot, then host
/// memory ([`RING_LAYOUT`]); nothing kept where any part fails. `register`: page-lock the
/// memory in the context (one the crate destroys itself, [`may_register`]); where that
/// fails, the ring is made of plain memory, which the driver stages.
fn make_bounce(register: bool) -> Result<Bounce<usize>> {
    let mut events = [0usize; BOUNCE_SLOTS];
    for k in 0..BOUNCE_SLOTS {
        match driver::event_create(DISABLE_TIMING) {
            Ok(event) => events[k] = event as usize,
            Err(e) => {
                destroy_events(&events[..k]);
                return Err(e);
            }
        }
    }
    // SAFETY: the layout has a non-zero size.
    let host = unsafe { std::alloc::alloc(RING_LAYOUT) };
    if host.is_null() {
        destroy_events(&events);
        return Err(Error::with_detail(
            "bounce ring",
            ErrorCode::OutOfMemory,
            "no host memory for the sync stream's bounce ring",
        ));
    }
    LIVE_RINGS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the crate's own memory of `RING_LAYOUT.size()` bytes, freed only after it is
    // unregistered (`free_rings`) or, where that fails, its context destroyed
    // (`after_destroy`).
    let registered = register
        && unsafe { driver::mem_host_register(host.cast(), RING_LAYOUT.size(), 0) }.is_ok();
    Ok(Bounce {
        host: host as usize,
        events,
        next: 0,
        in_flight: 0,
        registered,
    })
}

/// Destroys events of a ring: made in the current context, no record of them pending (just
/// made, or every copy out of the ring ran), nothing else holding them.
fn destroy_events(events: &[usize]) {
    for &event in events {
        // SAFETY: as above.
        let _ = unsafe { driver::event_destroy(event as CUevent) };
    }
}

/// The bounce ring's memory: host memory of the crate's own (`std::alloc`). In a context
/// the crate destroys itself (`with_context`, `with_phases`, `OwnedContext::new`:
/// [`adopt`]) it is page-locked there (`cuMemHostRegister`, [`make_bounce`]), so that the
/// copy out of a slot is a DMA the driver does not stage. Such a context's sync streams,
/// and their rings, end at its destroying teardown, after that teardown synchronized the
/// context, so `cuMemHostUnregister`, which waits for every work queued in its context
/// (238.6 ms behind about a second of memsets on an H200,
/// `docs/c/facts/host_alloc_while_busy.h200.out`; 0.1-0.3 ms with only another context
/// busy, `register_until_destroy.out`), finds nothing to wait for. (Entries of
/// `SharedContext::enter` and of the owning layer keep their thread's sync stream. A
/// `with_raw_context` scope on such a context, which needs its raw handle, ends the sync
/// streams made during it, of any thread, and unregistering their rings may wait for the
/// context's other work there, or, for a sync stream busy at that moment, in that
/// thread's synchronous operation, which ends it: work that waits for either thread would
/// then never finish.) At most [`MAX_REGISTERED_RINGS`] per context are
/// page-locked. In any other context (a primary context, one another library made) the
/// ring is plain memory, which the driver stages, since no teardown of the crate's knows
/// such a context idle. Either way the copy is correct whenever the driver reads the slot,
/// since a slot is rewritten only after the event recorded behind its copy is waited for
/// or known complete (`Bounce::in_flight`); where that record failed and the sync stream
/// could not be waited for either, the ring is given up (`Book::give_up_ring`).
const RING_LAYOUT: std::alloc::Layout =
    match std::alloc::Layout::from_size_align(BOUNCE_SLOTS * BOUNCE_SLOT, 4096) {
        Ok(layout) => layout,
        Err(_) => panic!("the ring's layout"),
    };

/// The most page-locked rings one context has (one per thread that made synchronous
/// uploads in it; the sync streams of threads that ended stay until the context's
/// teardown, unless a new thread takes their token): 16 MiB. Later rings are plain memory.
const MAX_REGISTERED_RINGS: usize = 16;

/// The contexts the crate created and destroys itself ([`adopt`]), from their making to
/// their destroying teardown ([`disown`]). Its own lock, never held across a driver call,
/// so that making a context never waits for the book (held across waits for the GPU).
static OWNED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Page-locked rings whose unregistering failed (a context with a sticky error), with their
/// context: the context's destruction takes the registration away, then [`after_destroy`]
/// frees them.
static STRANDED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn stranded() -> MutexGuard<'static, Vec<(usize, usize)>> {
    // every critical section is one push or one pass over the list, no driver call
    STRANDED.lock().unwrap_or_else(PoisonError::into_inner)
}

fn owned() -> MutexGuard<'static, Vec<usize>> {
    // every critical section is one push, search or removal
    OWNED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The crate just created `raw` (`with_context`, `OwnedContext::new`) and destroys it
/// itself, with a teardown that ends its sync streams after synchronizing it, then calls
/// [`disown`]: the bounce rings of its sync streams are page-locked ([`RING_LAYOUT`]).
pub(crate) fn adopt(raw: CUcontext) {
    owned().push(raw as usize);
}

/// `raw` is about to be destroyed (or was left alive by a failed pop, the crate no longer
/// holding it): no ring made in it from now on is page-locked.
pub(crate) fn disown(raw: CUcontext) {
    owned().retain(|&c| c != raw as usize);
}

#[cfg(feature = "staging")] // used by the bulk-copy staging alone
/// Whether a scope of the crate holds `raw`, as far as the order knows: the crate created
/// it ([`adopt`], until [`disown`]), or it has a sync stream that is not doomed
/// (`Book::holds`: made under a scope that has not torn down yet).
pub(crate) fn holds(raw: CUcontext) -> bool {
    owned().contains(&(raw as usize)) || book().is_ok_and(|book| book.holds(raw as usize))
}

/// Whether a new ring of sync stream `i` is page-locked: its context is one the crate
/// destroys itself, with fewer than [`MAX_REGISTERED_RINGS`] page-locked rings.
fn may_register(book: &Book<usize>, i: usize) -> bool {
    let ctx = book.entries[i].ctx;
    owned().contains(&ctx) && book.registered_rings(ctx) < MAX_REGISTERED_RINGS
}

/// A ring's memory to free ([`free_rings`]).
struct RingMemory {
    ctx: usize,
    host: usize,
    /// Page-locked in the current context: unregistered before it is freed.
    registered: bool,
}

/// Ends sync stream `i` (taken out of the book): its work is waited for on the host, then
/// its events and stream destroyed. Its context is alive and current. Returns its bounce
/// ring's memory, which the caller frees with [`free_rings`] once the book's lock is
/// released (every thread's synchronous operations take that lock).
#[must_use]
fn end_sync_stream(book: &mut Book<usize>, i: usize) -> Option<RingMemory> {
    let e = book.entries.swap_remove(i);
    // A failure here is the context's sticky error, which its own teardown reports. SAFETY:
    // the sync stream's handles were made in its context, which is alive; out of the book,
    // nothing else uses them.
    let _ = unsafe { driver::stream_wait_idle(e.stream as CUstream) };
    // SAFETY: as above.
    let _ = unsafe { driver::event_destroy(e.own as CUevent) };
    // SAFETY: as above.
    let _ = unsafe { driver::stream_destroy(e.stream as CUstream) };
    let Ring::Made(b) = e.ring else {
        return None;
    };
    // every copy out of the ring ran on the stream, now idle
    destroy_events(&b.events);
    Some(RingMemory {
        ctx: e.ctx,
        host: b.host,
        registered: b.registered,
    })
}

/// Frees bounce rings' memory ([`end_sync_stream`]), with the book's lock released and
/// their context current: no copy out of them is pending (their streams were idle, or none
/// was queued) and no slot is lent (their sync streams were not busy, or their own
/// operation ended them). A page-locked ring is unregistered first; where that fails (a
/// context with a sticky error), it is freed only after its context's destruction takes
/// the registration away ([`after_destroy`]): a freed page the driver still counted as
/// registered would make a later registration of it fail.
fn free_rings(rings: impl IntoIterator<Item = RingMemory>) {
    for ring in rings {
        // SAFETY: registered in the current context (the caller's promise), no copy queued.
        if ring.registered && unsafe { driver::mem_host_unregister(ring.host as *mut _) }.is_err() {
            stranded().push((ring.ctx, ring.host));
            continue;
        }
        dealloc_ring(ring.host);
    }
}

fn dealloc_ring(host: usize) {
    // SAFETY: the memory came from `std::alloc::alloc(RING_LAYOUT)` (`make_bounce`), is
    // neither registered nor read by any copy (`free_rings`, `after_destroy`), and is freed
    // once.
    unsafe { std::alloc::dealloc(host as *mut u8, RING_LAYOUT) };
    LIVE_RINGS.fetch_sub(1, Ordering::Relaxed);
}

/// `raw` was destroyed by the crate (`cuCtxDestroy` succeeded, which takes its
/// registrations away): frees its rings whose unregistering failed. One uncontended lock
/// beside the destroy's milliseconds.
pub(crate) fn after_destroy(raw: CUcontext) {
    stranded().retain(|&(ctx, host)| {
        let its = ctx == raw as usize;
        if its {
            dealloc_ring(host);
        }
        !its
    });
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
    /// `begin` was asked for a slot, and the sync stream has no bounce ring yet: the first
    /// [`SyncStream::slot`] makes it.
    needs_ring: bool,
    /// The ring it makes is page-locked ([`may_register`]).
    register: bool,
}

/// A slot of a sync stream's bounce ring, lent to one small upload.
#[derive(Clone, Copy)]
pub(crate) struct Slot {
    index: usize,
    /// [`BOUNCE_SLOT`] bytes of host memory of the crate's own.
    pub(crate) host: *mut u8,
    /// Recorded after the last copy out of the slot: complete once the slot is free.
    pub(crate) event: CUevent,
    /// Whether that copy may still be queued: else the slot is free without a wait (its
    /// sync stream was synchronized, or a later record of it was found complete, since).
    pub(crate) in_flight: bool,
}

impl Slot {
    fn new((index, host, event, in_flight): (usize, usize, usize, bool)) -> Slot {
        Slot {
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
    /// operation runs on the legacy stream ([`before_legacy_op`]) and is waited for on the
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
        let needs_ring = slot && book.needs_ring(i);
        let register = needs_ring && may_register(&book, i);
        if needs_ring {
            book.reserve_ring(i, register);
        }
        let slot = match slot {
            true => book.take_slot(i).map(Slot::new),
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
    pub(crate) fn slot(&mut self) -> Option<Slot> {
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
            self.slot = book.take_slot(i).map(Slot::new);
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
    fn finish(self, record: Option<Touched<'_>>, synced: bool) -> Result<()> {
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
        }
        publish(&book);
        drop(book);
        free_rings(ring);
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
    if book.find(ctx as usize, thread).is_none()
        && book
            .add(ctx as usize, thread, || make_sync_stream(ctx))
            .is_ok()
    {
        publish(&book);
    }
}

/// Whether nothing is pending: no work needs to wait for any sync stream. One atomic load.
#[inline(always)]
pub(crate) fn is_settled() -> bool {
    PENDING.load(Ordering::Acquire) == 0
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

/// Teardown of `raw` (alive and current): every sync stream of the context, of any thread,
/// made after `mark` ([`mark`]; 0: all of them), is waited for on the host and ended; a
/// sync stream busy on another thread (a primary context entered on two threads) is ended
/// by its own operation ([`SyncStream::end`]). One atomic load while no sync stream was
/// made since `mark` (or none exists).
///
/// Every sync stream is made while the crate holds its context for a scope (one it
/// entered, or one that has a sync stream not doomed already: `Book::holds`), and the
/// teardown of every such scope ends the context's sync streams made since it began. A
/// context `with_context` created, or the owning layer holds, has all of them ended
/// (`mark` 0: none was made in it before). A `with_primary_context` or `with_raw_context`
/// scope ends only the ones made during it: the earlier ones are ended by the scope they
/// were made under, which holds the context still (an outer scope on this thread, or one
/// on another thread) or ended them already.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
#[inline(always)]
pub(crate) unsafe fn on_context_end(raw: CUcontext, mark: u64) {
    // `MADE` only grows, and is published under the lock after every making: a sync stream
    // of `raw` made since `mark` on any thread was made before this teardown (its scope is
    // inside the one ending here, or began after `mark`) and is counted
    if MADE.load(Ordering::Acquire) <= mark || SYNC_STREAMS.load(Ordering::Acquire) == 0 {
        return;
    }
    // SAFETY: the caller's promise.
    unsafe { end_sync_streams_since(raw, mark) }
}

/// [`on_context_end`] past its fast path, out of line.
///
/// # Safety
/// As [`on_context_end`].
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
    drop(book);
    free_rings(rings);
}

// ---- for the crate's tests ----------------------------------------------------------------

/// What `cuda_brand::__order` exports (hidden): the bounce rings and the pending writes,
/// for the crate's GPU tests. Not an API: it may change at any time.
pub mod hidden {
    use super::access::conflicts;
    use super::book::Entry;
    use super::{BOOK, LIVE_RINGS, Ordering, PoisonError, Ring, Span, Touched, thread_token};
    use crate::context::ContextGuard;

    /// A sync stream's ring, as (host address, page-locked), if it has one.
    fn ring(e: &Entry<usize>) -> Option<(usize, bool)> {
        match &e.ring {
            Ring::Made(b) => Some((b.host, b.registered)),
            _ => None,
        }
    }

    /// How many bounce rings' memory is allocated, in every context.
    pub fn live_rings() -> u64 {
        LIVE_RINGS.load(Ordering::Relaxed)
    }

    /// The bounce ring of the calling thread's sync stream in `ctx`, as (host address,
    /// page-locked), if it has one.
    pub fn ring_of_this_thread(ctx: ContextGuard<'_>) -> Option<(usize, bool)> {
        let book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let i = book.find(ctx.raw() as usize, thread_token())?;
        ring(&book.entries[i])
    }

    /// The bounce rings of `ctx`'s sync streams, as (host address, page-locked).
    pub fn rings_of(ctx: ContextGuard<'_>) -> Vec<(usize, bool)> {
        let raw = ctx.raw() as usize;
        let book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let of_ctx = book.entries.iter().filter(|e| e.ctx == raw);
        of_ctx.filter_map(ring).collect()
    }

    /// The most page-locked rings one context has.
    pub const MAX_REGISTERED_RINGS: usize = super::MAX_REGISTERED_RINGS;

    /// How many sync streams have a pending write of the `bytes` at device address `start`
    /// whose latest record is not complete yet (`cuEventQuery`; the book is left as it is):
    /// a read of that memory queued now would have to wait for them.
    pub fn incomplete_writes_of(start: u64, bytes: u64) -> crate::error::Result<usize> {
        let read = [Span {
            start,
            bytes,
            write: false,
        }];
        let book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let mut incomplete = 0;
        for e in &book.entries {
            if e.pending
                .iter()
                .any(|a| conflicts(Touched::Spans(&read), a))
                && !super::event_done(e.event)?
            {
                incomplete += 1;
            }
        }
        Ok(incomplete)
    }
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
