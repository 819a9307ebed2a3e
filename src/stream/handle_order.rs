//! [`HandleOrder`]: the order between streams of the work of one library handle whose
//! device state the library writes on every call (a cuFFT plan's work area, a cuRAND
//! generator's state), for the library modules above (features `cufft`, `curand`).
//!
//! A handle is borrowed shared by every scope that uses it (`&'scope self`, as a launch
//! borrows its kernel), so two scopes on two streams (nested, or the streams of one
//! `scope_pair`) can both queue work with it. That work writes the same device memory,
//! which the scopes' own ordering cannot see. So the handle keeps an event recorded after
//! its last call, and a call on another stream first makes that stream wait for it: the
//! handle's calls run on the GPU in the order they were queued, whatever their streams.
//! The record of the last call is one of the crate's conflict tracker
//! ([`Tracker`](crate::tracker::Tracker)): the handle's state ([`Access::STATE`]), written by
//! the stream of the call.

use std::cell::Cell;
use std::iter;

use crate::driver::{self, CUevent, CUstream};
use crate::error::Result;
use crate::tracker::{Access, Tracker};

/// `CU_EVENT_DISABLE_TIMING`: the event only orders.
const DISABLE_TIMING: u32 = 0x2;

/// An event recorded after a handle's last call, and the stream of that call. Not `Sync`
/// (a `Cell`): the handle owning it is used by one thread at a time.
pub(crate) struct HandleOrder {
    event: CUevent,
    /// The handle's state written by the stream of the last call, if its event records it:
    /// at most one record (each call's write covers the one before, which it waited for).
    last: Cell<Tracker<CUstream>>,
}

// SAFETY: an event handle, used by whichever one thread owns the handle.
unsafe impl Send for HandleOrder {}

impl HandleOrder {
    /// A new order, its event in the current context (the handle's).
    pub(crate) fn new() -> Result<HandleOrder> {
        Ok(HandleOrder {
            event: driver::event_create(DISABLE_TIMING)?,
            last: Cell::new(Tracker::new()),
        })
    }

    /// Runs `call`, which queues the handle's work on `stream`, after making `stream`
    /// wait for the handle's last call on another stream; records the event after it.
    ///
    /// # Safety
    /// `stream` is live and of the event's context.
    pub(crate) unsafe fn run(
        &self,
        stream: CUstream,
        call: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        // Whatever the call queues (a failed call may have queued part of its work), the
        // event must follow it; until it does, nothing is known of the last stream: the
        // cell holds no record meanwhile.
        let mut last = self.last.take();
        let state = iter::once(Access::STATE);
        if last.conflicting(state).any(|r| r.who != stream) {
            // SAFETY: the caller's stream; the event is ours, alive, of its context.
            if let Err(e) = unsafe { driver::stream_wait_event(stream, self.event) } {
                self.last.set(last);
                return Err(e);
            }
        }
        let called = call();
        // SAFETY: as above.
        match unsafe { driver::event_record(self.event, stream) } {
            Ok(()) => {
                last.add(Access::STATE, stream, |s| *s == stream);
                self.last.set(last);
            }
            Err(e) => {
                // No event follows the work: wait for it here, so that no later call on
                // another stream can overlap it.
                // SAFETY: the caller's stream.
                let _ = unsafe { driver::stream_wait_idle(stream) };
                called?;
                return Err(e);
            }
        }
        called
    }
}

impl Drop for HandleOrder {
    fn drop(&mut self) {
        // SAFETY: our event; the owning handle is dropped, so nothing records it again
        // (work queued before may still wait on it: the driver keeps a destroyed event's
        // pending waits valid, as cuEventDestroy documents).
        let _ = unsafe { driver::event_destroy(self.event) };
    }
}
