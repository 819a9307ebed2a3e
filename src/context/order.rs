//! The legacy order: synchronous device writes ordered on the GPU instead of waited for on
//! the host (issue 28; the design and the table of every consumer: `docs/design/ordering.md`).
//!
//! A synchronous write into device memory (`cuMemcpyHtoD`, `cuMemsetD*`, `cuMemcpyDtoD`, a
//! 2D or 3D copy into device memory) is queued on the legacy stream of the context current
//! on the calling thread. The crate's streams are non-blocking, so nothing orders their work
//! after it. Instead of waiting for the legacy stream on the host, the write records an
//! event of its context on the legacy stream ([`after_device_write`]): the context's
//! *record*. Every later user of device memory that is not ordered after that legacy stream
//! orders itself after every pending record first:
//!
//! * every operation of a stream scope, on the scope's stream, before it is queued
//!   ([`is_settled`], [`stream_after_writes`]): a scope may bind memory written
//!   synchronously after it opened, so a wait when it opens would not be enough;
//! * a synchronous operation in another context, on its own legacy stream
//!   ([`before_sync_op`]);
//! * a free that the driver does not order ([`wait_on_host`]).
//!
//! # Epochs
//!
//! One book for the process, behind one lock: every record takes the next *epoch*
//! (`Book::last`), and each context's entry keeps the epoch of its latest record. `DONE`
//! says "every record up to this epoch is complete": a scope whose stream waited for every
//! record up to epoch `g` ([`stream_after_writes`] returns `g`, which the scope keeps)
//! raises `DONE` to `g` once its streams are synchronized ([`settle`]). An operation of a
//! scope finds nothing to wait for while `LAST` is at most the larger of `DONE` and its
//! stream's `g`: one or two atomic loads and a load of the scope's field.
//!
//! # Why a wait covers every write before it, on every thread
//!
//! All records of one context are made on one stream, its legacy stream, which runs in
//! order: a record covers every write queued before it. `cuStreamWaitEvent` waits for the
//! event's most recent record at the time of the call. A writer records its event *then*
//! takes its epoch, both under the book's lock; a reader takes the lock, so every record
//! whose epoch it can see was made before its `cuStreamWaitEvent`, and the wait covers it
//! (or a later record of the same context, which covers it too). A thread that hands a
//! buffer to another (a channel, a join, a scoped thread's end: each a happens-before
//! edge) made its records before the hand-off, so the receiving thread's scope sees them.
//!
//! Only contexts the crate entered get an entry (their teardown takes it out again,
//! `on_context_end`): a write made while another library's context is current records only
//! where that context has an entry already, and waits on the host otherwise
//! (`memory::legacy::Completion`).
//!
//! Records are kept per context, not per stream or thread: the branded handle types are one
//! pointer wide (the size facts of the crate root), so a stream cannot carry the epoch it
//! last waited for; a scope compares the process-wide epochs instead, and waits on the
//! records still pending (usually one event per context that wrote since the last scope).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::driver::{self, CUcontext, CUevent, CUstream};
use crate::error::{Error, ErrorCode, Result};

/// `CU_EVENT_DISABLE_TIMING`: the record only orders.
const DISABLE_TIMING: u32 = 0x2;

/// The record of one context: its event and the epoch of its latest record.
struct Entry<E> {
    /// The context's handle as a number (a key; the event is what the driver gets).
    key: usize,
    event: E,
    /// The epoch of the event's latest record.
    last: u64,
}

/// The records of every context, generic over the event so the bookkeeping is tested
/// without a GPU.
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

    /// Records a write of context `key`: `record(event)` on its legacy stream, with
    /// `create()` making its event first if it has none. Returns the new epoch, or the
    /// error of `create` or `record` (then nothing is recorded: the caller waits on the host).
    fn record(
        &mut self,
        key: usize,
        create: impl FnOnce() -> Result<E>,
        record: impl FnOnce(E) -> Result<()>,
    ) -> Result<u64> {
        let i = match self.entries.iter().position(|e| e.key == key) {
            Some(i) => i,
            None => {
                let event = create()?;
                self.entries.push(Entry {
                    key,
                    event,
                    last: 0,
                });
                self.entries.len() - 1
            }
        };
        record(self.entries[i].event)?;
        self.last += 1;
        self.entries[i].last = self.last;
        Ok(self.last)
    }

    /// Calls `wait(event)` for the record of every context but `except` newer than `done`.
    fn wait_pending(
        &self,
        done: u64,
        except: Option<usize>,
        mut wait: impl FnMut(E) -> Result<()>,
    ) -> Result<()> {
        for e in &self.entries {
            if e.last > done && Some(e.key) != except {
                wait(e.event)?;
            }
        }
        Ok(())
    }

    /// Takes the entry of `key` out of the book (its context ends).
    fn remove(&mut self, key: usize) -> Option<E> {
        let i = self.entries.iter().position(|e| e.key == key)?;
        Some(self.entries.swap_remove(i).event)
    }

    /// What [`SOLE`] says for this book.
    fn sole(&self) -> usize {
        match self.entries.as_slice() {
            [] => NONE,
            [only] => only.key,
            _ => SEVERAL,
        }
    }
}

/// The process's book; events as numbers (`CUevent` is a raw pointer, not `Send`).
static BOOK: Mutex<Book<usize>> = Mutex::new(Book::new());
/// `BOOK.last`, readable without the lock.
static LAST: AtomicU64 = AtomicU64::new(0);
/// Every record up to this epoch is complete.
static DONE: AtomicU64 = AtomicU64::new(0);
/// Which contexts have an entry: [`NONE`], one context's key, or [`SEVERAL`].
static SOLE: AtomicUsize = AtomicUsize::new(NONE);
const NONE: usize = 0;
const SEVERAL: usize = usize::MAX;

/// The book, locked: refused inside a host function (a driver thread), whose every driver
/// call is refused anyway, so that no host function can ever wait for the lock while its
/// holder waits for the GPU (`wait_on_host` synchronizes events under it).
fn book() -> Result<MutexGuard<'static, Book<usize>>> {
    if driver::in_host_fn() {
        return Err(driver::driver_call_refused("the legacy order"));
    }
    // every critical section leaves the book consistent (a push, a store, a removal)
    Ok(BOOK.lock().unwrap_or_else(PoisonError::into_inner))
}

fn publish(book: &Book<usize>) {
    SOLE.store(book.sole(), Ordering::Release);
    LAST.store(book.last, Ordering::Release);
}

/// `CUDA_BRAND_SYNC_WRITES=wait` in the environment (read once): every synchronous device
/// write waits for the legacy stream on the host, as before the legacy order, so that one
/// benchmark session measures both (`scripts/bench-ordering`). Anything else, or unset: the
/// legacy order.
fn host_waits() -> bool {
    static WAITS: OnceLock<bool> = OnceLock::new();
    *WAITS.get_or_init(|| std::env::var("CUDA_BRAND_SYNC_WRITES").is_ok_and(|v| v == "wait"))
}

/// Waits on the host for the current context's legacy stream (the fallback where a record
/// cannot be made, and the completion of writes the host may observe next).
pub(crate) fn legacy_wait() -> Result<()> {
    // SAFETY: null is the current context's legacy default stream.
    unsafe { driver::stream_wait_idle(std::ptr::null_mut()) }
}

/// Completes a synchronous device write just queued on the legacy stream of `ctx`, which
/// is current: records `ctx`'s event after it (later scopes and synchronous operations of
/// other contexts wait for it on the GPU), making the event first if `ctx` has none and
/// `create` allows it. Where the event cannot be made (or may not be) or recorded, waits
/// for the legacy stream on the host instead, as before.
///
/// `create` is true only for a context the crate entered, whose teardown takes its event
/// out of the book (`on_context_end`): an event kept for a context another library made
/// current could outlive that context.
///
/// # Safety
/// `ctx` is alive and current on the calling thread.
pub(crate) unsafe fn after_device_write(ctx: CUcontext, create: bool) -> Result<()> {
    if host_waits() {
        return legacy_wait();
    }
    let mut book = book()?;
    let recorded = book.record(
        ctx as usize,
        || match create {
            true => driver::event_create(DISABLE_TIMING).map(|e| e as usize),
            false => Err(Error::new("the legacy order", ErrorCode::NotPermitted)),
        },
        // SAFETY: the event was made in `ctx` (its entry's key), whose legacy stream null
        // is while `ctx` is current (the caller's promise); the event lives until the
        // entry is removed, under this lock.
        |event| unsafe { driver::event_record(event as CUevent, std::ptr::null_mut()) },
    );
    match recorded {
        Ok(_) => {
            publish(&book);
            Ok(())
        }
        Err(_) => {
            drop(book);
            legacy_wait()
        }
    }
}

/// Makes the event of `ctx` now if it has none (the end of a setup phase: the run phase
/// then creates nothing for its synchronous writes). Best effort: where the event cannot be
/// made, the first write tries again, and waits on the host if that fails too.
///
/// # Safety
/// `ctx` is alive and current on the calling thread.
pub(crate) unsafe fn prepare(ctx: CUcontext) {
    let Ok(mut book) = book() else {
        return;
    };
    if book.entries.iter().any(|e| e.key == ctx as usize) {
        return;
    }
    if let Ok(event) = driver::event_create(DISABLE_TIMING) {
        book.entries.push(Entry {
            key: ctx as usize,
            event: event as usize,
            last: 0,
        });
        publish(&book);
    }
}

/// Orders the legacy stream of the current context `ctx` (`None`: a context the book does
/// not know, such as a primary context retained for one operation) after the pending
/// records of every other context, before a synchronous operation that touches device
/// memory there. One atomic load while at most `ctx` has records.
pub(crate) fn before_sync_op(ctx: Option<CUcontext>) -> Result<()> {
    let key = ctx.map(|c| c as usize);
    let sole = SOLE.load(Ordering::Acquire);
    if sole == NONE || Some(sole) == key {
        return Ok(());
    }
    let done = DONE.load(Ordering::Acquire);
    if LAST.load(Ordering::Acquire) <= done {
        return Ok(());
    }
    let book = book()?;
    book.wait_pending(done, key, |event| {
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
    if SOLE.load(Ordering::Acquire) == NONE {
        return Ok(());
    }
    let book = book()?;
    let covered = book.last;
    book.wait_pending(DONE.load(Ordering::Acquire), None, |event| {
        // SAFETY: the event is alive while its entry is in the book, under this lock.
        unsafe { driver::event_synchronize(event as CUevent) }
    })?;
    drop(book);
    settle(covered);
    Ok(())
}

/// Teardown of `raw` (alive and current): its records are waited for on the host and its
/// event destroyed. The teardowns that destroy or release a context have synchronized it
/// already; `with_raw_context` has not, and the context lives on. One atomic load while no
/// context has records.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
pub(crate) unsafe fn on_context_end(raw: CUcontext) {
    if SOLE.load(Ordering::Acquire) == NONE {
        return;
    }
    let Ok(mut book) = book() else {
        return; // not in a host function: teardowns run on the closure's thread
    };
    let Some(event) = book.remove(raw as usize) else {
        return;
    };
    let event = event as CUevent;
    // Waited for before the lock is released: another thread of the same context (a
    // primary context entered twice) may have recorded a write on it that a third thread's
    // scope, finding no entry any more, will not wait for. A failure here is the context's
    // sticky error, which its own teardown reports.
    // SAFETY: the event was made in `raw`, which is alive.
    let _ = unsafe { driver::event_synchronize(event) };
    publish(&book);
    drop(book);
    // SAFETY: as above; out of the book, nothing else uses the event.
    let _ = unsafe { driver::event_destroy(event) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn each_record_takes_the_next_epoch_and_the_event_is_made_once() {
        let mut book = Book::<u32>::new();
        let made = RefCell::new(0);
        let create = || {
            *made.borrow_mut() += 1;
            Ok(7)
        };
        assert_eq!(book.record(1, create, |_| Ok(())).unwrap(), 1);
        assert_eq!(book.record(1, || unreachable!(), |_| Ok(())).unwrap(), 2);
        assert_eq!(book.record(2, || Ok(9), |_| Ok(())).unwrap(), 3);
        assert_eq!(*made.borrow(), 1);
        assert_eq!(book.sole(), SEVERAL);
    }

    #[test]
    fn a_scope_waits_for_the_records_newer_than_done_only() {
        let mut book = Book::<u32>::new();
        book.record(1, || Ok(10), |_| Ok(())).unwrap(); // epoch 1
        book.record(2, || Ok(20), |_| Ok(())).unwrap(); // epoch 2
        book.record(1, || Ok(10), |_| Ok(())).unwrap(); // epoch 3: context 1 again
        let waited = |done, except| {
            let mut w = Vec::new();
            book.wait_pending(done, except, |e| {
                w.push(e);
                Ok(())
            })
            .unwrap();
            w.sort();
            w
        };
        assert_eq!(waited(0, None), [10, 20]);
        assert_eq!(waited(2, None), [10], "context 2's record is done");
        assert_eq!(waited(3, None), Vec::<u32>::new());
        assert_eq!(waited(0, Some(1)), [20], "its own legacy stream is ordered");
    }

    #[test]
    fn a_failed_record_takes_no_epoch() {
        let mut book = Book::<u32>::new();
        let fail = |_| Err(Error::new("cuEventRecord", ErrorCode::InvalidHandle));
        assert!(book.record(1, || Ok(10), fail).is_err());
        assert_eq!(book.last, 0);
        let fail = || Err(Error::new("cuEventCreate", ErrorCode::OutOfMemory));
        assert!(book.record(2, fail, |_| Ok(())).is_err());
        assert_eq!(book.sole(), 1, "context 2 has no entry");
        let mut w = Vec::new();
        book.wait_pending(0, None, |e| {
            w.push(e);
            Ok(())
        })
        .unwrap();
        assert!(w.is_empty(), "context 1's entry has no record");
    }

    #[test]
    fn a_removed_context_is_waited_for_no_more() {
        let mut book = Book::<u32>::new();
        book.record(1, || Ok(10), |_| Ok(())).unwrap();
        book.record(2, || Ok(20), |_| Ok(())).unwrap();
        assert_eq!(book.remove(1), Some(10));
        assert_eq!(book.remove(1), None);
        assert_eq!(book.sole(), 2);
        let mut w = Vec::new();
        book.wait_pending(0, None, |e| {
            w.push(e);
            Ok(())
        })
        .unwrap();
        assert_eq!(w, [20]);
        assert_eq!(book.remove(2), Some(20));
        assert_eq!(book.sole(), NONE);
    }

    #[test]
    fn settling_never_lowers_done() {
        // the process-wide atomics: other tests of the crate do not touch them without a GPU
        let before = DONE.load(Ordering::Acquire);
        settle(before + 5);
        settle(before + 2);
        assert_eq!(DONE.load(Ordering::Acquire), before + 5);
        settle(0);
        assert_eq!(DONE.load(Ordering::Acquire), before + 5);
    }
}
