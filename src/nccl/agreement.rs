//! The agreement of a [`Clique`](super::Clique): what each rank of its communicators has
//! issued, so that an operation the other ranks did not issue the same way is refused
//! before NCCL sees it (NCCL would wait for it forever).

use std::collections::{HashMap, VecDeque};
use std::ffi::c_int;

use super::ReduceOp;
use super::sys::{Call, OpKind};
use crate::error::{Error, ErrorCode, Invalid, Result};

/// What one rank's operation must agree on with its peers': for a collective, everything
/// but the buffers; for a send or receive, the element type and count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    kind: OpKind,
    datatype: c_int,
    count: usize,
    op: c_int,
    root: c_int,
}

impl Shape {
    fn describe(&self) -> String {
        let what = match self.kind {
            OpKind::AllReduce => "all-reduce",
            OpKind::Broadcast => "broadcast",
            OpKind::Reduce => "reduce",
            OpKind::AllGather => "all-gather",
            OpKind::ReduceScatter => "reduce-scatter",
            OpKind::Send | OpKind::Recv => "send/receive",
        };
        let mut text = format!("{what} of {} {}", self.count, datatype_name(self.datatype));
        if matches!(
            self.kind,
            OpKind::AllReduce | OpKind::Reduce | OpKind::ReduceScatter
        ) {
            if let Some(op) = ReduceOp::from_raw(self.op) {
                text.push_str(&format!(" ({op:?})"));
            }
        }
        if matches!(self.kind, OpKind::Broadcast | OpKind::Reduce) {
            text.push_str(&format!(" rooted at rank {}", self.root));
        }
        text
    }
}

fn is_p2p(kind: OpKind) -> bool {
    matches!(kind, OpKind::Send | OpKind::Recv)
}

fn datatype_name(datatype: c_int) -> &'static str {
    match datatype {
        0 => "i8",
        1 => "u8",
        2 => "i32",
        3 => "u32",
        4 => "i64",
        5 => "u64",
        7 => "f32",
        8 => "f64",
        _ => "elements",
    }
}

/// The sequence of operations that the ranks of one stream must agree on, as far as some
/// rank has issued it: `entries[i]` is operation `base + i`, `next[p]` the next operation
/// of participant `p`. Entries every participant has passed are dropped.
struct Ledger {
    base: u64,
    entries: VecDeque<Shape>,
    next: Vec<u64>,
}

impl Ledger {
    fn new(participants: usize) -> Self {
        Ledger {
            base: 0,
            entries: VecDeque::new(),
            next: vec![0; participants],
        }
    }

    /// Participant `p`'s next operation: `Ok` if it matches what the others issued at that
    /// place (or is the first there), else the other's shape and the place.
    fn admit(&mut self, p: usize, shape: Shape) -> std::result::Result<(), (Shape, u64)> {
        let place = self.next[p];
        let i = (place - self.base) as usize;
        match self.entries.get(i) {
            Some(theirs) if theirs != &shape => return Err((*theirs, place)),
            Some(_) => {}
            None => self.entries.push_back(shape),
        }
        self.next[p] += 1;
        let passed = self.next.iter().copied().min().unwrap_or(0);
        while self.base < passed {
            self.entries.pop_front();
            self.base += 1;
        }
        Ok(())
    }
}

/// The clique's record of what its ranks have issued, checked operation by operation.
///
/// Collectives form one sequence that every rank walks; sends from rank `a` to rank `b`
/// and receives by `b` from `a` form one sequence per ordered pair, which `a` (sending) and
/// `b` (receiving) walk. NCCL matches operations the same way, so a rank whose operation
/// differs from what a peer issued at the same place would make the peer read or write
/// with other counts than its own.
pub(super) struct Agreement {
    ranks: usize,
    collectives: Ledger,
    pairs: HashMap<(usize, usize), Ledger>,
    poisoned: Option<String>,
}

impl Agreement {
    pub(super) fn new(ranks: usize) -> Self {
        Agreement {
            ranks,
            collectives: Ledger::new(ranks),
            pairs: HashMap::new(),
            poisoned: None,
        }
    }

    pub(super) fn poison(&mut self, why: String) {
        self.poisoned.get_or_insert(why);
    }

    pub(super) fn admit(&mut self, rank: usize, call: &Call, what: &'static str) -> Result<()> {
        if let Some(why) = &self.poisoned {
            return Err(Error::with_detail(
                what,
                ErrorCode::IllegalState,
                format!(
                    "this clique is unusable since an earlier failure ({why}): drop its communicators and make a new clique"
                ),
            ));
        }
        let shape = Shape {
            kind: call.kind,
            datatype: call.datatype,
            count: call.count,
            op: call.op,
            root: call.peer,
        };
        let peer = call.peer as usize;
        debug_assert!(rank < self.ranks && (peer < self.ranks || !is_p2p(call.kind)));
        let (key, participant, place) = match call.kind {
            OpKind::Send => (
                Some((rank, peer)),
                0,
                format!("from rank {rank} to rank {peer}"),
            ),
            OpKind::Recv => (
                Some((peer, rank)),
                1,
                format!("from rank {peer} to rank {rank}"),
            ),
            _ => (None, rank, String::new()),
        };
        let ledger = match key {
            Some(pair) => self.pairs.entry(pair).or_insert_with(|| Ledger::new(2)),
            None => &mut self.collectives,
        };
        let place_name = |n: u64| match key {
            Some(_) => format!("send #{n} {place}"),
            None => format!("collective #{n} of the clique"),
        };
        // sends and receives compare type and count only
        let shape = match call.kind {
            OpKind::Send | OpKind::Recv => Shape {
                kind: OpKind::Send,
                op: 0,
                root: 0,
                ..shape
            },
            _ => shape,
        };
        match ledger.admit(participant, shape) {
            Ok(()) => Ok(()),
            Err((theirs, place)) => {
                let why = format!(
                    "rank {rank}'s {} does not match the {} a peer issued as {}: every rank must issue the same operations in the same order",
                    shape.describe(),
                    theirs.describe(),
                    place_name(place),
                );
                self.poisoned = Some(why.clone());
                Err(Error::invalid_input(
                    what,
                    Invalid::argument(format!(
                        "{why}; refused before NCCL saw it, and this clique is now unusable"
                    )),
                ))
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::nccl) fn call(kind: OpKind, count: usize, datatype: c_int, peer: c_int) -> Call {
        Call {
            kind,
            send: 0x1000,
            recv: 0x2000,
            count,
            datatype,
            op: 0,
            peer,
        }
    }

    #[test]
    fn the_agreement_admits_matching_ranks_and_refuses_a_mismatch_for_good() {
        let mut agreement = Agreement::new(2);
        let ar = |n| call(OpKind::AllReduce, n, 7, 0);
        // rank 0 runs ahead by two collectives, rank 1 follows with the same ones
        agreement.admit(0, &ar(4), "t").unwrap();
        agreement.admit(0, &ar(8), "t").unwrap();
        agreement.admit(1, &ar(4), "t").unwrap();
        assert_eq!(
            agreement.collectives.entries.len(),
            1,
            "the first is passed by both"
        );
        agreement.admit(1, &ar(8), "t").unwrap();
        assert!(agreement.collectives.entries.is_empty());
        // sends and receives pair up per direction, in order, apart from collectives
        agreement
            .admit(0, &call(OpKind::Send, 16, 2, 1), "t")
            .unwrap();
        agreement
            .admit(1, &call(OpKind::Send, 3, 2, 0), "t")
            .unwrap();
        agreement
            .admit(1, &call(OpKind::Recv, 16, 2, 0), "t")
            .unwrap();
        agreement
            .admit(0, &call(OpKind::Recv, 3, 2, 1), "t")
            .unwrap();
        // a send to oneself pairs with a receive from oneself
        agreement
            .admit(0, &call(OpKind::Recv, 5, 1, 0), "t")
            .unwrap();
        agreement
            .admit(0, &call(OpKind::Send, 5, 1, 0), "t")
            .unwrap();
        // a count that differs from the peer's at the same place is refused ...
        agreement.admit(0, &ar(4), "t").unwrap();
        let e = agreement
            .admit(1, &ar(5), "Communicator::all_reduce")
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(e.call(), "Communicator::all_reduce");
        let detail = e.invalid().map(ToString::to_string).unwrap();
        assert!(
            detail.starts_with("rank 1's all-reduce of 5 f32 (Sum) does not match the all-reduce of 4 f32 (Sum) a peer issued as collective #2 of the clique"),
            "{detail}"
        );
        // ... and so is everything after it, on every rank
        let e = agreement.admit(0, &ar(4), "t").unwrap_err();
        assert_eq!(e.code(), ErrorCode::IllegalState);
    }

    #[test]
    fn the_agreement_compares_type_root_and_reduction_too() {
        let mut agreement = Agreement::new(2);
        agreement
            .admit(0, &call(OpKind::Broadcast, 4, 7, 0), "t")
            .unwrap();
        assert!(
            agreement
                .admit(1, &call(OpKind::Broadcast, 4, 7, 1), "t")
                .is_err()
        );
        let mut agreement = Agreement::new(2);
        agreement
            .admit(0, &call(OpKind::Send, 4, 7, 1), "t")
            .unwrap();
        let e = agreement
            .admit(1, &call(OpKind::Recv, 4, 8, 0), "t")
            .unwrap_err();
        assert!(
            e.invalid()
                .map(ToString::to_string)
                .unwrap()
                .contains("send #0 from rank 0 to rank 1")
        );
        let mut agreement = Agreement::new(2);
        let mut max = call(OpKind::AllReduce, 4, 7, 0);
        max.op = 2;
        agreement
            .admit(0, &call(OpKind::AllReduce, 4, 7, 0), "t")
            .unwrap();
        assert!(agreement.admit(1, &max, "t").is_err());
    }
}
