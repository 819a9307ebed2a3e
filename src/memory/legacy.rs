//! How this layer's synchronous operations are queued and completed (issue 28): on the
//! calling thread's lane in the context ([`context::order`](crate::context::order)), a
//! non-blocking stream of its own, with the driver's `*Async` calls. An operation that
//! reads or writes host memory synchronizes the lane before it returns (the host buffer is
//! free when the call returns); a write of device memory alone records the lane's event,
//! which every later stream scope, lane and legacy-stream operation waits for on the GPU.
//! Where no lane is used (memory the host can read directly, a context the crate keeps no
//! order for, `CUDA_BRAND_SYNC_WRITES=wait`), the operation runs on the legacy stream after
//! every pending record and is waited for on the host, as before the lanes.

use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use crate::context::order::{self, Lane};
use crate::driver::CUstream;
use crate::error::Result;

/// How a synchronous operation on device memory may be completed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Completion {
    /// On a lane, made for the context if the thread has none: the context is one the
    /// crate entered (the memory's own, a buffer's owner), whose teardown ends its lanes.
    Record,
    /// On a lane only where the context has one already (of any thread): the context is the
    /// one current on the thread, which another library may have made current (cudarc's
    /// `bind_to_thread`) and may destroy without the crate's teardown; a lane made for it
    /// then could outlive it. A lane of the context proves the crate holds it, and its
    /// teardown ends every lane of it. Without one, the legacy stream and a wait on the
    /// host.
    RecordIfKnown,
    /// The legacy stream and a wait on the host: memory the host can read directly (managed
    /// or host memory), or a context retained for one operation.
    HostWait,
}

/// What a synchronous operation touches besides device memory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    /// Device memory only (a fill, a device-to-device copy): complete for every later user
    /// through the lane's record.
    Device,
    /// Host memory too (an upload or a download): complete when it returns.
    Host,
}

/// Runs `op`, which queues a synchronous operation on the stream it is given, with `ctx`
/// current (`None`: the current context is one the crate keeps no order for), and completes
/// it as `completion` and `access` say. `op` gets a lane's stream, or null (the legacy
/// stream) after the pending records were ordered before it there.
///
/// # Safety
/// `ctx`, where given, is alive and current on the calling thread while `op` runs and
/// after; `op` queues work touching nothing that is freed before the work is complete (a
/// borrow held until the call returns, for host memory; for device memory, until every
/// later user is ordered after the lane's record, which holds for memory only the crate
/// frees or uses).
#[inline]
pub(crate) unsafe fn run<T>(
    ctx: Option<NonNull<CUctx_st>>,
    completion: Completion,
    access: Access,
    op: impl FnOnce(CUstream) -> Result<T>,
) -> Result<T> {
    let lane = match (ctx, completion) {
        (Some(ctx), Completion::Record | Completion::RecordIfKnown) => {
            // SAFETY: the caller's promise.
            unsafe { Lane::begin(ctx.as_ptr(), completion == Completion::Record) }?
        }
        _ => None,
    };
    let Some(lane) = lane else {
        return on_legacy_stream(op);
    };
    let out = match op(lane.stream()) {
        Ok(out) => out,
        Err(e) => {
            lane.abandon();
            return Err(e);
        }
    };
    match access {
        Access::Device => lane.end(true)?,
        Access::Host => {
            // SAFETY: the lane's stream is alive while the lane is in use.
            if let Err(e) = unsafe { crate::driver::stream_wait_idle(lane.stream()) } {
                lane.abandon();
                return Err(e);
            }
            lane.end(false)?;
        }
    }
    Ok(out)
}

/// Runs `op` on the legacy stream of the current context after every pending record, and
/// waits for the legacy stream on the host.
fn on_legacy_stream<T>(op: impl FnOnce(CUstream) -> Result<T>) -> Result<T> {
    order::before_legacy_op()?;
    match op(std::ptr::null_mut()) {
        Ok(out) => order::legacy_wait().map(|()| out),
        Err(e) => {
            // an operation that failed part-way may have queued work: no error path
            // returns while it may still run (the rule of `stream_wait_idle`)
            let _ = order::legacy_wait();
            Err(e)
        }
    }
}

/// Orders the legacy stream of the current context after every pending record: before
/// work the crate queues there itself (a staged copy, a peer copy, a free).
#[inline]
pub(crate) fn before_legacy_op() -> Result<()> {
    order::before_legacy_op()
}
