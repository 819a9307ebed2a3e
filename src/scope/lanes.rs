//! The record of queued accesses of a multi-stream scope ([`Lanes`]): which ranges each stream's queued
//! operations write and read, and the event waits that order a stream after another's
//! conflicting work.

use std::sync::Mutex;

use super::lock;
use crate::context::teardown;
use crate::driver::{self, CUevent, CUstream};
use crate::error::Result;
use crate::span::Span;
use crate::stream::in_stream_context;
use crate::tracker::{Access, Tracker};

/// The record of queued accesses of a multi-stream scope: the accesses queued so far, in a [`Tracker`]
/// whose `who` is the lane and the number of its operation ([`Op`]), and for each lane how
/// far it has waited for each other lane. Operations are counted per lane from 1.
///
/// Before an operation on lane `me`, every earlier access by another lane that conflicts
/// with one of its accesses ([`Tracker::conflicting`]) is waited for. After it, its
/// accesses are recorded ([`Tracker::add`], a lane's operation ordered after the same lane's
/// earlier ones): a write drops the records it covers, a read the same lane's reads it
/// covers. So the book stays as small as the distinct ranges in flight.
pub(crate) struct Lanes {
    state: Mutex<LaneState>,
}

struct LaneState {
    lanes: Vec<Lane>,
    tracker: Tracker<Op>,
}

// SAFETY: stream and event handles, which the driver lets any thread use, plus numbers; the
// scope that holds the book stays on its thread anyway (`ScopesStayOnTheirThread`): this
// only keeps raw pointers out of the compiler's explanation of that rule.
unsafe impl Send for LaneState {}

struct Lane {
    stream: CUstream,
    /// Operations queued so far.
    ops: u64,
    /// This lane's event (made on first need) and the op count when it was last recorded.
    event: Option<CUevent>,
    recorded: u64,
    /// For each lane, the op count of it this lane has already waited for.
    waited: Vec<u64>,
}

/// Who queued a record: `(lane, op)`, the `op`-th operation of lane `lane`.
type Op = (usize, u64);

/// Records `access` by operation `who`, ordered after its own lane's earlier operations.
fn add(tracker: &mut Tracker<Op>, who: Op, access: Access) {
    tracker.add(access, who, |r: &Op| r.0 == who.0);
}

impl Lanes {
    pub(crate) fn new(streams: impl ExactSizeIterator<Item = CUstream>) -> Self {
        let n = streams.len();
        let lanes = streams
            .map(|stream| Lane {
                stream,
                ops: 0,
                event: None,
                recorded: 0,
                waited: vec![0; n],
            })
            .collect();
        Lanes {
            state: Mutex::new(LaneState {
                lanes,
                tracker: Tracker::new(),
            }),
        }
    }

    /// Records a stream-ordered allocation of `[start, start + bytes)` on lane `me`: an
    /// operation of that lane that writes the memory first.
    pub(super) fn allocated(&self, me: usize, start: u64, bytes: u64) {
        let mut state = lock(&self.state);
        state.lanes[me].ops += 1;
        let op = state.lanes[me].ops;
        let span = Span {
            start,
            bytes,
            write: true,
        };
        add(&mut state.tracker, (me, op), Access::memory(&span));
    }

    /// Runs `op` on lane `me` after the waits its accesses need, then records them.
    pub(super) fn run(
        &self,
        me: usize,
        spans: &[Span],
        globals: Option<usize>,
        op: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut state = lock(&self.state);
        let LaneState { lanes, tracker } = &mut *state;
        let accesses = spans
            .iter()
            .filter(|s| s.bytes != 0)
            .map(Access::memory)
            .chain(globals.map(Access::globals));
        for r in tracker.conflicting(accesses.clone()) {
            if r.who.0 != me {
                wait_for(lanes, me, r.who)?;
            }
        }
        let done = op();
        // Recorded even when the driver returned an error: the error may be an earlier
        // asynchronous operation's, and this one may still have been queued.
        lanes[me].ops += 1;
        let now = lanes[me].ops;
        for access in accesses {
            add(tracker, (me, now), access);
        }
        done
    }

    /// Destroys the lanes' events (after every stream is idle).
    pub(crate) fn destroy_events(&self) -> Result<()> {
        let mut first = Ok(());
        for lane in &mut lock(&self.state).lanes {
            if let Some(e) = lane.event.take() {
                // SAFETY: created by `wait_for`; every stream of the scope is synchronized,
                // so no record or wait of it is pending.
                first = teardown::keep_both(first, unsafe { driver::event_destroy(e) });
            }
        }
        first
    }
}

/// Makes lane `me` wait for lane `other`'s operations up to `op`.
fn wait_for(lanes: &mut [Lane], me: usize, (other, op): Op) -> Result<()> {
    if lanes[me].waited[other] >= op {
        return Ok(());
    }
    let stream = lanes[other].stream;
    let event = match lanes[other].event {
        Some(e) => e,
        None => {
            // The event belongs to the stream's context: create it there, without
            // timing (`CU_EVENT_DISABLE_TIMING`). SAFETY: the stream is alive
            // (borrowed by the scope).
            let e = unsafe { in_stream_context(stream, || driver::event_create(0x2)) }?;
            lanes[other].event = Some(e);
            e
        }
    };
    if lanes[other].recorded < op {
        // SAFETY: event and stream are alive and of one context.
        unsafe { driver::event_record(event, stream) }?;
        lanes[other].recorded = lanes[other].ops;
    }
    // SAFETY: both alive, one context; the wait captures the event's latest record.
    unsafe { driver::stream_wait_event(lanes[me].stream, event) }?;
    lanes[me].waited[other] = lanes[other].recorded;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorCode};
    use crate::tracker::mem;

    impl LaneState {
        /// The `(lane, op)` of every earlier access by another lane that conflicts with `a`.
        fn conflicts(&self, me: usize, a: Access) -> impl Iterator<Item = Op> + '_ {
            let one = std::iter::once(a);
            self.tracker
                .conflicting(one)
                .filter(move |r| r.who.0 != me)
                .map(|r| r.who)
        }
    }

    fn w(start: u64, bytes: u64) -> Span {
        Span {
            start,
            bytes,
            write: true,
        }
    }

    fn r(start: u64, bytes: u64) -> Span {
        Span {
            start,
            bytes,
            write: false,
        }
    }

    /// The record's decisions, without a GPU: which earlier accesses each new access
    /// must wait for, and what stays recorded.
    #[test]
    fn the_record_of_lanes_finds_exactly_the_conflicting_accesses() {
        let lanes = Lanes::new([std::ptr::null_mut(); 3].into_iter());
        let no_op = || Ok(());
        // lane 1 allocates [0x2000, 0x2100): its first operation, a write
        lanes.allocated(1, 0x2000, 0x100);
        // lanes 0 and 2 write disjoint halves of [0x1000, 0x1100): no conflict, no wait
        lanes.run(0, &[w(0x1000, 0x80)], None, no_op).unwrap();
        lanes.run(2, &[w(0x1080, 0x80)], None, no_op).unwrap();
        {
            let state = lock(&lanes.state);
            assert_eq!(state.conflicts(1, mem(0x1000, 0x1100, false)).count(), 2);
            assert_eq!(
                state.conflicts(0, mem(0x1000, 0x1080, false)).count(),
                0,
                "lane 0 reading what it wrote itself waits for nobody"
            );
            assert_eq!(
                state
                    .conflicts(0, mem(0x2000, 0x2004, false))
                    .collect::<Vec<_>>(),
                [(1, 1)],
                "reading lane 1's allocation waits for the allocation"
            );
            // reads never wait for reads
            assert_eq!(state.conflicts(0, mem(0x3000, 0x3010, false)).count(), 0);
            // globals are their own namespace
            assert_eq!(state.conflicts(0, Access::globals(0x1000)).count(), 0);
        }
        // lane 0 reads its half twice: the second read replaces the first
        lanes.run(0, &[r(0x1000, 0x80)], None, no_op).unwrap();
        lanes.run(0, &[r(0x1000, 0x80)], None, no_op).unwrap();
        {
            let state = lock(&lanes.state);
            let reads = state
                .tracker
                .records()
                .iter()
                .filter(|r| !r.access.write)
                .count();
            assert_eq!(reads, 1);
            // a write by lane 2 over lane 0's half must wait for lane 0's read and write
            let mut c: Vec<_> = state.conflicts(2, mem(0x1000, 0x1080, true)).collect();
            c.sort();
            assert_eq!(c, [(0, 1), (0, 3)]);
        }
        // an operation that fails is recorded all the same (it may have been queued)
        let e = lanes.run(0, &[r(0x1000, 4)], None, || {
            Err(Error::new("x", ErrorCode::Unknown))
        });
        assert!(e.is_err());
        assert_eq!(lock(&lanes.state).lanes[0].ops, 4);
        // lane 0 writes the whole range it owns: the records it covers are dropped
        lanes.run(0, &[w(0x1000, 0x80)], None, no_op).unwrap();
        let state = lock(&lanes.state);
        let in_half: Vec<_> = state
            .tracker
            .records()
            .iter()
            .filter(|r| r.access.start >= 0x1000 && r.access.end <= 0x1080)
            .collect();
        assert_eq!(in_half.len(), 1);
        assert_eq!(
            (in_half[0].who.0, in_half[0].who.1, in_half[0].access.write),
            (0, 5, true)
        );
    }
}
