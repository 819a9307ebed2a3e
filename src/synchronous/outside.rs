//! Streams the crate does not own (a scope's stream, the legacy stream) ordered after the
//! pending accesses their next work conflicts with, without queueing anything on them
//! while the book's lock is held.
//!
//! The driver may block a call that queues work on a stream whose queue is full, until the
//! stream moves on. A user's stream can be full behind a host function that waits for
//! something of the user's (a mutex), whose holder may make a synchronous operation, which
//! takes the book's lock: were the book's lock held across `cuStreamWaitEvent` on the
//! user's stream, the three would wait for each other. So the waits for other sync streams'
//! records are queued under the lock on the calling thread's own sync stream `R` in the
//! stream's context (its queue holds the crate's own work, which never waits for a user's
//! stream, so those calls return once the GPU has moved on), `R`'s event is recorded after
//! them, and `R` is marked busy: a teardown meanwhile dooms it instead of ending it
//! (`teardown::end_sync_streams`), and no other operation records its event, so the event
//! stays alive and its latest record is this one. The lock is released, the user's stream
//! waits for `R`'s event, and the operation ends as a synchronous operation on `R` does
//! (relocked; a doomed `R` is ended there, its context current). Where only `R`'s own
//! records conflict, the user's stream waits for `R`'s latest record and nothing is queued
//! on `R`. Where the thread has no sync stream in that context and may make none (or cannot
//! enter the context, or `CUDA_BRAND_SYNC_WRITES=wait`), the conflicting records are waited
//! for on the host under the lock instead, which, like `wait_on_host`, waits for the
//! crate's own work alone.
//!
//! What it costs, on the slow path only (something pending; the fast path is still one
//! atomic load): `cuStreamGetCtx` and `cuCtxGetCurrent` (a scope's stream), or
//! `cuCtxGetCurrent` (the legacy stream); where other threads' records conflict, one
//! `cuEventRecord` on `R` beside the `cuStreamWaitEvent`s (queued on `R` instead of the
//! user's stream), then one `cuStreamWaitEvent` on the user's stream and a second
//! acquisition of the book's lock; a thread with no sync stream in the context makes one
//! the first time (a stream and an event, kept until the context's teardown). The waits
//! queued on `R` also order that thread's later synchronous operations after those records.

use super::book::Book;
use super::sync_stream::{
    SyncStream, add_sync_stream, book, event_done, host_waits, is_settled, publish, thread_token,
};
use crate::context::in_context;
use crate::driver::{self, CUcontext, CUevent, CUstream};
use crate::error::Result;
use crate::span::Touched;

/// Makes `stream` wait for every pending access that work touching `touched` conflicts
/// with, before that work is queued on it (an operation of a scope), through the calling
/// thread's sync stream in the stream's context (made if the thread has none: a branded
/// stream's context is one a scope of the crate holds), never queueing on `stream` under
/// the book's lock. One atomic load while nothing is pending.
///
/// # Safety
/// The stream is alive.
#[inline]
pub(crate) unsafe fn stream_after_writes(stream: CUstream, touched: Touched<'_>) -> Result<()> {
    if is_settled() {
        return Ok(());
    }
    // SAFETY: the caller's promise.
    unsafe { scope_stream_after_writes(stream, touched) }
}

/// [`stream_after_writes`] past its fast path.
///
/// # Safety
/// As [`stream_after_writes`].
#[cold]
#[inline(never)]
unsafe fn scope_stream_after_writes(stream: CUstream, touched: Touched<'_>) -> Result<()> {
    // SAFETY: the caller's promise.
    let ctx = unsafe { driver::stream_get_ctx(stream) }?;
    let ctx = driver::non_null("cuStreamGetCtx", ctx)?;
    let mut entered = false;
    let order = || {
        entered = true;
        // SAFETY: the stream is alive and of `ctx`, current here and alive meanwhile.
        unsafe { through_sync_stream(stream, ctx.as_ptr(), true, touched) }
    };
    // SAFETY: the context of a live stream is alive while the stream is.
    let ordered = unsafe { in_context(ctx, order) };
    match ordered {
        // this thread may not make the context current (a partition's, entered on another
        // thread), or the push failed: no sync stream of its can carry the wait
        Err(_) if !entered => wait_on_host_for(touched),
        ordered => ordered,
    }
}

/// Orders the legacy stream of the current context after every pending access that work
/// touching `touched` conflicts with, before that work is queued there (a free on the
/// legacy stream, a synchronous operation without a sync stream, a staged copy there), as
/// [`stream_after_writes`] does, through the thread's sync stream in the context: one it
/// has, or one made where `make` (a context a scope of the crate holds: a buffer's owner)
/// or where the context has one of another thread (`Book::holds`). One atomic load while
/// nothing is pending.
pub(crate) fn before_legacy_op(touched: Touched<'_>, make: bool) -> Result<()> {
    if is_settled() {
        return Ok(());
    }
    legacy_after_writes(touched, make)
}

/// [`before_legacy_op`] past its fast path.
#[cold]
#[inline(never)]
fn legacy_after_writes(touched: Touched<'_>, make: bool) -> Result<()> {
    let ctx = driver::ctx_get_current()?;
    if ctx.is_null() {
        return wait_on_host_for(touched);
    }
    // SAFETY: null is the current context's legacy stream; a current context is alive
    // while it is current, which it stays here.
    unsafe { through_sync_stream(std::ptr::null_mut(), ctx, make, touched) }
}

/// Makes `target` wait for every pending access that work touching `touched` conflicts
/// with, through the calling thread's sync stream in `ctx` (the module's documentation);
/// found, or made where `make` or [`Book::holds`] allow; else on the host.
///
/// # Safety
/// `ctx` is alive and current on the calling thread until this returns; `target` is a
/// live stream of `ctx` (null: its legacy stream).
unsafe fn through_sync_stream(
    target: CUstream,
    ctx: CUcontext,
    make: bool,
    touched: Touched<'_>,
) -> Result<()> {
    let thread = thread_token();
    let mut book = book()?;
    let Some(r) = lendable(&mut book, ctx, thread, make) else {
        let waited = book.wait_conflicting_on_host(touched, event_done, sync_event);
        publish(&book);
        return waited;
    };
    let r_stream = book.entries[r].stream;
    let via = book.order_through(
        r,
        touched,
        event_done,
        // SAFETY: the sync stream and the events are alive while their entries are in the
        // book, under the lock held here; a wait queued on the crate's own stream.
        |event| unsafe { driver::stream_wait_event(r_stream as CUstream, event as CUevent) },
        // SAFETY: the sync stream's own event and stream, alive as above, of one context.
        |event, stream| unsafe { driver::event_record(event as CUevent, stream as CUstream) },
    );
    publish(&book);
    let Some(event) = via? else {
        return Ok(());
    };
    book.entries[r].busy = true;
    drop(book);
    // from here on ended by `finish`, or by `Drop` on an unwind
    let lent = SyncStream {
        ctx: ctx as usize,
        thread,
        stream: r_stream as CUstream,
        slot: None,
        needs_ring: false,
        register: false,
    };
    // SAFETY: `target` is live (the caller's promise); the event is the busy sync stream's,
    // alive until its operation (this one) ends it or lets a teardown do so.
    let waited = unsafe { driver::stream_wait_event(target, event as CUevent) };
    let ended = lent.finish(None, false);
    waited.and(ended)
}

/// The calling thread's sync stream in `ctx` (current), to carry a wait: found, or made
/// where `make` or [`Book::holds`] allow; `None` where there is none to be had (or it is
/// busy with an operation of this thread, which no path of the crate nests, or
/// `CUDA_BRAND_SYNC_WRITES=wait`).
fn lendable(book: &mut Book<usize>, ctx: CUcontext, thread: usize, make: bool) -> Option<usize> {
    if host_waits() {
        return None;
    }
    match book.find(ctx as usize, thread) {
        Some(i) => (!book.entries[i].busy).then_some(i),
        // not beside a doomed sync stream alone (`Book::holds`)
        None if make || book.holds(ctx as usize) => add_sync_stream(book, ctx, thread).ok(),
        None => None,
    }
}

/// Waits on the host, under the book's lock, for every pending record that work touching
/// `touched` conflicts with (no sync stream to carry the wait, or a raw escape:
/// [`before_raw_escape`]).
fn wait_on_host_for(touched: Touched<'_>) -> Result<()> {
    let mut book = book()?;
    let waited = book.wait_conflicting_on_host(touched, event_done, sync_event);
    publish(&book);
    waited
}

/// Waits on the host for every pending record that work touching `touched` conflicts with,
/// where memory or a handle leaves the crate for code it cannot see, which nothing of the
/// crate orders (an address, raw parts, a raw context, module or graph). `Spans(&[])`
/// waits for the records of memory the crate cannot place alone (`Touched::Anything`'s:
/// module globals among them). Like [`wait_on_host`](super::wait_on_host), it waits for
/// the crate's own work alone. One atomic load while nothing is pending.
///
/// For raw escapes whose signature has no room for an error: a failed wait is not
/// returned. An event's query or wait fails only for a fault of earlier work (a sticky
/// error, which every later call in that context reports, the caller's raw calls included)
/// or once the driver is torn down; inside a host function, where the crate makes no
/// driver call (nor may the caller), nothing is waited for. The records stay in the book
/// either way, and every later user of their memory waits for them again.
#[inline]
pub(crate) fn before_raw_escape(touched: Touched<'_>) {
    if !is_settled() {
        let _ = wait_on_host_for(touched);
    }
}

/// `sync` for [`Book::wait_conflicting_on_host`]: waits for the event's latest record.
fn sync_event(event: usize) -> Result<()> {
    // SAFETY: the event is alive while its entry is in the book, under the lock held by
    // every caller.
    unsafe { driver::event_synchronize(event as CUevent) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sync stream that carries a wait is the calling thread's own in the context, and
    /// never one busy with another operation (whose end would then run twice); without one,
    /// none is made where neither `make` nor another thread's sync stream that is not
    /// doomed allows it (the caller then waits on the host).
    #[test]
    fn only_the_threads_own_idle_sync_stream_carries_a_wait() {
        let (ctx, me, other) = (0x1000, 7, 8);
        let mut book = Book::<usize>::new();
        book.add(ctx, other, || Ok((10, 11))).unwrap();
        book.entries[0].doomed = true; // its context's teardown found it busy
        let raw = ctx as CUcontext;
        assert_eq!(
            lendable(&mut book, raw, me, false),
            None,
            "a doomed sync stream proves nothing"
        );
        book.add(ctx, me, || Ok((20, 21))).unwrap();
        assert_eq!(lendable(&mut book, raw, me, false), Some(1), "its own");
        assert_eq!(lendable(&mut book, 0x2000 as CUcontext, other, false), None);
        book.entries[1].busy = true;
        assert_eq!(
            lendable(&mut book, raw, me, true),
            None,
            "busy: not lent, and no second one made"
        );
        assert_eq!(book.entries.len(), 2);
    }
}
