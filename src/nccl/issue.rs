//! The one path from an [`Operation`] to NCCL, for both fronts: [`ordered`] checks it and
//! orders it on its scope's stream (the ordering step every operation of a scope takes),
//! [`issue`] hands it to NCCL, alone or as a group's (`ncclGroupStart` ... `ncclGroupEnd`),
//! with the clique's agreement kept and poisoned on the way.
//!
//! A [`Pending`] is made only by [`ordered`], after its stream has waited for the pending
//! synchronous writes of its memory, so nothing reaches [`issue`] unordered.

use super::NcclType;
use super::comm::Communicator;
use super::operation::{Front, Operation, Prepared, Ranks};
use super::state::{Core, Handle};
use super::sys;
use crate::context::StreamKind;
use crate::driver::CUstream;
use crate::error::{Error, Invalid, Result};
use crate::scope::StreamScope;
use crate::span::Span;
use crate::tracker::{Access, conflicts};

/// An operation checked and ordered on its stream, to be issued: at once
/// ([`Issue::One`]) or when its group's closure returns ([`Issue::Group`]).
pub(super) struct Pending<'a> {
    comm: &'a Core,
    stream: CUstream,
    op: Prepared,
}

/// What [`issue`] queues.
pub(super) enum Issue<'p, 'a> {
    /// One operation, queued by its own NCCL call (no group around it).
    One(&'p Pending<'a>),
    /// A group's operations, queued together between `ncclGroupStart` and `ncclGroupEnd`.
    Group(&'p [Pending<'a>]),
}

/// Checks `operation` for `comm`, orders it on `scope`'s stream and hands it to `then`,
/// which issues it now or records it in a group. One brand `'ctx` for the communicator,
/// the scope and the memory, all borrowed for the scope's `'s`.
///
/// The ordering is the scope's ([`StreamScope::ordered`]): the stream first waits for the
/// pending synchronous operations on the memory the operation touches (`crate::synchronous`),
/// and in a multi-stream scope for the other streams' conflicting work, which then waits
/// for this operation. `then` runs inside that ordering, so the immediate front issues the
/// operation there. A grouped operation is queued only after `then` returns, which the
/// order agreement of a multi-stream scope cannot see: on one of its streams it is refused.
/// Waiting at record time is enough for a group: the memory is borrowed for `'s` from here
/// on, so no synchronous write of it can begin before the group queues the operation.
pub(super) fn ordered<'s, 'ctx, T: NcclType, K: StreamKind>(
    scope: &'s StreamScope<'s, '_, 'ctx, K>,
    comm: &'s Communicator<'ctx>,
    operation: Operation<'s, 'ctx, T>,
    front: Front,
    then: impl FnOnce(Pending<'s>) -> Result<()>,
) -> Result<()> {
    let what = operation.what(front);
    let at = Ranks {
        rank: comm.core.rank(),
        ranks: comm.core.ranks(),
    };
    let op = operation.check(at, what)?;
    if front == Front::Grouped && scope.is_multi_stream() {
        return Err(Error::invalid_input(
            what,
            Invalid::argument(
                "a group's operations go on scopes of one stream (Stream::scope), not on one of the streams of Stream::scope_all or scope_pair",
            ),
        ));
    }
    let pending = Pending {
        comm: &comm.core,
        stream: scope.stream().raw(),
        op,
    };
    scope.ordered(op.spans(), None, || then(pending))
}

/// Queues `what` through NCCL: checks that no operation of a group writes memory another
/// touches, admits every operation to its clique's agreement ([`Core::admit`]), and queues them
/// (a group's inside `ncclGroupStart` ... `ncclGroupEnd`, waiting for a non-blocking
/// group's end). From the first admission on, any failure leaves the cliques' agreements ahead
/// of what NCCL was given: every clique of the operations is then poisoned.
pub(super) fn issue(what: Issue<'_, '_>) -> Result<()> {
    let (pending, grouped) = match what {
        Issue::One(p) => (std::slice::from_ref(p), false),
        Issue::Group(ps) => (ps, true),
    };
    if pending.is_empty() {
        return Ok(());
    }
    refuse_overlaps(pending.iter().map(|p| &p.op))?;
    let poison_all = |e: &Error| {
        for p in pending {
            p.comm.poison(e);
        }
    };
    // Every communicator's operations run on a blocking NCCL communicator (a clique's,
    // `init_rank`'s, and the operations communicator of a pair: `pair.rs`), so a group is
    // blocking: NCCL refuses to mix blocking and non-blocking ones, which
    // `NCCL_COMM_BLOCKING` would make all one mode or the other.
    let started = pending
        .iter()
        .try_for_each(|p| p.comm.admit(&p.op.call, p.op.what))
        .and_then(|()| if grouped { sys::group_start() } else { Ok(()) });
    if let Err(e) = started {
        poison_all(&e);
        return Err(e);
    }
    let queued = if grouped {
        in_group(pending)
    } else {
        launch_all(pending)
    };
    if let Err(e) = &queued {
        poison_all(e);
    }
    queued
}

/// Queues each operation, stopping at the first that fails.
fn launch_all(pending: &[Pending<'_>]) -> Result<()> {
    for p in pending {
        // SAFETY: the communicator, the stream and the memory share one brand `'ctx`
        // (`ordered`'s signature), the primary context of the communicator's device
        // (checked when the communicator was made); all are borrowed for the scope's
        // `'scope`, so they outlive the scope's final synchronization, which comes after
        // this call (an immediate operation is issued inside the scope's call; a group's
        // scopes outlive the group, `Group::on`'s bound, and it issues before its closure's
        // caller resumes); the stream is alive (borrowed by the scope). Lengths, roots,
        // peers and an out-of-place operation's overlap were checked (`Operation::check`),
        // the peers admitted by the clique's agreement (`issue`), promised by `init_rank`'s
        // caller, or unable to write this rank's memory (`from_world`: one rank per
        // process). The stream waited for the pending synchronous operations on the
        // memory, and a multi-stream scope orders its other streams around the operation
        // (`ordered`, which alone makes a `Pending`, and refuses a grouped operation on
        // such a scope); no operation of a group writes memory another touches
        // (`refuse_overlaps`). No NCCL group is open but the one `in_group` opens, with no
        // user code running, so an operation alone is queued before the call returns
        // (operations run on blocking communicators; under `NCCL_COMM_BLOCKING=0`,
        // `launch` waits for NCCL's thread to queue it).
        unsafe { p.comm.launch(&p.op.call, p.stream, p.op.what) }?;
    }
    Ok(())
}

/// Queues a group's operations and ends the group (`ncclGroupStart` was called): the group
/// is ended even when a launch fails or panics.
fn in_group(pending: &[Pending<'_>]) -> Result<()> {
    // Should anything below panic, the group is still closed (its operations then run,
    // and the scopes, unwinding after this call, wait for them): an NCCL group left open
    // would defer every later operation of this thread past its scope's end. A
    // non-blocking group's work (`NCCL_COMM_BLOCKING=0`) is queued by NCCL's thread:
    // waited for here too, before the scopes end.
    struct EndOnUnwind<'p, 'a>(&'p [Pending<'a>]);
    impl Drop for EndOnUnwind<'_, '_> {
        fn drop(&mut self) {
            let end = || {
                // SAFETY: as for `ended` below.
                unsafe { sys::group_end() }
            };
            // SAFETY: no context to push.
            if let Ok(sys::Status::InProgress) = unsafe { sys::keep_stack(None, end) } {
                let _ = settle_all(self.0);
            }
        }
    }
    let on_unwind = EndOnUnwind(pending);
    let queued = launch_all(pending);
    std::mem::forget(on_unwind);
    let end = || {
        // SAFETY: `group_end`'s promise is the one of the launches above, whose memory,
        // streams and communicators stay borrowed beyond this call.
        unsafe { sys::group_end() }
    };
    // SAFETY: no context to push.
    let ended = unsafe { sys::keep_stack(None, end) }.and_then(|status| match status {
        sys::Status::Done => Ok(()),
        // non-blocking (`NCCL_COMM_BLOCKING=0`): a thread of NCCL's queues the group's
        // work; wait for it on every communicator of the group (or abort them) before the
        // scopes can end
        sys::Status::InProgress => settle_all(pending),
    });
    queued.and(ended)
}

/// Waits for NCCL's background work on each communicator of a non-blocking group
/// ([`Core::settle`]), each once; the first error is returned, after every communicator
/// has been waited for (or aborted).
fn settle_all(pending: &[Pending<'_>]) -> Result<()> {
    let mut first = Ok(());
    for (i, p) in pending.iter().enumerate() {
        if pending[..i].iter().any(|q| std::ptr::eq(q.comm, p.comm)) {
            continue;
        }
        let settled = p.comm.settle(Handle::Ops, "group");
        if first.is_ok() {
            first = settled;
        }
    }
    first
}

/// Refuses operations of which one writes memory another touches: a group is one
/// operation, and NCCL may run its parts concurrently. (Nothing to compare for one.)
fn refuse_overlaps<'p>(ops: impl Iterator<Item = &'p Prepared> + Clone) -> Result<()> {
    for (i, a) in ops.clone().enumerate() {
        for b in ops.clone().skip(i + 1) {
            for x in a.named_spans() {
                for y in b.named_spans() {
                    if conflicts(&Access::memory(x.1), &Access::memory(y.1)) {
                        return Err(group_overlap(a, x, b, y));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cold]
fn group_overlap(
    a: &Prepared,
    (x, sa): (&str, &Span),
    b: &Prepared,
    (y, sb): (&str, &Span),
) -> Error {
    // NCCL may run a group's operations concurrently, so memory one of them writes must
    // not be another's
    Error::invalid_input(
        "group",
        Invalid::Overlap {
            first: format!("{x} of {}", a.what).into(),
            first_range: (sa.start, sa.bytes),
            second: format!("{y} of {}", b.what).into(),
            second_range: (sb.start, sb.bytes),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::nccl::ReduceOp;
    use crate::scope::{DeviceMut, DeviceRef};

    fn prepared(op: Operation<'_, '_, u32>) -> Prepared {
        let what = op.what(Front::Grouped);
        op.check(Ranks { rank: 0, ranks: 1 }, what).unwrap()
    }

    fn send(ptr: u64, len: usize) -> Prepared {
        let src = DeviceRef::new(ptr, len);
        prepared(Operation::Send { src, peer: 0 })
    }

    fn recv(ptr: u64, len: usize) -> Prepared {
        let dst = DeviceMut::new(ptr, len);
        prepared(Operation::Recv { dst, peer: 0 })
    }

    #[test]
    fn a_group_refuses_an_operation_that_writes_memory_another_touches() {
        // a send of 0x1000..0x1008 and a receive into 0x1004..0x100c
        let (a, b) = (send(0x1000, 2), recv(0x1004, 2));
        let e = refuse_overlaps([a, b].iter()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(e.call(), "group");
        assert_eq!(
            e.invalid().unwrap().to_string(),
            "the source of Grouped::send (8 bytes at 0x1000) and the destination of Grouped::recv (8 bytes at 0x1004) overlap"
        );
        // whichever comes first, and behind other operations
        let buf = DeviceMut::new(0x1006, 1);
        let in_place = prepared(Operation::AllReduceInPlace {
            buf,
            op: ReduceOp::Sum,
        });
        let e = refuse_overlaps([recv(0x8000, 4), b, in_place].iter()).unwrap_err();
        assert!(
            e.invalid().unwrap().to_string().starts_with(
                "the destination of Grouped::recv (8 bytes at 0x1004) and the buffer of Grouped::all_reduce_in_place (4 bytes at 0x1006) overlap"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_group_lets_operations_read_the_same_memory_and_write_apart() {
        let reads = [send(0x1000, 4), send(0x1004, 4), send(0x1000, 4)];
        assert!(refuse_overlaps(reads.iter()).is_ok());
        let apart = [send(0x1000, 2), recv(0x1008, 2), recv(0x1010, 2)];
        assert!(refuse_overlaps(apart.iter()).is_ok());
        // one operation alone has nothing to compare (its own overlap is `check`'s)
        assert!(refuse_overlaps([recv(0x1000, 2)].iter()).is_ok());
        assert!(refuse_overlaps([].iter()).is_ok());
    }
}
