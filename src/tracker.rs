//! The conflict tracker ([`Tracker`]): the records of queued work (what each access touched,
//! [`Access`], and who queued it), the one rule of when two accesses conflict
//! ([`conflicts`]), the one query of what new work must wait for
//! ([`Tracker::conflicting`]) and the one rule of which records a new one makes redundant
//! ([`Tracker::add`]). A leaf every layer above may use; it names only [`Span`] and
//! [`Touched`].
//!
//! Its users keep their own state (which streams, which events) and ask it the rest:
//! * the synchronous book (`synchronous/book.rs`): a tracker per sync stream, whose records
//!   are all covered by the sync stream's latest event (`W = ()`);
//! * a multi-stream scope (`scope/lanes.rs`): one tracker for the scope, its records placed
//!   by lane and operation count;
//! * a library handle (`stream/handle_order.rs`): a tracker of one record, the handle's
//!   device state ([`Access::STATE`]) written by the stream of its last call.

use crate::span::{Span, Touched};

/// What kind of thing an access touches; accesses of different kinds never share it, except
/// [`Key::Anything`], which shares everything.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Key {
    /// Device memory: the range is of device addresses.
    Memory,
    /// The globals of a module (written by a `KernelMut`): the range is the module's
    /// number, one wide.
    Globals,
    /// A library handle's device state (a cuFFT plan's work area, a cuRAND generator's
    /// state), which every call of the handle writes (features `cufft`, `curand`).
    #[cfg_attr(not(any(feature = "cufft", feature = "curand")), allow(dead_code))]
    State,
    /// Memory the crate cannot place, or an operation whose memory it does not know (a
    /// graph launch, a module global written synchronously, which any kernel of the module
    /// may read): it conflicts with every access and covers every one.
    Anything,
}

/// One access of queued work: `[start, end)` of `key`, written or only read. An empty range
/// touches nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Access {
    pub(crate) key: Key,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) write: bool,
}

impl Access {
    /// Anything, written.
    pub(crate) const ANYTHING: Access = Access {
        key: Key::Anything,
        start: 0,
        end: u64::MAX,
        write: true,
    };

    /// A library handle's device state, written (every call writes it).
    #[cfg_attr(not(any(feature = "cufft", feature = "curand")), allow(dead_code))]
    pub(crate) const STATE: Access = Access {
        key: Key::State,
        start: 0,
        end: 1,
        write: true,
    };

    /// The device memory of `span`.
    #[inline(always)]
    pub(crate) fn memory(span: &Span) -> Access {
        Access {
            key: Key::Memory,
            start: span.start,
            end: span.start.saturating_add(span.bytes),
            write: span.write,
        }
    }

    /// The globals of module `module`, written.
    pub(crate) fn globals(module: usize) -> Access {
        Access {
            key: Key::Globals,
            start: module as u64,
            end: module as u64 + 1,
            write: true,
        }
    }
}

/// The accesses of work that touches `touched`: its spans that touch memory, or
/// [`Access::ANYTHING`].
#[inline]
pub(crate) fn accesses(touched: Touched<'_>) -> impl Iterator<Item = Access> + Clone + '_ {
    let (spans, anything): (&[Span], bool) = match touched {
        Touched::Spans(spans) => (spans, false),
        Touched::Anything => (&[], true),
    };
    spans
        .iter()
        .filter(|s| s.bytes != 0)
        .map(Access::memory)
        .chain(anything.then_some(Access::ANYTHING))
}

/// The one conflict rule: work doing `a` must be ordered after work doing `b` (or the other way)
/// when they touch a shared byte of one key and one of them writes it, or either is
/// [`Key::Anything`].
#[inline(always)]
pub(crate) fn conflicts(a: &Access, b: &Access) -> bool {
    a.key == Key::Anything
        || b.key == Key::Anything
        || (a.key == b.key
            && (a.write || b.write)
            && a.start < a.end
            && b.start < b.end
            && a.start < b.end
            && b.start < a.end)
}

/// Whether `a` covers `b`: all work that conflicts with `b` conflicts with `a` (`a` touches
/// all `b` touches, and writes it if `b` does).
#[inline]
pub(crate) fn covers(a: &Access, b: &Access) -> bool {
    a.key == Key::Anything
        || (a.key == b.key && a.start <= b.start && b.end <= a.end && (a.write || !b.write))
}

/// The first pair of accesses `(i, j)`, `i < j`, of one operation's arguments `spans` that
/// conflict ([`conflicts`]).
#[inline]
pub(crate) fn first_overlap(spans: &[Span]) -> Option<(usize, usize)> {
    for i in 0..spans.len() {
        for j in i + 1..spans.len() {
            if conflicts(&Access::memory(&spans[i]), &Access::memory(&spans[j])) {
                return Some((i, j));
            }
        }
    }
    None
}

/// One record of queued work: what it touched and who queued it (`W`: what a user of the
/// tracker waits for to be ordered after it, or what leads to it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Record<W> {
    pub(crate) access: Access,
    pub(crate) who: W,
}

/// The records of queued work not known complete, generic over who queued it so that it is
/// tested without a GPU.
#[derive(Debug)]
pub(crate) struct Tracker<W> {
    records: Vec<Record<W>>,
}

impl<W> Default for Tracker<W> {
    fn default() -> Self {
        Tracker::new()
    }
}

impl<W> Tracker<W> {
    pub(crate) const fn new() -> Self {
        Tracker {
            records: Vec::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn records(&self) -> &[Record<W>] {
        &self.records
    }

    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Forgets every record (all known complete).
    pub(crate) fn clear(&mut self) {
        self.records.clear();
    }
}

impl<W: Copy + PartialEq> Tracker<W> {
    /// What work doing `op` (its accesses) must be ordered after: every record that
    /// conflicts with one of them, and every record of [`Key::Anything`] (work touching no
    /// memory still is ordered after that).
    #[inline]
    pub(crate) fn conflicting<'t, I>(&'t self, op: I) -> impl Iterator<Item = &'t Record<W>> + 't
    where
        I: Iterator<Item = Access> + Clone + 't,
    {
        self.records.iter().filter(move |r| {
            r.access.key == Key::Anything || op.clone().any(|a| conflicts(&a, &r.access))
        })
    }

    /// Whether work doing `op` must be ordered after some record ([`Tracker::conflicting`]).
    #[inline]
    pub(crate) fn conflicts_with(&self, op: impl Iterator<Item = Access> + Clone) -> bool {
        self.conflicting(op).next().is_some()
    }

    /// Records `access` by `who`, after the records it makes redundant: none is added where
    /// a record of the same `who` covers it ([`covers`]: being ordered after that record
    /// orders after this one); else every record it covers that `who` is ordered after is
    /// dropped (`after(&record.who)`: `who` comes after it, as a later operation of one
    /// stream; or they conflict, so `who` waited for it before it was queued): whatever is
    /// ordered after the new record is ordered after those. So the records stay as few as
    /// the distinct ranges in flight.
    pub(crate) fn add(&mut self, access: Access, who: W, after: impl Fn(&W) -> bool) {
        if access.start >= access.end {
            return;
        }
        if self
            .records
            .iter()
            .any(|r| r.who == who && covers(&r.access, &access))
        {
            return;
        }
        self.records.retain(|r| {
            let ordered = after(&r.who) || conflicts(&access, &r.access);
            !(ordered && covers(&access, &r.access))
        });
        self.records.push(Record { access, who });
    }
}

/// `[start, end)` of device memory (for tests).
#[cfg(test)]
pub(crate) fn mem(start: u64, end: u64, write: bool) -> Access {
    Access {
        key: Key::Memory,
        start,
        end,
        write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_conflict_where_they_share_a_byte_of_one_key_and_one_writes() {
        let (w, r) = (mem(0x1000, 0x1100, true), mem(0x1080, 0x1084, false));
        assert!(conflicts(&w, &r) && conflicts(&r, &w), "a write and a read");
        assert!(!conflicts(&r, &r), "two reads never conflict");
        assert!(conflicts(&w, &w), "two writes");
        assert!(!conflicts(&w, &mem(0x1100, 0x1200, true)), "adjacent");
        assert!(!conflicts(&w, &mem(0x1080, 0x1080, true)), "empty");
        let g = Access::globals(0x1000);
        assert!(
            !conflicts(&g, &mem(0x1000, 0x1001, true)),
            "globals: own keys"
        );
        assert!(conflicts(&g, &Access::globals(0x1000)));
        assert!(!conflicts(&g, &Access::globals(0x1001)), "another module");
        assert!(
            !conflicts(&Access::STATE, &w),
            "a handle's state is no memory"
        );
        assert!(conflicts(&Access::STATE, &Access::STATE), "always written");
        for a in [w, r, g, Access::STATE, mem(5, 5, false)] {
            assert!(conflicts(&Access::ANYTHING, &a) && conflicts(&a, &Access::ANYTHING));
        }
    }

    #[test]
    fn spans_become_memory_accesses() {
        let s = Span {
            start: 0x1000,
            bytes: 16,
            write: false,
        };
        assert_eq!(Access::memory(&s), mem(0x1000, 0x1010, false));
        let none = [Span::NONE, s];
        let got: Vec<_> = accesses(Touched::Spans(&none)).collect();
        assert_eq!(got, [mem(0x1000, 0x1010, false)], "scalars touch nothing");
        let got: Vec<_> = accesses(Touched::Anything).collect();
        assert_eq!(got, [Access::ANYTHING]);
    }

    #[test]
    fn a_query_finds_the_conflicting_records_and_anything() {
        let mut t = Tracker::<u32>::new();
        t.add(mem(0x1000, 0x1100, true), 1, |_| false);
        t.add(mem(0x2000, 0x2100, false), 2, |_| false);
        let who = |t: &Tracker<u32>, op: &[Access]| -> Vec<u32> {
            t.conflicting(op.iter().copied()).map(|r| r.who).collect()
        };
        assert_eq!(who(&t, &[mem(0x1010, 0x1011, false)]), [1]);
        assert_eq!(who(&t, &[mem(0x2010, 0x2011, false)]), [] as [u32; 0]);
        assert_eq!(who(&t, &[mem(0x2010, 0x2011, true)]), [2]);
        assert_eq!(who(&t, &[Access::ANYTHING]), [1, 2]);
        assert_eq!(who(&t, &[]), [] as [u32; 0], "touching nothing");
        t.add(Access::ANYTHING, 3, |_| false);
        assert_eq!(who(&t, &[]), [3], "but anything is waited for by all work");
        assert!(t.conflicts_with([Access::globals(7)].into_iter()));
    }

    #[test]
    fn a_record_covered_by_its_own_who_is_not_added() {
        let mut t = Tracker::<()>::new();
        let buf = mem(0x1000, 0x1100, true);
        for _ in 0..100 {
            t.add(buf, (), |_| true);
        }
        assert_eq!(t.len(), 1);
        t.add(mem(0x1010, 0x1020, false), (), |_| true);
        assert_eq!(t.len(), 1, "a read inside a write of the same who");
        t.add(mem(0x10f0, 0x1110, true), (), |_| true);
        assert_eq!(t.len(), 2, "reaching past it");
        t.add(mem(0x1000, 0x1000, true), (), |_| true);
        assert_eq!(t.len(), 2, "an empty range is not recorded");
        t.add(Access::ANYTHING, (), |_| true);
        assert_eq!(
            t.records(),
            [Record {
                access: Access::ANYTHING,
                who: ()
            }]
        );
        t.add(mem(0x9000, 0x9008, true), (), |_| true);
        assert_eq!(t.len(), 1, "anything covers every access");
    }

    /// `who` is `(lane, op)`: `after` is "the same lane" (a later operation of one stream).
    #[test]
    fn a_new_record_drops_what_it_covers_and_is_ordered_after() {
        let same_lane = |me: usize| move |w: &(usize, u64)| w.0 == me;
        let mut t = Tracker::<(usize, u64)>::new();
        t.add(mem(0x1000, 0x1080, false), (1, 1), same_lane(1));
        t.add(mem(0x1000, 0x1080, false), (0, 1), same_lane(0));
        t.add(mem(0x1000, 0x1080, false), (0, 2), same_lane(0));
        let got: Vec<_> = t.records().iter().map(|r| r.who).collect();
        assert_eq!(
            got,
            [(1, 1), (0, 2)],
            "a read drops its own lane's reads only"
        );
        t.add(mem(0x1000, 0x1040, true), (2, 1), same_lane(2));
        assert_eq!(t.len(), 3, "a write drops only what it covers");
        t.add(mem(0x0f00, 0x1100, true), (2, 2), same_lane(2));
        let got: Vec<_> = t.records().iter().map(|r| r.who).collect();
        assert_eq!(got, [(2, 2)], "it waited for them all: one record");
        t.add(Access::globals(3), (1, 2), same_lane(1));
        t.add(mem(0, u64::MAX, true), (1, 3), same_lane(1));
        assert_eq!(t.len(), 2, "memory covers no globals");
    }

    /// A library handle: its state always written, `who` the stream of the call.
    #[test]
    fn a_handle_state_keeps_one_record_of_the_last_stream() {
        let mut t = Tracker::<u32>::new();
        for stream in [7, 7, 8, 7] {
            let waits: Vec<_> = t
                .conflicting([Access::STATE].into_iter())
                .filter(|r| r.who != stream)
                .map(|r| r.who)
                .collect();
            assert!(waits.len() <= 1);
            t.add(Access::STATE, stream, |w| *w == stream);
            assert_eq!(
                t.records(),
                [Record {
                    access: Access::STATE,
                    who: stream
                }]
            );
        }
    }

    /// The coverage rule is sound: whatever conflicts with a covered access conflicts with
    /// the access covering it, over every small range of two keys, written or read, and
    /// anything.
    #[test]
    fn what_conflicts_with_a_covered_access_conflicts_with_its_cover() {
        let mut all = vec![Access::ANYTHING];
        for key in [Key::Memory, Key::Globals] {
            for start in 0..4 {
                for end in start..5 {
                    for write in [false, true] {
                        all.push(Access {
                            key,
                            start,
                            end,
                            write,
                        });
                    }
                }
            }
        }
        for a in &all {
            for b in all.iter().filter(|b| covers(a, b)) {
                for x in &all {
                    assert!(!conflicts(x, b) || conflicts(x, a), "{a:?} {b:?} {x:?}");
                }
            }
        }
    }

    #[test]
    fn the_accesses_of_one_operation_keep_what_they_add() {
        let mut t = Tracker::<(usize, u64)>::new();
        let same_lane = |w: &(usize, u64)| w.0 == 0;
        t.add(mem(0x1000, 0x1100, true), (0, 1), same_lane);
        t.add(mem(0x1000, 0x1010, false), (0, 1), same_lane);
        t.add(Access::globals(4), (0, 1), same_lane);
        assert_eq!(t.len(), 2, "a read inside the same operation's write");
        t.add(mem(0x1000, 0x1010, false), (1, 1), |w| w.0 == 1);
        assert_eq!(t.len(), 3, "a read covers no write");
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn the_first_overlap_is_the_first_conflicting_pair() {
        let s = |start, bytes, write| Span {
            start,
            bytes,
            write,
        };
        assert_eq!(first_overlap(&[s(0, 8, false), s(0, 8, false)]), None);
        assert_eq!(
            first_overlap(&[s(0, 8, false), s(9, 8, true), s(4, 1, true)]),
            Some((0, 2))
        );
        assert_eq!(
            first_overlap(&[s(4, 0, true), s(0, 8, true)]),
            None,
            "scalars"
        );
    }
}
