//! The flag that refuses driver calls inside a host function: set by `scope/host_fn/` while the
//! crate runs a host function on a driver thread, read by every wrapper (in `cu_raw!`)
//! before it touches the table. A host function must not call the driver
//! (`cuLaunchHostFunc`'s rule); the types cannot forbid it, since streams, buffers and shared
//! contexts are `Send`, so the call is refused here, at one thread-local load per call.

use std::cell::Cell;

use crate::error::{Error, ErrorCode};

thread_local! {
    /// Set while the crate runs a host function on this (a driver) thread.
    static IN_HOST_FN: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is running a host function of the crate: then the crate makes
/// no driver call (checked by every driver wrapper).
#[inline(always)]
pub(crate) fn in_host_fn() -> bool {
    IN_HOST_FN.with(Cell::get)
}

/// The error of a driver call made from inside a host function.
#[cold]
#[inline(never)]
pub(crate) fn driver_call_refused(call: &'static str) -> Error {
    Error::with_detail(
        call,
        ErrorCode::NotPermitted,
        "a host function must not call the CUDA driver (cuLaunchHostFunc's rule); cuda-brand \
         refused the call before it reached the driver",
    )
}

/// Sets [`IN_HOST_FN`] for its life: made by `scope/host_fn/` around each call of a host
/// function's closure, and put back (to what it was) when dropped, also on a panic.
pub(crate) struct HostFnFlag(bool);

impl HostFnFlag {
    /// Sets the flag on the calling thread until the value is dropped.
    pub(crate) fn set() -> Self {
        HostFnFlag(IN_HOST_FN.with(|f| f.replace(true)))
    }
}

impl Drop for HostFnFlag {
    fn drop(&mut self) {
        IN_HOST_FN.with(|f| f.set(self.0));
    }
}
