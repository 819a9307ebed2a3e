//! The two NCCL communicators behind a communicator of [`from_world`]: a non-blocking
//! *control* communicator and a blocking *operations* communicator split from it.
//!
//! # Why two
//!
//! A non-blocking communicator (`blocking = 0`) is what lets the crate bound NCCL's
//! initialisation, splits and finalize by a deadline: each call returns `ncclInProgress`
//! and NCCL finishes it in a thread of its own, which the crate polls
//! (`ncclCommGetAsyncError`) and aborts past the deadline. But NCCL runs *every* call of
//! such a communicator that way, operations included: `ncclGroupEndInternal` starts a
//! thread (`pthread_create`) for each non-blocking group, and each collective is a group
//! of its own (NCCL 2.28.9, group.cc). Measured on two H100s (NCCL 2.28.9), that is about
//! 55 µs per operation: 0.11 to 0.23 of raw NCCL's bus bandwidth up to 1 MiB, 0.73 at
//! 8 MiB.
//!
//! So a communicator of `from_world` is a pair. The control communicator
//! (`ncclCommInitRankConfig`, non-blocking) is made under the deadline, and right after,
//! under the same deadline, it is split (`ncclCommSplit`, colour 0, key = rank: the same
//! ranks in the same order) into the operations communicator, with `blocking = 1`. NCCL
//! runs the split itself in the parent's mode (its group takes the mode of the first
//! communicator it meets, the parent's: group.cc, `ncclAsyncLaunch`), so the split is
//! polled and bounded like the initialisation; the child it makes is blocking. Every
//! operation and group then runs on the operations communicator, queued by the calling
//! thread like raw NCCL's; the control communicator runs the splits (a split child is a
//! pair again: its control communicator split from this one's, its operations
//! communicator split from its control one) and the finalize. An abort aborts both, the
//! operations communicator first (its kernels are the ones that may be stuck); a drop
//! destroys both; [`async_error`] reads both.
//!
//! The resources are not shared (`splitShare` is left at NCCL's default, 0): whether a
//! split shares is decided by the *parent's* configuration (init.cc,
//! `ncclCommInitChildComm`), so sharing would make every later split share too, and one
//! abort flag would then end the parent with any child. Unshared, the control
//! communicator costs its own proxy thread and bootstrap; the connections and their
//! buffers are made on first use by an operation (NCCL's runtime connection, the default
//! since 2.22 where the device supports cuMem: init.cc, `runtimeConn`), which the control
//! communicator never runs.
//!
//! What a blocking operations communicator gives up: an operation's call returns when
//! NCCL has queued it, and the first operation of each algorithm also connects the ranks
//! (runtime connection), which needs the peers to issue it too: a peer that never does
//! keeps that call waiting, outside any deadline of the crate (a peer that died fails it).
//! [`Communicator::scope_within`] bounds the work once queued.
//!
//! [`from_world`]: super::Communicator::from_world
//! [`async_error`]: super::Communicator::async_error
//! [`Communicator::scope_within`]: super::Communicator::scope_within

use std::ffi::c_int;
use std::ptr::NonNull;
use std::time::Instant;

use super::NcclCode;
use super::state::Core;
use super::state::{Ended, Handle};
use super::sys::{self, ncclComm, ncclConfig};
use crate::error::{Error, ErrorCode, Result};

impl Core {
    /// Splits the control communicator (the only one of a communicator without a pair)
    /// with `colour` (`-1`: `NCCL_SPLIT_NOCOLOR`), `key` and `config` (`None`: as the
    /// parent), waiting for NCCL's background work until `deadline` (past it, or on an
    /// error, both communicators are aborted; `late()` says why for the deadline). The
    /// child, or `None` where NCCL made none.
    pub(super) fn split_raw(
        &self,
        (colour, key): (c_int, c_int),
        config: Option<ncclConfig>,
        deadline: Option<Instant>,
        what: &'static str,
        late: impl FnOnce() -> String,
    ) -> Result<Option<NonNull<ncclComm>>> {
        let parent = self.live_as(Handle::Control, what)?;
        // NCCL writes the new handle here when the split is complete, from its own thread
        // for a non-blocking parent: the slot lives on the heap until then, and is leaked
        // if the split does not complete.
        let out = Box::into_raw(Box::new(std::ptr::null_mut::<ncclComm>()));
        let split = || {
            // SAFETY: a live communicator (checked above) whose primary context is current
            // (pushed by `keep_stack`); `out` is a heap slot read and freed only below,
            // once the parent's state says the split is complete.
            unsafe { sys::comm_split(parent, colour, key, out, config) }
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let status = unsafe { sys::keep_stack(Some(self.ctx), split) };
        // Whatever the split returned, NCCL's thread may still run it: `ncclCommSplit`
        // ends its group with `NCCLCHECK(ncclGroupEndInternal())`, which lets the
        // `ncclInProgress` of a non-blocking group through, and then returns its own
        // `ncclSuccess` (NCCL 2.28.9, init.cc). The group's thread writes the slot when the
        // split is done (`ncclCommInitRankFunc`), and sets the parent's asynchronous state
        // from `ncclInProgress` (set before the thread starts) to the split's result after
        // (group.cc, `groupLaunch`). So the parent is settled every time (at once for a
        // blocking one).
        let settled = self.settle_by(Handle::Control, deadline, what, late);
        // On an error of either the slot is leaked: NCCL may not be done with it.
        status?;
        settled?;
        // SAFETY: the split is complete (the parent's state is no longer in progress, so
        // NCCL's thread has written the slot and is done with it); it came from
        // `Box::into_raw` above.
        let child = *unsafe { Box::from_raw(out) };
        Ok(NonNull::new(child))
    }

    /// Makes the operations communicator of a pair whose control communicator alone
    /// exists yet (`raw` is the control handle): splits it with colour 0 and key = rank
    /// (the same ranks, in the same order) into a blocking communicator, by `deadline`.
    /// Every rank of the control communicator calls this at once. On an error both are
    /// aborted (or the control one alone, if the child was never made).
    pub(super) fn attach_ops(
        &mut self,
        deadline: Option<Instant>,
        what: &'static str,
    ) -> Result<()> {
        let key = c_int::try_from(self.rank).unwrap_or(c_int::MAX);
        let child = self.split_raw((0, key), Some(ncclConfig::blocking()), deadline, what, || {
            "NCCL's making of the operations communicator (ncclCommSplit of the control communicator) did not finish in time (a rank that stopped?)".to_owned()
        })?;
        let Some(ops) = child else {
            let e = Error::with_detail(
                what,
                ErrorCode::Nccl(NcclCode::InternalError),
                "NCCL made no operations communicator (a split with colour 0 gave none)",
            );
            let _ = self.abort(e.clone());
            return Err(e);
        };
        self.raw = ops;
        Ok(())
    }

    /// `ncclCommFinalize` of the communicator `which`, waited for (at most the limit for
    /// the control communicator; the operations communicator is blocking). On an error,
    /// both are aborted.
    fn finalize_one(&self, which: Handle, what: &'static str) -> Result<()> {
        let raw = self.live_as(which, what)?;
        let finalize = || {
            // SAFETY: a live communicator (checked above), finalized once: the caller,
            // `finalize_all`, runs once per core and ends it.
            unsafe { sys::comm_finalize(raw) }
        };
        // SAFETY: the context is alive (the brand), current for the call.
        match unsafe { sys::keep_stack(Some(self.ctx), finalize) } {
            // done, or in progress: polled either way (at once when done)
            Ok(_) => self.settle(which, what),
            Err(e) => {
                let _ = self.abort(e.clone());
                Err(e)
            }
        }
    }

    /// Finalizes (`ncclCommFinalize`) and destroys (`ncclCommDestroy`) the communicator:
    /// the operations communicator, then the control one of a pair. Ended after it, either
    /// way (finalized, or aborted on an error).
    pub(super) fn finalize_all(&self, what: &'static str) -> Result<()> {
        let ops = self.raw;
        let control = self.control.map(|c| c.raw).filter(|&c| c != ops);
        self.finalize_one(Handle::Ops, what)?;
        if control.is_some() {
            self.finalize_one(Handle::Control, what)?;
        }
        let destroy = || {
            // SAFETY: finalized, distinct, unused from now on (`ended` is set below, and
            // the `Communicator` is consumed); every scope that used them has synchronized.
            let first = unsafe { sys::comm_destroy(ops.as_ptr()) };
            // SAFETY: as above.
            let second = control.map_or(Ok(()), |c| unsafe { sys::comm_destroy(c.as_ptr()) });
            first.and(second)
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let destroyed = unsafe { sys::keep_stack(Some(self.ctx), destroy) };
        let _ = self.ended.set(Ended::Finalized);
        destroyed
    }

    /// The end of a dropped communicator that is not a clique's: nothing once ended;
    /// `ncclCommAbort` of both where NCCL reports an asynchronous error (a dead peer: a
    /// destroy, which flushes the work, might never finish); else `ncclCommDestroy` of the
    /// operations communicator, then of the control one. Errors cannot be reported.
    pub(super) fn end_on_drop(&self) {
        if self.ended.get().is_some() {
            return; // aborted or finalized: NCCL has freed it already
        }
        if !matches!(self.async_state("Communicator::drop"), Ok(None)) {
            let _ = self.abort(Error::with_detail(
                "Communicator::drop",
                ErrorCode::NcclAborted,
                "dropped with an asynchronous error",
            ));
            return;
        }
        let ops = self.raw;
        let control = self.control.map(|c| c.raw).filter(|&c| c != ops);
        let destroy = || {
            // SAFETY: ours (not ended), distinct, and unused from now on: every scope that
            // borrowed the communicator has synchronized its stream.
            let _ = unsafe { sys::comm_destroy(ops.as_ptr()) };
            if let Some(c) = control {
                // SAFETY: as above.
                let _ = unsafe { sys::comm_destroy(c.as_ptr()) };
            }
            Ok(())
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let _ = unsafe { sys::keep_stack(Some(self.ctx), destroy) };
        let _ = self.ended.set(Ended::Finalized);
    }
}
