//! How this layer's synchronous operations are ordered and completed (issue 28): a
//! synchronous write into device memory is queued on the legacy stream of the context
//! current for it and completed by a record of the legacy order
//! ([`context::order`](crate::context::order)), which every later stream scope and every
//! synchronous operation of another context waits for on the GPU; a write the host may
//! observe next (managed or host memory), or one in a context the crate keeps no order for
//! (a primary context retained for one operation), is waited for on the host as before.
//! Every synchronous operation first orders its legacy stream after the pending records of
//! other contexts: memory of a pool belongs to no context, and a slice of it is written in
//! whichever context is current.

use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use crate::context::order;
use crate::error::Result;

/// How a synchronous write into device memory is completed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Completion {
    /// A record of the context's legacy order, making the context's event if it has none:
    /// the context is one the crate entered (the memory's own, a buffer's owner), whose
    /// teardown takes the event out of the book again.
    Record,
    /// A record only where the context has an event already: the context is the one current
    /// on the thread, which another library may have made current (cudarc's
    /// `bind_to_thread`) and may destroy without the crate's teardown; an event the book
    /// kept for it could outlive it. Without one, a wait on the host.
    RecordIfKnown,
    /// A wait on the host: memory the host can read directly (managed or host memory), or a
    /// context retained for one operation.
    HostWait,
}

/// Runs `write`, a synchronous write queued on the legacy stream of `ctx`, after the
/// pending records of the other contexts, then completes it as `completion` says. `ctx`
/// `None`: the current context is one the crate keeps no order for (the write is waited
/// for).
///
/// # Safety
/// `ctx`, where given, is alive and current on the calling thread while `write` runs and
/// after.
#[inline]
pub(crate) unsafe fn device_write(
    ctx: Option<NonNull<CUctx_st>>,
    completion: Completion,
    write: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let raw = ctx.map(NonNull::as_ptr);
    order::before_sync_op(raw)?;
    if let Err(e) = write() {
        // a write that failed part-way (a staged copy's later chunk) may have queued work:
        // no error path returns while it may still run (the rule of `stream_wait_idle`)
        let _ = order::legacy_wait();
        return Err(e);
    }
    match (raw, completion) {
        (None, _) | (_, Completion::HostWait) => order::legacy_wait(),
        // SAFETY: the caller's promise.
        (Some(raw), Completion::Record) => unsafe { order::after_device_write(raw, true) },
        // SAFETY: the caller's promise.
        (Some(raw), Completion::RecordIfKnown) => unsafe { order::after_device_write(raw, false) },
    }
}

/// Runs `read`, a synchronous operation on the legacy stream of `ctx` (the current
/// context; `None`: one the crate keeps no order for) that is complete when it returns (a
/// copy to the host), after the pending records of the other contexts.
#[inline]
pub(crate) fn sync_read<T>(
    ctx: Option<NonNull<CUctx_st>>,
    read: impl FnOnce() -> Result<T>,
) -> Result<T> {
    order::before_sync_op(ctx.map(NonNull::as_ptr))?;
    read()
}
