//! What a communicator is without its brand ([`Core`]: its handles, where it came from, a
//! clique's shared state) and its life after it is made: live, or ended (aborted,
//! finalized), and the waits for NCCL's background work of a non-blocking communicator.
//!
//! # Why a communicator can end under a shared borrow
//!
//! `ncclCommAbort` frees the communicator: its handle is dangling afterwards. The crate
//! aborts a communicator while operations borrow it (the overrun handler of
//! [`Communicator::scope_within`](super::Communicator::scope_within) runs while the scope
//! borrows it shared), so the end is a state of the communicator, set once through
//! `&Core` ([`Core::ended`]): `Communicator` is not `Sync`, so the cell is only ever
//! reached from one thread. A communicator of `from_world` is a pair of NCCL's (the
//! non-blocking control communicator and the blocking one its operations run on: see
//! `pair.rs`), which ends as one: an abort aborts both, a finalize finalizes both. Every
//! use of either handle asks [`Core::live_as`] (or [`Core::live`], for the operations
//! handle) first, which refuses an ended communicator with [`ErrorCode::NcclAborted`]:
//! the operations and groups ([`Core::launch`]), [`async_error`](super::Communicator::async_error),
//! the raw handle (null once ended), [`split`](super::Communicator::split), `finalize`,
//! `abort`, and the drop, which neither destroys an ended communicator nor hands an aborted
//! one back to its clique (the clique then leaves that rank alone when it is dropped).

use std::ptr::NonNull;
use std::time::{Duration, Instant};

use std::cell::OnceCell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cuda_driver_sys::CUctx_st;

use super::NcclCode;
use super::agreement::Agreement;
use super::sys::{self, ncclComm, ncclComm_t};
use crate::context::Device;
use crate::driver;
use crate::error::{Error, ErrorCode, Result};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a `Communicator` is, without its brand.
pub(crate) struct Core {
    /// NCCL's handle: valid while `ended` is empty, freed by NCCL once it is set (an
    /// abort), so every use goes through [`Core::live`].
    pub(super) raw: NonNull<ncclComm>,
    /// The primary context of `device`, which NCCL uses (see [`sys::keep_stack`]).
    pub(super) ctx: NonNull<CUctx_st>,
    pub(super) rank: usize,
    pub(super) ranks: usize,
    pub(super) device: Device,
    pub(super) origin: Origin,
    /// The non-blocking control communicator of a pair (made by `from_world`, or split
    /// from one; see `pair.rs`), beside `raw`, the blocking one that runs the
    /// operations; `None` for a clique's and `init_rank`'s (blocking, one communicator).
    pub(super) control: Option<Control>,
    /// Set once, when the communicator is aborted or finalized: from then on the handle is
    /// not NCCL's any more, and every call is refused ([`Core::live`]).
    pub(super) ended: OnceCell<Ended>,
}

/// The control communicator of a pair: non-blocking, used for what must be bounded by a
/// deadline (its initialisation, splits, finalize), never for an operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Control {
    /// NCCL's handle: valid while the owning [`Core`]'s `ended` is empty. Equal to the
    /// core's `raw` only while a pair is being made (before its operations communicator
    /// exists).
    pub(super) raw: NonNull<ncclComm>,
    /// The longest NCCL's background work of one call (the initialisation's rest, a
    /// split, a finalize) may take before the communicator is aborted.
    pub(super) limit: Duration,
}

pub(super) enum Origin {
    /// Rank `rank` of a clique: handed back to it when dropped.
    Clique(Arc<CliqueState>),
    /// From `ncclCommInitRank`, or split from such a communicator: destroyed when dropped.
    Rank,
    /// From `from_world` (one rank per process, a control and operations pair), or split
    /// from such a communicator: both destroyed when dropped.
    World,
}

// SAFETY: an NCCL communicator may be used from any thread, one at a time (the
// `Communicator` that owns a `Core` is not `Sync`, and the group that borrows one stays on
// its thread); the context handle is a process-wide value; `ended` is plain data.
unsafe impl Send for Core {}
// SAFETY: the crate shares a `&Core` only through a `Communicator`, which is not `Sync`
// (its marker), or inside a group, which stays on its thread: `ended` (a `OnceCell`, set
// through `&Core` by an abort) is only ever reached from the one thread that holds the
// communicator. This impl only keeps the raw pointers and the cell out of the compiler's
// explanation of that rule.
unsafe impl Sync for Core {}

pub(super) struct CliqueState {
    pub(super) devices: Vec<Device>,
    /// The primary context of each rank's device, retained for the clique's lifetime.
    pub(super) primaries: Vec<NonNull<CUctx_st>>,
    pub(super) comms: Vec<NonNull<ncclComm>>,
    /// Each rank's communicator: free to claim, claimed, or aborted.
    pub(super) slots: Mutex<Vec<Slot>>,
    pub(super) agreement: Mutex<Agreement>,
}

/// A rank of a clique, as `Clique::communicator` finds it.
pub(super) enum Slot {
    /// Not claimed at the moment.
    Free(NonNull<ncclComm>),
    /// Held by a `Communicator`.
    Claimed,
    /// Aborted by the communicator that held it: NCCL has freed it.
    Aborted,
}

// SAFETY: handles only, whose use is serialized: a communicator is used by the one
// `Communicator` that claimed it (not `Sync`) or, unclaimed, by nobody until the state's
// drop destroys it; the slots and the agreement are behind locks.
unsafe impl Send for CliqueState {}
// SAFETY: as above: `&CliqueState` only reaches the locked slots and agreement.
unsafe impl Sync for CliqueState {}

impl Drop for CliqueState {
    fn drop(&mut self) {
        // Every communicator is back (each holds an `Arc` of the state), and none is in use:
        // their scopes have synchronized. An aborted one is NCCL's no more.
        let slots = std::mem::take(&mut *lock(&self.slots));
        for ((comm, primary), slot) in self.comms.iter().zip(&self.primaries).zip(slots) {
            if matches!(slot, Slot::Aborted) {
                continue;
            }
            let destroy = || {
                // SAFETY: the communicator is ours and unused.
                unsafe { sys::comm_destroy(comm.as_ptr()) }
            };
            // SAFETY: the primary context is retained by the clique until below.
            let _ = unsafe { sys::keep_stack(Some(*primary), destroy) };
        }
        for device in &self.devices {
            // SAFETY: balances the retain of `Clique::new`; the communicators are gone.
            let _ = unsafe { driver::primary_ctx_release(device.as_raw()) };
        }
    }
}

/// How a communicator ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// `ncclCommAbort`, for this reason.
    Aborted(Error),
    /// `ncclCommFinalize` and `ncclCommDestroy`.
    Finalized,
}

/// Which communicator of a [`Core`] a call is for: the one that runs the operations
/// (`raw`, blocking for every kind of communicator), or the control communicator of a
/// pair (non-blocking; for a communicator without one, the same as `Ops`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handle {
    Ops,
    Control,
}

impl Core {
    /// The operations handle, if the communicator has not ended; else the refusal, naming
    /// `what`.
    pub(crate) fn live(&self, what: &'static str) -> Result<ncclComm_t> {
        self.live_as(Handle::Ops, what)
    }

    /// The handle `which`, if the communicator has not ended; else the refusal, naming
    /// `what`.
    pub(crate) fn live_as(&self, which: Handle, what: &'static str) -> Result<ncclComm_t> {
        match self.ended.get() {
            None => Ok(self.handle(which).as_ptr()),
            Some(Ended::Aborted(why)) => Err(Error::with_detail(
                what,
                ErrorCode::NcclAborted,
                format!("the communicator was aborted ({why}) and refuses every call"),
            )),
            Some(Ended::Finalized) => Err(Error::with_detail(
                what,
                ErrorCode::NcclAborted,
                "the communicator was finalized",
            )),
        }
    }

    /// The handle `which`, live or not (callers check `ended`).
    pub(super) fn handle(&self, which: Handle) -> NonNull<ncclComm> {
        match (which, self.control) {
            (Handle::Control, Some(control)) => control.raw,
            _ => self.raw,
        }
    }

    /// The longest one call's background work may take: the control communicator's limit,
    /// or none for a communicator without one (blocking: its calls return when done).
    pub(super) fn limit(&self) -> Duration {
        self.control.map_or(Duration::MAX, |c| c.limit)
    }

    /// NCCL's asynchronous state of the communicator (`ncclCommGetAsyncError`): `None`
    /// when healthy, `Some(InProgress)` while a non-blocking call runs on, the error code
    /// otherwise. The operations communicator's state (where the errors of its work land:
    /// its proxy's, its transports'), then the control communicator's if that one is
    /// healthy. Refused once the communicator has ended.
    pub(crate) fn async_state(&self, what: &'static str) -> Result<Option<NcclCode>> {
        match self.state_of(Handle::Ops, what)? {
            None if self.control.is_some() => self.state_of(Handle::Control, what),
            state => Ok(state),
        }
    }

    /// [`Core::async_state`] of the one communicator `which`.
    pub(crate) fn state_of(&self, which: Handle, what: &'static str) -> Result<Option<NcclCode>> {
        let raw = self.live_as(which, what)?;
        let poll = || {
            // SAFETY: a live communicator (checked by `live_as`).
            unsafe { sys::comm_async_error(raw) }
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let state = unsafe { sys::keep_stack(Some(self.ctx), poll) }?;
        Ok(NcclCode::from_raw(state))
    }

    /// Aborts the communicator (`ncclCommAbort`) for `why`, once: the operations
    /// communicator first (NCCL stops its work on the GPU, so the streams it was queued on
    /// become idle, and frees it), then the control communicator of a pair (which joins
    /// any background work of its own). Every later call is refused with `why`
    /// ([`Core::live`]). A clique's agreement is poisoned: its other ranks' peer is gone. A
    /// communicator that has ended already is left alone (`Ok`); the error is
    /// `ncclCommAbort`'s own (the first), after which the handles are NCCL's no more
    /// either.
    pub(crate) fn abort(&self, why: Error) -> Result<()> {
        if self.ended.get().is_some() {
            return Ok(());
        }
        let ops = self.raw.as_ptr();
        let control = self.control.map(|c| c.raw.as_ptr()).filter(|&c| c != ops);
        let abort = || {
            // SAFETY: live communicators (not ended), distinct (filtered above), which
            // nothing uses after this call: `ended` is set below, before anything else
            // runs on this thread, and every use of a handle asks `live_as` first. Queued
            // work may still name the operations communicator: NCCL makes that work end.
            let first = unsafe { sys::comm_abort(ops) };
            // SAFETY: as above.
            let second = control.map_or(Ok(()), |c| unsafe { sys::comm_abort(c) });
            first.and(second)
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let aborted = unsafe { sys::keep_stack(Some(self.ctx), abort) };
        self.poison(&why);
        let _ = self.ended.set(Ended::Aborted(why));
        aborted
    }

    /// Waits for NCCL's background work on the communicator `which` (after a call that
    /// may still run on) for at most the communicator's limit ([`Core::limit`]); see
    /// [`Core::settle_by`].
    pub(crate) fn settle(&self, which: Handle, what: &'static str) -> Result<()> {
        let limit = self.limit();
        self.settle_by(which, Instant::now().checked_add(limit), what, || {
            format!(
                "NCCL's background work did not finish within {limit:?} (a peer that stopped, or never issued its side?)"
            )
        })
    }

    /// Polls the state of the communicator `which` until it is no longer in progress (`Ok`
    /// once healthy), or `deadline` passes (`None`: never). Past the deadline, or on an
    /// error, the communicator (both of a pair) is aborted, and the error names `what` and
    /// the cause (`late()` for the deadline: [`ErrorCode::NcclTimeout`]; NCCL's code and
    /// message for an error).
    pub(crate) fn settle_by(
        &self,
        which: Handle,
        deadline: Option<Instant>,
        what: &'static str,
        late: impl FnOnce() -> String,
    ) -> Result<()> {
        let state = poll_until(deadline, || match self.state_of(which, what)? {
            Some(NcclCode::InProgress) => Ok(None),
            other => Ok(Some(other)),
        })?;
        let (rank, ranks) = (self.rank, self.ranks);
        let e = match state {
            Some(None) => return Ok(()),
            Some(Some(code)) => {
                let e = sys::failure("ncclCommGetAsyncError", code);
                Error::with_detail(
                    what,
                    e.code(),
                    format!(
                        "rank {rank} of {ranks}: NCCL failed ({e}); the communicator is aborted"
                    ),
                )
            }
            None => Error::with_detail(
                what,
                ErrorCode::NcclTimeout,
                format!(
                    "rank {rank} of {ranks}: {}; the communicator is aborted",
                    late()
                ),
            ),
        };
        let _ = self.abort(e.clone());
        Err(e)
    }
}

/// Calls `f` until it returns `Some` (that value) or `deadline` passes (`None`; a `None`
/// deadline never passes), through the crate's one polling loop
/// ([`poll_with`](crate::stream::poll_with)) with [`background_pause`]. An error of `f`
/// ends the wait.
pub(crate) fn poll_until<T>(
    deadline: Option<Instant>,
    f: impl FnMut() -> Result<Option<T>>,
) -> Result<Option<T>> {
    crate::stream::poll_with(Instant::now(), deadline, background_pause, f)
}

/// The pause between two polls of NCCL's background work after `waited`: none (yield the
/// thread) for the first 100 µs, as NCCL's thread usually finishes a short job within that;
/// then as long as the sleeps so far (the time waited past those 100 µs), at least 20 µs
/// and at most 20 ms, so the pauses double from 20 µs.
fn background_pause(waited: Duration) -> Option<Duration> {
    const YIELD_FOR: Duration = Duration::from_micros(100);
    const FIRST: Duration = Duration::from_micros(20);
    const LONGEST: Duration = Duration::from_millis(20);
    let slept = waited.checked_sub(YIELD_FOR)?;
    Some(slept.clamp(FIRST, LONGEST))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn polling_returns_the_first_value_and_gives_up_at_the_deadline() {
        let calls = Cell::new(0);
        let got = poll_until(None, || {
            calls.set(calls.get() + 1);
            Ok((calls.get() == 4).then_some("done"))
        })
        .unwrap();
        assert_eq!((got, calls.get()), (Some("done"), 4));

        let start = Instant::now();
        let limit = Duration::from_millis(60);
        let got: Option<()> = poll_until(Some(start + limit), || Ok(None)).unwrap();
        assert_eq!(got, None);
        let took = start.elapsed();
        assert!(
            took >= limit && took < limit + Duration::from_millis(500),
            "{took:?}"
        );

        let e =
            poll_until::<()>(None, || Err(Error::new("f", ErrorCode::InvalidInput))).unwrap_err();
        assert_eq!(e.call(), "f");
    }

    #[test]
    fn the_background_pauses_yield_first_then_double_from_20_us_to_20_ms() {
        let us = Duration::from_micros;
        assert_eq!(background_pause(us(0)), None);
        assert_eq!(background_pause(us(99)), None);
        assert_eq!(background_pause(us(100)), Some(us(20)));
        assert_eq!(background_pause(us(140)), Some(us(40)));
        assert_eq!(background_pause(us(180)), Some(us(80)));
        assert_eq!(background_pause(Duration::from_secs(5)), Some(us(20_000)));
    }
}
