//! Wrappers: streams, events, and the host functions and callbacks queued on a stream.
//! Handles passed in are live: the callers hold their brand.

use std::ffi::c_void;

use super::{CUcontext, CUevent, CUstream, check, raw_code};
use crate::error::{ErrorCode, Result};

/// `CUDA_ERROR_NOT_READY`: what `cuStreamQuery` and `cuEventQuery` return for "busy".
const NOT_READY: u32 = raw_code(ErrorCode::NotReady);

/// Outcome of a query: `Ok(true)` done, `Ok(false)` still busy.
#[inline]
fn ready(call: &'static str, raw: u32) -> Result<bool> {
    if raw == NOT_READY {
        Ok(false)
    } else {
        check(call, raw).map(|()| true)
    }
}

/// Waits until `s` has no work left. `cuStreamSynchronize` returns when the stream's work
/// is complete, possibly reporting an error of an earlier asynchronous operation; an error
/// of the wait itself would leave that open, so after any error the stream is polled until
/// it is no longer busy: no error path returns while queued work may still run. Returns
/// the wait's result.
///
/// # Safety
/// `s` is live (or null: the current context's legacy stream).
pub(crate) unsafe fn stream_wait_idle(s: CUstream) -> Result<()> {
    // SAFETY: the caller guarantees the stream.
    let synced = unsafe { stream_synchronize(s) };
    if synced.is_err() {
        // SAFETY: as above.
        while let Ok(false) = unsafe { stream_query(s) } {
            std::thread::yield_now();
        }
    }
    synced
}

/// Creates a stream in the current context.
#[inline]
pub(crate) fn stream_create(flags: u32, priority: i32) -> Result<CUstream> {
    let mut s = std::ptr::null_mut();
    cu!(cuStreamCreateWithPriority(&mut s, flags, priority))?;
    Ok(s)
}

/// # Safety
/// `s` is a stream this crate created and nothing uses it afterwards.
#[inline]
pub(crate) unsafe fn stream_destroy(s: CUstream) -> Result<()> {
    cu!(cuStreamDestroy_v2(s))
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_synchronize(s: CUstream) -> Result<()> {
    cu!(cuStreamSynchronize(s))
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_query(s: CUstream) -> Result<bool> {
    ready("cuStreamQuery", cu_raw!(cuStreamQuery(s))?)
}

/// # Safety
/// `s` and `e` are live.
#[inline]
pub(crate) unsafe fn stream_wait_event(s: CUstream, e: CUevent) -> Result<()> {
    cu!(cuStreamWaitEvent(s, e, 0))
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_priority(s: CUstream) -> Result<i32> {
    let mut p = 0;
    cu!(cuStreamGetPriority(s, &mut p))?;
    Ok(p)
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_flags(s: CUstream) -> Result<u32> {
    let mut f = 0;
    cu!(cuStreamGetFlags(s, &mut f))?;
    Ok(f)
}

/// Creates an event in the current context.
#[inline]
pub(crate) fn event_create(flags: u32) -> Result<CUevent> {
    let mut e = std::ptr::null_mut();
    cu!(cuEventCreate(&mut e, flags))?;
    Ok(e)
}

/// # Safety
/// `e` is an event this crate created and nothing uses it afterwards.
#[inline]
pub(crate) unsafe fn event_destroy(e: CUevent) -> Result<()> {
    cu!(cuEventDestroy_v2(e))
}

/// # Safety
/// `e` and `s` are live and of the same context.
#[inline]
pub(crate) unsafe fn event_record(e: CUevent, s: CUstream) -> Result<()> {
    cu!(cuEventRecord(e, s))
}

/// # Safety
/// `e` is live.
#[inline]
pub(crate) unsafe fn event_synchronize(e: CUevent) -> Result<()> {
    cu!(cuEventSynchronize(e))
}

/// # Safety
/// `e` is live.
#[inline]
pub(crate) unsafe fn event_query(e: CUevent) -> Result<bool> {
    ready("cuEventQuery", cu_raw!(cuEventQuery(e))?)
}

/// # Safety
/// `start` and `end` are live.
#[inline]
pub(crate) unsafe fn event_elapsed_ms(start: CUevent, end: CUevent) -> Result<f32> {
    let mut ms = 0.0;
    cu!(cuEventElapsedTime(&mut ms, start, end))?;
    Ok(ms)
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_get_ctx(s: CUstream) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    cu!(cuStreamGetCtx(s, &mut c))?;
    Ok(c)
}

/// Queues a call of `f(data)` on `s`, after the work queued before it.
///
/// # Safety
/// `s` is live; `f` may be called with `data` on a driver thread until the stream has
/// passed it (or never, after an error of the context), and `data` stays valid for it.
#[inline]
pub(crate) unsafe fn launch_host_func(
    s: CUstream,
    f: unsafe extern "C" fn(*mut c_void),
    data: *mut c_void,
) -> Result<()> {
    cu!(cuLaunchHostFunc(s, Some(f), data))
}

/// Queues a call of `f(s, status, data)` on `s`, after the work queued before it
/// (`cuStreamAddCallback(s, f, data, 0)`). Unlike a host function, which the driver never
/// runs after an error of the context, a callback queued before the error is called with
/// that error as `status`; queueing one after the error is known returns the error.
/// Refused in a stream capture.
///
/// # Safety
/// `s` is live; `f` may be called with `data` on a driver thread once the stream has passed
/// it (or never, if this returns an error), and `data` stays valid for it; `f` makes no
/// driver call.
///
/// # References
/// <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html>
#[inline]
pub(crate) unsafe fn stream_add_callback(
    s: CUstream,
    f: unsafe extern "C" fn(CUstream, u32, *mut c_void),
    data: *mut c_void,
) -> Result<()> {
    cu!(cuStreamAddCallback(s, Some(f), data, 0))
}
