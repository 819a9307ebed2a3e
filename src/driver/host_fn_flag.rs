//! The flag that refuses driver calls inside a host function: set by `scope/host_fn/` while the
//! crate runs a host function on a driver thread, read by every wrapper (in `cu_raw!`)
//! before it touches the table. A host function must not call the driver
//! (`cuLaunchHostFunc`'s rule); the types cannot forbid it, since streams, buffers and shared
//! contexts are `Send`, so the call is refused here, at one thread-local load per call.
//!
//! The same thread-local word counts the partitioned closures running on the thread (the
//! context layer's rule that no other context is entered inside one: `context::partition`),
//! so that entering a context checks both rules with one load ([`refuses_nothing`]).

use std::cell::Cell;

use crate::error::{Error, ErrorCode};

thread_local! {
    /// What this thread refuses: [`HOST_FN`] while the crate runs a host function on this (a
    /// driver) thread; above it, in units of [`ONE_PARTITIONED`], how many partitioned
    /// closures run on this thread.
    static REFUSALS: Cell<u32> = const { Cell::new(0) };
}

/// The bit of [`REFUSALS`] set while a host function of the crate runs on the thread.
const HOST_FN: u32 = 1;
/// One partitioned closure in [`REFUSALS`]'s count.
const ONE_PARTITIONED: u32 = 2;

/// Whether the calling thread is running a host function of the crate: then the crate makes
/// no driver call (checked by every driver wrapper).
#[inline(always)]
pub(crate) fn in_host_fn() -> bool {
    REFUSALS.with(Cell::get) & HOST_FN != 0
}

/// Whether the calling thread runs neither a host function of the crate nor a partitioned
/// closure: one thread-local load for both of the checks made before a context is entered.
#[inline(always)]
pub(crate) fn refuses_nothing() -> bool {
    REFUSALS.with(Cell::get) == 0
}

/// How many partitioned closures run on the calling thread.
#[inline]
pub(crate) fn partitioned_closures() -> u32 {
    REFUSALS.with(Cell::get) / ONE_PARTITIONED
}

/// Counts a partitioned closure beginning on the calling thread (balanced by
/// [`partitioned_closure_ends`] when it ends).
#[inline]
pub(crate) fn partitioned_closure_begins() {
    REFUSALS.with(|r| r.set(r.get() + ONE_PARTITIONED));
}

/// Counts a partitioned closure of the calling thread ending.
#[inline]
pub(crate) fn partitioned_closure_ends() {
    REFUSALS.with(|r| r.set(r.get() - ONE_PARTITIONED));
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

/// Sets the host-function flag for its life: made by `scope/host_fn/` around each call of a
/// host function's closure, and put back (to what it was) when dropped, also on a panic. The
/// flag is thus set only while a frame that made one runs: code that found it clear finds it
/// clear again whenever it runs on, which is what a pop after a checked push relies on
/// (`Pushed::pop`).
pub(crate) struct HostFnFlag(bool);

impl HostFnFlag {
    /// Sets the flag on the calling thread until the value is dropped.
    pub(crate) fn set() -> Self {
        HostFnFlag(REFUSALS.with(|r| {
            let before = r.get();
            r.set(before | HOST_FN);
            before & HOST_FN != 0
        }))
    }
}

impl Drop for HostFnFlag {
    fn drop(&mut self) {
        let flag = if self.0 { HOST_FN } else { 0 };
        REFUSALS.with(|r| r.set((r.get() & !HOST_FN) | flag));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_and_the_count_share_one_word_without_mixing() {
        assert!(refuses_nothing());
        partitioned_closure_begins();
        assert!(!refuses_nothing() && !in_host_fn());
        assert_eq!(partitioned_closures(), 1);
        {
            let _outer = HostFnFlag::set();
            let inner = HostFnFlag::set();
            assert!(in_host_fn());
            drop(inner);
            assert!(in_host_fn(), "an inner flag puts back the outer one's");
            assert_eq!(partitioned_closures(), 1);
        }
        assert!(!in_host_fn());
        partitioned_closure_ends();
        assert!(refuses_nothing());
        assert_eq!(partitioned_closures(), 0);
    }
}
