//! The order book of a multi-stream scope ([`Lanes`]): which ranges each stream's queued
//! operations write and read, and the event waits that order a stream after another's
//! conflicting work.

use std::sync::Mutex;

use super::lock;
use crate::context::teardown;
use crate::driver::{self, CUevent, CUstream};
use crate::error::Result;
use crate::memory::Span;
use crate::stream::in_stream_context;

/// What an access touches: device memory, or the globals of one module (written by a
/// [`KernelMut`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    Memory,
    Globals,
}

/// The order book of a multi-stream scope: the accesses queued so far (which lane, which
/// of its operations, which range, written or read), and for each lane how far it has
/// waited for each other lane. Operations are counted per lane from 1.
///
/// Before an operation on lane `me`, every earlier access by another lane that overlaps
/// one of its accesses and conflicts with it (either is a write) is waited for. After it,
/// its accesses are recorded; a write drops the records it covers (anything ordered after
/// it is ordered after them too: it waited for them, or ran after them on its own lane),
/// a read drops the same lane's reads it covers. So the book stays as small as the
/// distinct ranges in flight.
pub(crate) struct Lanes {
    state: Mutex<LaneState>,
}

struct LaneState {
    lanes: Vec<Lane>,
    records: Vec<Record>,
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

#[derive(Debug, PartialEq, Eq)]
struct Record {
    key: Key,
    start: u64,
    end: u64,
    lane: usize,
    op: u64,
    write: bool,
}

/// One access of an operation: `(key, start, end, write)`.
type Access = (Key, u64, u64, bool);

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
                records: Vec::new(),
            }),
        }
    }

    /// Records a stream-ordered allocation of `[start, start + bytes)` on lane `me`: an
    /// operation of that lane that writes the memory first.
    pub(super) fn allocated(&self, me: usize, start: u64, bytes: u64) {
        let mut state = lock(&self.state);
        state.lanes[me].ops += 1;
        let op = state.lanes[me].ops;
        state.record(me, op, (Key::Memory, start, start + bytes, true));
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
        let accesses = spans
            .iter()
            .filter(|s| s.bytes != 0)
            .map(|s| (Key::Memory, s.start, s.start + s.bytes, s.write))
            .chain(globals.map(|m| (Key::Globals, m as u64, m as u64 + 1, true)));
        let needs: Vec<(usize, u64)> = accesses
            .clone()
            .flat_map(|a| state.conflicts(me, a))
            .collect();
        for (lane, op) in needs {
            state.wait_for(me, lane, op)?;
        }
        let done = op();
        // Recorded even when the driver returned an error: the error may be an earlier
        // asynchronous operation's, and this one may still have been queued.
        state.lanes[me].ops += 1;
        let now = state.lanes[me].ops;
        for access in accesses {
            state.record(me, now, access);
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

impl LaneState {
    /// The `(lane, op)` of every earlier access by another lane that conflicts with `a`.
    fn conflicts(&self, me: usize, a: Access) -> impl Iterator<Item = (usize, u64)> + '_ {
        let (key, start, end, write) = a;
        self.records
            .iter()
            .filter(move |r| {
                r.key == key && r.lane != me && (write || r.write) && r.start < end && start < r.end
            })
            .map(|r| (r.lane, r.op))
    }

    fn record(&mut self, me: usize, op: u64, a: Access) {
        let (key, start, end, write) = a;
        self.records.retain(|r| {
            let covered = r.key == key && start <= r.start && r.end <= end;
            !(covered && (write || (!r.write && r.lane == me)))
        });
        self.records.push(Record {
            key,
            start,
            end,
            lane: me,
            op,
            write,
        });
    }

    /// Makes lane `me` wait for lane `other`'s operations up to `op`.
    fn wait_for(&mut self, me: usize, other: usize, op: u64) -> Result<()> {
        if self.lanes[me].waited[other] >= op {
            return Ok(());
        }
        let stream = self.lanes[other].stream;
        let event = match self.lanes[other].event {
            Some(e) => e,
            None => {
                // The event belongs to the stream's context: create it there, without
                // timing (`CU_EVENT_DISABLE_TIMING`). SAFETY: the stream is alive
                // (borrowed by the scope).
                let e = unsafe { in_stream_context(stream, || driver::event_create(0x2)) }?;
                self.lanes[other].event = Some(e);
                e
            }
        };
        if self.lanes[other].recorded < op {
            // SAFETY: event and stream are alive and of one context.
            unsafe { driver::event_record(event, stream) }?;
            self.lanes[other].recorded = self.lanes[other].ops;
        }
        // SAFETY: both alive, one context; the wait captures the event's latest record.
        unsafe { driver::stream_wait_event(self.lanes[me].stream, event) }?;
        self.lanes[me].waited[other] = self.lanes[other].recorded;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorCode};

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

    /// The order book's decisions, without a GPU: which earlier accesses each new access
    /// must wait for, and what stays recorded.
    #[test]
    fn the_order_book_finds_exactly_the_conflicting_accesses() {
        let lanes = Lanes::new([std::ptr::null_mut(); 3].into_iter());
        let no_op = || Ok(());
        // lane 1 allocates [0x2000, 0x2100): its first operation, a write
        lanes.allocated(1, 0x2000, 0x100);
        // lanes 0 and 2 write disjoint halves of [0x1000, 0x1100): no conflict, no wait
        lanes.run(0, &[w(0x1000, 0x80)], None, no_op).unwrap();
        lanes.run(2, &[w(0x1080, 0x80)], None, no_op).unwrap();
        {
            let state = lock(&lanes.state);
            assert_eq!(
                state
                    .conflicts(1, (Key::Memory, 0x1000, 0x1100, false))
                    .count(),
                2
            );
            assert_eq!(
                state
                    .conflicts(0, (Key::Memory, 0x1000, 0x1080, false))
                    .count(),
                0,
                "lane 0 reading what it wrote itself waits for nobody"
            );
            assert_eq!(
                state
                    .conflicts(0, (Key::Memory, 0x2000, 0x2004, false))
                    .collect::<Vec<_>>(),
                [(1, 1)],
                "reading lane 1's allocation waits for the allocation"
            );
            // reads never wait for reads
            assert_eq!(
                state
                    .conflicts(0, (Key::Memory, 0x3000, 0x3010, false))
                    .count(),
                0
            );
            // globals are their own namespace
            assert_eq!(
                state
                    .conflicts(0, (Key::Globals, 0x1000, 0x1001, true))
                    .count(),
                0
            );
        }
        // lane 0 reads its half twice: the second read replaces the first
        lanes.run(0, &[r(0x1000, 0x80)], None, no_op).unwrap();
        lanes.run(0, &[r(0x1000, 0x80)], None, no_op).unwrap();
        {
            let state = lock(&lanes.state);
            let reads = state.records.iter().filter(|r| !r.write).count();
            assert_eq!(reads, 1);
            // a write by lane 2 over lane 0's half must wait for lane 0's read and write
            let mut c: Vec<_> = state
                .conflicts(2, (Key::Memory, 0x1000, 0x1080, true))
                .collect();
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
            .records
            .iter()
            .filter(|r| r.start >= 0x1000 && r.end <= 0x1080)
            .collect();
        assert_eq!(in_half.len(), 1);
        assert_eq!(
            (in_half[0].lane, in_half[0].op, in_half[0].write),
            (0, 5, true)
        );
    }
}
