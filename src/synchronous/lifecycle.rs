//! The driver objects of the synchronous path: each sync stream's stream and event, made
//! in its context and ended at its context's teardown, and its bounce ring (events and host
//! memory, page-locked in a context the crate destroys itself), freed with it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::book::{BOUNCE_SLOT, BOUNCE_SLOTS, Book, Bounce, Ring};
use crate::context;
use crate::driver::{self, CUcontext, CUevent, CUstream};
use crate::error::{Error, ErrorCode, Result};

/// `CU_EVENT_DISABLE_TIMING`: the record only orders.
const DISABLE_TIMING: u32 = 0x2;
/// `CU_STREAM_NON_BLOCKING`: a sync stream does not synchronize with the legacy stream.
const NON_BLOCKING: u32 = 0x1;
/// How many bounce rings' memory is allocated ([`make_bounce`] to [`free_rings`]), for the
/// crate's tests (`hidden::live_rings`).
pub(super) static LIVE_RINGS: AtomicU64 = AtomicU64::new(0);

/// Makes a stream and event in `ctx`, which is current: a green context's stream
/// where `ctx` is a partition's (its work stays on the partition's SMs).
pub(super) fn make_sync_stream(ctx: CUcontext) -> Result<(usize, usize)> {
    let stream = match crate::context::confined::green_of(ctx) {
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
pub(super) fn make_bounce(register: bool) -> Result<Bounce<usize>> {
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
/// `context::destroys_itself`) it is page-locked there (`cuMemHostRegister`,
/// [`make_bounce`]), so that the copy out of a slot is a DMA the driver does not stage.
/// Such a context's sync streams, and their rings, end at its destroying teardown, after
/// that teardown synchronized the context, so `cuMemHostUnregister`, which waits for every
/// work queued in its context (238.6 ms behind about a second of memsets on an H200,
/// `docs/c/facts/host_alloc_while_busy.h200.out`; 0.1-0.3 ms with only another context
/// busy, `register_until_destroy.out`), finds nothing to wait for. (Entries of
/// `SharedContext::enter` and of the owning layer keep their thread's sync stream. A
/// `with_raw_context` scope on such a context, which needs its raw handle, ends the sync
/// streams made during it, of any thread, and unregistering their rings may wait for the
/// context's other work there, or, for a sync stream busy at that moment, in that thread's
/// synchronous operation, which ends it: work that waits for either thread would then never
/// finish.) At most [`MAX_REGISTERED_RINGS`] per context are page-locked. In any other
/// context (a primary context, one another library made) the ring is plain memory, which
/// the driver stages, since no teardown of the crate's knows such a context idle. Either
/// way the copy is correct whenever the driver reads the slot, since a slot is rewritten
/// only after the event recorded behind its copy is waited for or known complete
/// (`Bounce::in_flight`); where that record failed and the sync stream could not be waited
/// for either, the ring is given up (`Book::give_up_ring`).
const RING_LAYOUT: std::alloc::Layout =
    match std::alloc::Layout::from_size_align(BOUNCE_SLOTS * BOUNCE_SLOT, 4096) {
        Ok(layout) => layout,
        Err(_) => panic!("the ring's layout"),
    };

/// The most page-locked rings one context has (one per thread that made synchronous
/// uploads in it; the sync streams of threads that ended stay until the context's
/// teardown, unless a new thread takes their token): 16 MiB. Later rings are plain memory.
pub(super) const MAX_REGISTERED_RINGS: usize = 16;

/// Page-locked rings whose unregistering failed (a context with a sticky error), with their
/// context: the context's destruction takes the registration away, then [`after_destroy`]
/// frees them.
static STRANDED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn stranded() -> MutexGuard<'static, Vec<(usize, usize)>> {
    // every critical section is one push or one pass over the list, no driver call
    STRANDED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a new ring of sync stream `i` is page-locked: its context is one the crate
/// destroys itself, with fewer than [`MAX_REGISTERED_RINGS`] page-locked rings.
pub(super) fn may_register(book: &Book<usize>, i: usize) -> bool {
    let ctx = book.entries[i].ctx;
    context::destroys_itself(ctx as CUcontext) && book.registered_rings(ctx) < MAX_REGISTERED_RINGS
}

/// A ring's memory to free ([`free_rings`]).
pub(super) struct RingMemory {
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
pub(super) fn end_sync_stream(book: &mut Book<usize>, i: usize) -> Option<RingMemory> {
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
pub(super) fn free_rings(rings: impl IntoIterator<Item = RingMemory>) {
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
pub(super) fn after_destroy(raw: CUcontext) {
    stranded().retain(|&(ctx, host)| {
        let its = ctx == raw as usize;
        if its {
            dealloc_ring(host);
        }
        !its
    });
}
