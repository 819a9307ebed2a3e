//! The book of the sync streams: each thread's sync stream in each context, its bounce
//! ring and its pending accesses, generic over the driver's handles so that the
//! bookkeeping is tested without a GPU.

use crate::error::Result;
use crate::span::Touched;
use crate::tracker::{Tracker, accesses};

/// The largest upload that goes through a sync stream's bounce ring ([`Bounce`]): one slot.
pub(crate) const BOUNCE_SLOT: usize = 256 << 10;
/// The slots of a bounce ring: up to this many small uploads of one thread in flight.
pub(super) const BOUNCE_SLOTS: usize = 4;
// `Bounce::in_flight` has a bit per slot.
const _: () = assert!(BOUNCE_SLOTS <= u8::BITS as usize);

/// A sync stream's bounce ring: host memory of the crate's own, [`BOUNCE_SLOTS`] slots of
/// [`BOUNCE_SLOT`] bytes, made at the thread's first small upload in the context. A small
/// upload copies the host data into the next slot, queues the copy from the slot to the
/// device and records the slot's event (the sync stream's record) without waiting: the
/// caller's host buffer is free as soon as the host copy is done, and the slot is reused
/// after its event completes.
pub(super) struct Bounce<E> {
    /// The base of the ring's memory, as a number.
    pub(super) host: usize,
    /// One event per slot, recorded after the copy out of it.
    pub(super) events: [E; BOUNCE_SLOTS],
    /// The slot the next small upload takes.
    pub(super) next: usize,
    /// The slots whose event was recorded and is not known complete (bit `k`: slot `k`):
    /// a slot outside it needs no wait before it is rewritten.
    pub(super) in_flight: u8,
    /// The memory is page-locked in the sync stream's context (`cuMemHostRegister`): only
    /// in a context the crate destroys itself, whose sync streams end at its destroying
    /// teardown, when the context is idle, or at the end of a `with_raw_context` scope on
    /// it (`RING_LAYOUT` in `order`).
    pub(super) registered: bool,
}

/// Whether a sync stream has its bounce ring.
pub(super) enum Ring<E> {
    /// Not yet: made at the first small upload.
    NotYet,
    /// The sync stream's operation makes it now, outside the book's lock; `registered`: it
    /// is to be page-locked (counted against the context's page-locked rings already, so
    /// that two threads making rings at once do not both take the last place).
    Coming {
        registered: bool,
    },
    /// Making it failed (no host memory or no event left): small uploads wait on the host, as
    /// the others do.
    Failed,
    Made(Bounce<E>),
}

/// The sync stream of one thread in one context: its stream and event, and the epochs.
pub(super) struct Entry<E> {
    /// The context's handle as a number.
    pub(super) ctx: usize,
    /// The thread's token ([`thread_token`](super::sync_stream::thread_token)).
    pub(super) thread: usize,
    pub(super) stream: E,
    /// The event of the sync stream's latest record, which later users wait for: its own
    /// event, or the slot's event of a bounced upload ([`Bounce`]).
    pub(super) event: E,
    /// The sync stream's own event, recorded after every device write that is not a
    /// bounced upload.
    pub(super) own: E,
    pub(super) ring: Ring<E>,
    /// When it was made: the number of sync streams made
    /// (`context::teardown::sync_streams_made`) after its making.
    pub(super) made: u64,
    /// The epoch of `event`'s latest record (0: none).
    pub(super) last: u64,
    /// What the operations of the records not known to be complete touched, as few
    /// accesses as cover them ([`Tracker::add`]; anything for memory the crate cannot
    /// place), all of them covered by `event`'s latest record: so they are all of one
    /// `who`, `()`. Cleared once that is known complete (the sync stream was synchronized,
    /// or a query found the record done).
    pub(super) pending: Tracker<()>,
    /// An operation runs on the sync stream now (from
    /// [`SyncStream::begin`](super::sync_stream::SyncStream::begin) to its end).
    pub(super) busy: bool,
    /// Its context ended while the sync stream was busy: the sync stream's own operation
    /// ends it.
    pub(super) doomed: bool,
}

impl<E> Entry<E> {
    /// Every record of the sync stream is known complete (it was synchronized, or its
    /// latest record was found done): no access is pending and no recorded slot's copy is
    /// queued. (An operation in progress may have queued a copy out of its slot, not yet
    /// recorded: its own record sets that slot's bit afterwards, and the slot is lent to
    /// it alone until then.)
    pub(super) fn settled(&mut self) {
        self.pending.clear();
        if let Ring::Made(b) = &mut self.ring {
            b.in_flight = 0;
        }
    }
}

/// The sync streams of every thread and context, generic over the handles so the
/// bookkeeping is tested without a GPU.
pub(super) struct Book<E> {
    pub(super) entries: Vec<Entry<E>>,
    /// How many sync streams were made so far.
    pub(super) made: u64,
    /// The latest epoch handed out (0: none yet).
    pub(super) last: u64,
}

impl<E: Copy> Book<E> {
    pub(super) const fn new() -> Self {
        Book {
            entries: Vec::new(),
            made: 0,
            last: 0,
        }
    }

    /// How many sync streams of `ctx` have a page-locked ring.
    pub(super) fn registered_rings(&self, ctx: usize) -> usize {
        let registered = |e: &&Entry<E>| match &e.ring {
            Ring::Made(b) => b.registered,
            Ring::Coming { registered } => *registered,
            Ring::NotYet | Ring::Failed => false,
        };
        self.entries
            .iter()
            .filter(|e| e.ctx == ctx)
            .filter(registered)
            .count()
    }

    pub(super) fn find(&self, ctx: usize, thread: usize) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.ctx == ctx && e.thread == thread)
    }

    /// Whether a sync stream of `ctx` proves that a scope of the crate holds the context
    /// (for a sync stream made for a context another library made current, which that
    /// scope's teardown must end too): one that is not doomed. A doomed sync stream's
    /// context was given up by the teardown that doomed it (the sync stream stays only for
    /// its own operation to end it), so a sync stream made beside it would be ended by no
    /// teardown (it is made after every mark that teardown could have) and could outlive
    /// the context. Every sync stream not doomed was made after the mark of a scope that
    /// has not torn down yet (one that entered the context, or by induction the scope of
    /// the sync stream that proved it held), whose teardown ends or dooms every sync stream
    /// made after its mark: a sync stream made now, after that one, is among them.
    pub(super) fn holds(&self, ctx: usize) -> bool {
        self.entries.iter().any(|e| e.ctx == ctx && !e.doomed)
    }

    /// Adds a sync stream, whose stream and event `make` returns; its index.
    pub(super) fn add(
        &mut self,
        ctx: usize,
        thread: usize,
        make: impl FnOnce() -> Result<(E, E)>,
    ) -> Result<usize> {
        let (stream, event) = make()?;
        self.made += 1;
        self.entries.push(Entry {
            made: self.made,
            ctx,
            thread,
            stream,
            event,
            own: event,
            ring: Ring::NotYet,
            last: 0,
            pending: Tracker::new(),
            busy: false,
            doomed: false,
        });
        Ok(self.entries.len() - 1)
    }

    /// Records an event of sync stream `i` on its stream (`record(event, stream)`): the
    /// event of bounce slot `slot` where given, else its own; that event is then the one
    /// later users wait for. The new epoch, or the error of `record` (then nothing is
    /// recorded and nothing changes).
    /// `touched`: what the recorded operation touched, kept as pending accesses until the
    /// record is known complete.
    pub(super) fn record(
        &mut self,
        i: usize,
        slot: Option<usize>,
        touched: Touched<'_>,
        record: impl FnOnce(E, E) -> Result<()>,
    ) -> Result<u64> {
        let e = &mut self.entries[i];
        let event = match (slot, &e.ring) {
            (Some(k), Ring::Made(b)) => b.events[k],
            _ => e.own,
        };
        record(event, e.stream)?;
        if let (Some(k), Ring::Made(b)) = (slot, &mut e.ring) {
            b.in_flight |= 1 << k;
        }
        // a slot's bit is cleared only by `Entry::settled`, which other threads call only
        // for entries with pending accesses (`wait_conflicting`) or after waiting for them
        // all: a bounced upload always names the bytes it writes
        debug_assert!(
            slot.is_none()
                || !matches!(touched, Touched::Spans(s) if s.iter().all(|s| s.bytes == 0)),
            "a bounced upload names what it writes"
        );
        self.last += 1;
        e.event = event;
        e.last = self.last;
        // every record of the sync stream is covered by its latest event: ordered after
        // each other
        accesses(touched).for_each(|a| e.pending.add(a, (), |_| true));
        Ok(self.last)
    }

    /// Whether sync stream `i` has no bounce ring yet, and none was tried: the caller
    /// makes one outside the book's lock and [`installs`](Book::install_ring) it.
    pub(super) fn needs_ring(&self, i: usize) -> bool {
        matches!(self.entries[i].ring, Ring::NotYet)
    }

    /// Sync stream `i` (which [`needs_ring`](Book::needs_ring)) makes its ring now, outside
    /// the lock: page-locked where `registered`.
    pub(super) fn reserve_ring(&mut self, i: usize, registered: bool) {
        debug_assert!(matches!(self.entries[i].ring, Ring::NotYet));
        self.entries[i].ring = Ring::Coming { registered };
    }

    /// The operation that reserved sync stream `i`'s ring ended without making it: the
    /// next one makes it.
    pub(super) fn unreserve_ring(&mut self, i: usize) {
        if let Ring::Coming { .. } = self.entries[i].ring {
            self.entries[i].ring = Ring::NotYet;
        }
    }

    /// Gives sync stream `i` the bounce ring `made` (or, where making it failed, none for
    /// good: small uploads then wait on the host).
    pub(super) fn install_ring(&mut self, i: usize, made: Result<Bounce<E>>) {
        debug_assert!(
            matches!(self.entries[i].ring, Ring::NotYet | Ring::Coming { .. }),
            "a ring is installed once (another would leak)"
        );
        self.entries[i].ring = match made {
            Ok(b) => Ring::Made(b),
            Err(_) => Ring::Failed,
        };
    }

    /// Gives up sync stream `i`'s bounce ring for good, leaking its memory and events: a
    /// copy out of a slot may be queued with no record behind it (the record failed, and
    /// the sync stream could not be waited for). Small uploads then wait on the host.
    pub(super) fn give_up_ring(&mut self, i: usize) {
        self.entries[i].ring = Ring::Failed;
    }

    /// Takes the next slot of sync stream `i`'s bounce ring: the slot's index, base address
    /// and event, and whether a copy out of it may still be queued (its event was recorded
    /// and is not known complete); `None` where it has no ring.
    pub(super) fn take_slot(&mut self, i: usize) -> Option<(usize, usize, E, bool)> {
        let Ring::Made(b) = &mut self.entries[i].ring else {
            return None;
        };
        let k = b.next;
        b.next = (k + 1) % BOUNCE_SLOTS;
        let in_flight = b.in_flight & (1 << k) != 0;
        Some((k, b.host + k * BOUNCE_SLOT, b.events[k], in_flight))
    }

    /// Orders work that touches `reader` after every pending access of another sync stream
    /// (not `except`) that it conflicts with ([`Tracker::conflicting`]): for each such sync stream,
    /// `done(event)` says whether its latest record is complete (then its pending accesses
    /// are dropped), else `wait(event)` orders the work after it.
    pub(super) fn wait_conflicting(
        &mut self,
        reader: Touched<'_>,
        except: Option<usize>,
        mut done: impl FnMut(E) -> Result<bool>,
        mut wait: impl FnMut(E) -> Result<()>,
    ) -> Result<()> {
        for (i, e) in self.entries.iter_mut().enumerate() {
            if Some(i) == except || !e.pending.conflicts_with(accesses(reader)) {
                continue;
            }
            if done(e.event)? {
                e.settled();
            } else {
                wait(e.event)?;
            }
        }
        Ok(())
    }

    /// Orders work that touches `reader`, to be queued on a stream the crate does not own,
    /// after every pending access it conflicts with, through sync stream `r` (the calling
    /// thread's, in that stream's context, and not busy), so that nothing is queued on that
    /// stream under the book's lock: for each conflicting sync stream, `done(event)` says
    /// whether its latest record is complete (then its accesses are dropped); the others'
    /// latest records are waited for on `r` (`wait(event)`, queued on `r`'s stream, which
    /// holds the crate's own work alone), and then `r`'s own event is recorded on it
    /// (`record(event, stream)`, as [`Book::record`] of nothing: it covers `r`'s pending
    /// accesses as well as its earlier record). Returns the event the caller's stream then
    /// waits for, `r`'s latest record: `None` where nothing conflicting is pending; no wait
    /// and no record on `r` where only `r`'s own accesses conflict.
    pub(super) fn order_through(
        &mut self,
        r: usize,
        reader: Touched<'_>,
        mut done: impl FnMut(E) -> Result<bool>,
        mut wait: impl FnMut(E) -> Result<()>,
        record: impl FnOnce(E, E) -> Result<()>,
    ) -> Result<Option<E>> {
        let (mut waited, mut own) = (false, false);
        for (i, e) in self.entries.iter_mut().enumerate() {
            if !e.pending.conflicts_with(accesses(reader)) {
                continue;
            }
            if done(e.event)? {
                e.settled();
            } else if i == r {
                own = true;
            } else {
                wait(e.event)?;
                waited = true;
            }
        }
        if waited {
            self.record(r, None, Touched::Spans(&[]), record)?;
        }
        Ok((waited || own).then(|| self.entries[r].event))
    }

    /// Orders work that touches `reader` after every pending access it conflicts with by
    /// waiting on the host (`sync(event)`), where no sync stream can carry the wait
    /// ([`Book::order_through`]): the same queries first (`done`), and each sync stream
    /// waited for has every record complete afterwards (its latest one was).
    pub(super) fn wait_conflicting_on_host(
        &mut self,
        reader: Touched<'_>,
        mut done: impl FnMut(E) -> Result<bool>,
        mut sync: impl FnMut(E) -> Result<()>,
    ) -> Result<()> {
        for e in &mut self.entries {
            if !e.pending.conflicts_with(accesses(reader)) {
                continue;
            }
            if !done(e.event)? {
                sync(e.event)?;
            }
            e.settled();
        }
        Ok(())
    }

    /// How many accesses are pending, over every sync stream.
    pub(super) fn pending(&self) -> usize {
        self.entries.iter().map(|e| e.pending.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorCode};
    use crate::span::Span;

    #[test]
    fn a_doomed_sync_stream_does_not_prove_its_context_held() {
        let mut book = sync_streams(2);
        assert!(book.holds(1));
        assert!(!book.holds(2), "no sync stream of context 2");
        // a teardown of context 1 found both busy: each is ended by its own operation
        book.entries.iter_mut().for_each(|e| e.doomed = true);
        assert!(
            !book.holds(1),
            "a sync stream made beside a doomed one would be ended by no teardown"
        );
        book.entries[1].doomed = false;
        assert!(book.holds(1));
    }

    fn sync_streams(n: usize) -> Book<u32> {
        let mut book = Book::<u32>::new();
        for i in 0..n {
            let h = 10 * (i as u32 + 1);
            book.add(1, i, || Ok((h, h + 1))).unwrap();
        }
        book
    }

    fn span(start: u64, bytes: u64, write: bool) -> Span {
        Span {
            start,
            bytes,
            write,
        }
    }

    /// Records an operation of sync stream `i` that touched `touched`.
    fn wrote(book: &mut Book<u32>, i: usize, touched: Touched<'_>) -> u64 {
        book.record(i, None, touched, |_, _| Ok(())).unwrap()
    }

    /// The events a reader touching `reader` waits for (none complete), except `except`'s.
    fn waited(book: &mut Book<u32>, reader: Touched<'_>, except: Option<usize>) -> Vec<u32> {
        let mut w = Vec::new();
        book.wait_conflicting(
            reader,
            except,
            |_| Ok(false),
            |e| {
                w.push(e);
                Ok(())
            },
        )
        .unwrap();
        w.sort();
        w
    }

    #[test]
    fn each_record_takes_the_next_epoch_on_its_own_sync_stream() {
        let mut book = sync_streams(2);
        let mut on = Vec::new();
        let mut push = |e, s| {
            on.push((e, s));
            Ok(())
        };
        let none = Touched::Spans(&[]);
        assert_eq!(book.record(0, None, none, &mut push).unwrap(), 1);
        assert_eq!(book.record(1, None, none, &mut push).unwrap(), 2);
        assert_eq!(book.record(0, None, none, &mut push).unwrap(), 3);
        assert_eq!(
            on,
            [(11, 10), (21, 20), (11, 10)],
            "(event, its own stream)"
        );
        assert_eq!((book.entries[0].last, book.entries[1].last), (3, 2));
        assert_eq!(book.find(1, 1), Some(1));
        assert_eq!(book.find(1, 2), None);
        assert_eq!(
            book.find(2, 0),
            None,
            "a sync stream is per thread and context"
        );
    }

    #[test]
    fn a_reader_waits_only_for_the_sync_streams_that_touched_its_memory() {
        let mut book = sync_streams(3);
        wrote(&mut book, 0, Touched::Spans(&[span(0x1000, 0x100, true)]));
        wrote(&mut book, 1, Touched::Spans(&[span(0x2000, 0x100, true)]));
        let a = [span(0x1080, 4, false)];
        assert_eq!(waited(&mut book, Touched::Spans(&a), None), [11]);
        let b = [span(0x20ff, 1, true)];
        assert_eq!(waited(&mut book, Touched::Spans(&b), None), [21]);
        let neither = [span(0x1100, 0xf00, true), span(0x2100, 8, false)];
        assert_eq!(
            waited(&mut book, Touched::Spans(&neither), None),
            Vec::<u32>::new(),
            "adjacent memory is not shared"
        );
        let both = [span(0x1000, 1, false), span(0x2000, 1, false)];
        assert_eq!(waited(&mut book, Touched::Spans(&both), None), [11, 21]);
        assert_eq!(
            waited(&mut book, Touched::Spans(&both), Some(0)),
            [21],
            "its own stream is ordered"
        );
        assert_eq!(
            waited(&mut book, Touched::Anything, None),
            [11, 21],
            "unknown memory waits for every pending write"
        );
        assert_eq!(
            waited(&mut book, Touched::Spans(&[span(0, 0, false)]), None),
            Vec::<u32>::new(),
            "scalars touch nothing"
        );
    }

    #[test]
    fn reads_wait_for_writes_and_writes_for_reads_but_reads_not_for_reads() {
        let mut book = sync_streams(2);
        // a device-to-device copy of sync stream 0: reads 0x1000, writes 0x2000
        let copy = [span(0x1000, 16, false), span(0x2000, 16, true)];
        wrote(&mut book, 0, Touched::Spans(&copy));
        let read_src = [span(0x1000, 16, false)];
        assert_eq!(
            waited(&mut book, Touched::Spans(&read_src), None),
            Vec::<u32>::new(),
            "two reads"
        );
        let write_src = [span(0x1008, 4, true)];
        assert_eq!(
            waited(&mut book, Touched::Spans(&write_src), None),
            [11],
            "a write of a pending copy's source"
        );
        let read_dst = [span(0x2000, 16, false)];
        assert_eq!(waited(&mut book, Touched::Spans(&read_dst), None), [11]);
    }

    #[test]
    fn repeated_writes_of_one_buffer_keep_one_access() {
        let mut book = sync_streams(1);
        let buf = [span(0x1000, 0x100, true)];
        for _ in 0..1000 {
            wrote(&mut book, 0, Touched::Spans(&buf));
        }
        assert_eq!(book.pending(), 1);
        wrote(&mut book, 0, Touched::Spans(&[span(0x1010, 0x10, false)]));
        assert_eq!(book.pending(), 1, "a read inside a pending write");
        wrote(&mut book, 0, Touched::Spans(&[span(0x10f0, 0x20, true)]));
        assert_eq!(book.pending(), 2, "reaching past it");
        wrote(&mut book, 0, Touched::Anything);
        wrote(&mut book, 0, Touched::Spans(&[span(0x9000, 8, true)]));
        assert_eq!(
            book.pending(),
            1,
            "anything covers the earlier accesses and every later one"
        );
        assert_eq!(book.entries[0].last, 1004);
    }

    #[test]
    fn memory_the_crate_cannot_place_orders_every_later_user() {
        let mut book = sync_streams(2);
        wrote(&mut book, 0, Touched::Anything); // a module global, written synchronously
        let kernel_scalars = [span(0, 0, false)];
        assert_eq!(
            waited(&mut book, Touched::Spans(&kernel_scalars), None),
            [11],
            "a launch with no buffers may read the global"
        );
        assert_eq!(
            waited(&mut book, Touched::Spans(&[span(0x5000, 8, false)]), None),
            [11]
        );
    }

    #[test]
    fn a_complete_record_is_forgotten_instead_of_waited_for() {
        let mut book = sync_streams(2);
        wrote(&mut book, 0, Touched::Spans(&[span(0x1000, 8, true)]));
        wrote(&mut book, 1, Touched::Spans(&[span(0x1000, 8, true)]));
        assert_eq!(book.pending(), 2);
        let mut w = Vec::new();
        book.wait_conflicting(
            Touched::Anything,
            None,
            |e| Ok(e == 11),
            |e| {
                w.push(e);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(w, [21], "sync stream 0's record was complete");
        assert_eq!(book.pending(), 1);
        assert!(book.entries[0].pending.is_empty());
        let fail = |_| Err(Error::new("cuEventQuery", ErrorCode::IllegalAddress));
        let r = book.wait_conflicting(Touched::Anything, None, fail, |_| Ok(()));
        assert!(r.is_err(), "a failed query is the caller's error");
        assert_eq!(book.pending(), 1, "and forgets nothing");
    }

    #[test]
    fn a_failed_record_or_sync_stream_takes_no_epoch() {
        let mut book = sync_streams(1);
        let fail = |_, _| Err(Error::new("cuEventRecord", ErrorCode::InvalidHandle));
        assert!(book.record(0, None, Touched::Anything, fail).is_err());
        assert_eq!(book.last, 0);
        assert_eq!(book.pending(), 0, "nothing pending for a failed record");
        let fail = || Err(Error::new("cuStreamCreate", ErrorCode::OutOfMemory));
        assert!(book.add(1, 7, fail).is_err());
        assert_eq!(book.entries.len(), 1, "no sync stream for thread 7");
    }

    #[test]
    fn a_bounced_upload_records_its_slots_event_which_later_users_wait_for() {
        let mut book = sync_streams(2);
        let ring = || Ok(new_ring(100));
        assert!(book.needs_ring(0));
        assert_eq!(book.take_slot(0), None, "no ring yet");
        book.install_ring(0, ring());
        assert!(!book.needs_ring(0));
        let mut taken = Vec::new();
        for _ in 0..5 {
            taken.push(book.take_slot(0).unwrap());
        }
        let base = 1 << 20;
        assert_eq!(
            taken,
            [
                (0, base, 100, false),
                (1, base + BOUNCE_SLOT, 101, false),
                (2, base + 2 * BOUNCE_SLOT, 102, false),
                (3, base + 3 * BOUNCE_SLOT, 103, false),
                (0, base, 100, false),
            ],
            "the slots in turn, each with its own memory and event, none recorded yet"
        );
        let dst = [span(0x1000, 4, true)];
        let mut on = Vec::new();
        book.record(0, Some(2), Touched::Spans(&dst), |e, s| {
            on.push((e, s));
            Ok(())
        })
        .unwrap();
        assert_eq!(on, [(102, 10)], "the slot's event, on the sync stream");
        assert_eq!(bits(&book, 0), 0b100, "slot 2's copy may be queued");
        book.take_slot(0);
        assert_eq!(
            book.take_slot(0).map(|t| t.3),
            Some(true),
            "slot 2 is lent again with a wait for its copy"
        );
        let all = Touched::Anything;
        assert_eq!(
            waited(&mut book, all, None),
            [102],
            "later users wait for it"
        );
        book.record(0, None, Touched::Spans(&dst), |e, _| {
            on.push((e, 0));
            Ok(())
        })
        .unwrap();
        assert_eq!(on[1].0, 11, "a fill records the sync stream's own event");
        assert_eq!(
            waited(&mut book, all, None),
            [11],
            "which then covers the slot's"
        );
        assert_eq!(bits(&book, 0), 0b100, "not known complete yet");
        book.entries[0].settled();
        assert_eq!(bits(&book, 0), 0, "every record complete: no slot waits");
        assert!(book.entries[0].pending.is_empty());
        let fail = |_, _| Err(Error::new("cuEventRecord", ErrorCode::InvalidHandle));
        assert!(book.record(0, Some(1), all, fail).is_err());
        assert_eq!(
            (book.entries[0].event, book.entries[0].last),
            (11, 2),
            "a failed record changes nothing"
        );
    }

    /// A new ring at `1 << 20` whose slots' events are `base` to `base + 3`.
    fn new_ring(base: u32) -> Bounce<u32> {
        Bounce {
            in_flight: 0,
            host: 1 << 20,
            events: [base, base + 1, base + 2, base + 3],
            next: 0,
            registered: false,
        }
    }

    /// [`new_ring`], page-locked.
    fn registered_ring(base: u32) -> Bounce<u32> {
        Bounce {
            registered: true,
            ..new_ring(base)
        }
    }

    /// The in-flight bits of sync stream `i`'s ring.
    fn bits(book: &Book<u32>, i: usize) -> u8 {
        let Ring::Made(b) = &book.entries[i].ring else {
            unreachable!("no ring")
        };
        b.in_flight
    }

    /// A slot's bit (a copy out of it may still be queued) is cleared only once every
    /// record of its sync stream is known complete: not by another slot's record, a fill's
    /// record, a failed record, lending the slot again, a wait on the GPU, a failed query,
    /// a reader that learnt nothing of the sync stream, or another sync stream found
    /// complete. Any of those would let `bounced` rewrite a slot that a DMA may still read.
    #[test]
    fn a_slot_stays_in_flight_until_its_sync_stream_is_known_complete() {
        let mut book = sync_streams(2);
        for (i, base) in [(0, 100), (1, 200)] {
            book.install_ring(i, Ok(new_ring(base)));
        }
        let ok = |_, _| Ok(());
        let a = [span(0x1000, 4, true)];
        let b = [span(0x2000, 4, true)];
        let still = |book: &Book<u32>| bits(book, 0) & 0b11 == 0b11;
        // two bounced uploads of sync stream 0 (slots 0 and 1), one of sync stream 1
        book.take_slot(0);
        book.record(0, Some(0), Touched::Spans(&a), ok).unwrap();
        book.take_slot(0);
        book.record(0, Some(1), Touched::Spans(&a), ok).unwrap();
        book.take_slot(1);
        book.record(1, Some(0), Touched::Spans(&b), ok).unwrap();
        assert_eq!(bits(&book, 0), 0b11, "each record adds its slot's bit");
        assert_eq!(bits(&book, 1), 0b01);
        book.record(0, None, Touched::Spans(&a), ok).unwrap(); // a fill
        assert!(
            still(&book),
            "a fill's record covers the copies, not known complete"
        );
        let fail = |_, _| Err(Error::new("cuEventRecord", ErrorCode::InvalidHandle));
        book.take_slot(0); // slot 2
        assert!(book.record(0, Some(2), Touched::Spans(&a), fail).is_err());
        assert!(still(&book), "a failed record clears nothing");
        book.take_slot(0); // slot 3
        assert_eq!(
            book.take_slot(0).map(|t| t.3),
            Some(true),
            "slot 0 lent again"
        );
        assert!(still(&book), "lending a slot does not clear its bit");
        assert_eq!(
            book.take_slot(0).map(|t| t.3),
            Some(true),
            "slot 1 lent again"
        );
        // readers that learn nothing of sync stream 0's completion
        let not_done = |_| Ok(false);
        let other = [span(0x9000, 4, true)];
        book.wait_conflicting(Touched::Spans(&other), None, not_done, |_| Ok(()))
            .unwrap();
        book.wait_conflicting(Touched::Spans(&a), Some(0), not_done, |_| Ok(()))
            .unwrap();
        book.wait_conflicting(Touched::Spans(&a), None, not_done, |_| Ok(()))
            .unwrap();
        assert!(still(&book), "waited for on the GPU: not known complete");
        let failed = |_| Err(Error::new("cuEventQuery", ErrorCode::IllegalAddress));
        let r = book.wait_conflicting(Touched::Spans(&a), None, failed, |_| Ok(()));
        assert!(r.is_err());
        assert!(still(&book), "a failed query knows nothing");
        // sync stream 1 found complete: its bits alone
        let only_1 = |e| Ok(e == 200);
        book.wait_conflicting(Touched::Anything, None, only_1, |_| Ok(()))
            .unwrap();
        assert_eq!(bits(&book, 1), 0);
        assert!(
            still(&book),
            "another sync stream's completion says nothing of this one"
        );
        // found complete: the latest record (the fill's, its own event) covers both copies
        let mut asked = Vec::new();
        let done = |e| {
            asked.push(e);
            Ok(true)
        };
        book.wait_conflicting(Touched::Spans(&a), None, done, |_| Ok(()))
            .unwrap();
        assert_eq!(
            asked,
            [11],
            "asked about the latest record, queued after every copy"
        );
        assert_eq!(bits(&book, 0), 0, "every slot free");
        assert_eq!(
            book.take_slot(0).map(|t| t.3),
            Some(false),
            "slot 2: no wait"
        );
        book.record(0, Some(2), Touched::Spans(&a), ok).unwrap();
        assert_eq!(bits(&book, 0), 0b100, "a later record sets its own bit");
    }

    #[test]
    fn a_given_up_ring_lends_no_slot_again() {
        let mut book = sync_streams(1);
        book.install_ring(0, Ok(new_ring(100)));
        assert!(book.take_slot(0).is_some());
        book.give_up_ring(0);
        assert_eq!(
            book.take_slot(0),
            None,
            "no slot after the ring is given up"
        );
        assert!(!book.needs_ring(0), "and no new ring is made");
    }

    #[test]
    fn a_ring_that_cannot_be_made_is_not_tried_again() {
        let mut book = sync_streams(1);
        book.install_ring(0, Err(Error::new("cuEventCreate", ErrorCode::OutOfMemory)));
        assert!(!book.needs_ring(0), "not tried again");
        assert_eq!(book.take_slot(0), None, "the upload then waits on the host");
        let mut on = Vec::new();
        book.record(0, Some(0), Touched::Anything, |e, _| {
            on.push(e);
            Ok(())
        })
        .unwrap();
        assert_eq!(on, [11], "no ring: its own event");
    }

    #[test]
    fn page_locked_rings_are_counted_per_context() {
        let mut book = sync_streams(3);
        book.add(2, 7, || Ok((70, 71))).unwrap();
        book.install_ring(0, Ok(registered_ring(100)));
        book.install_ring(1, Ok(new_ring(200)));
        book.install_ring(3, Ok(registered_ring(300)));
        assert_eq!(
            book.registered_rings(1),
            1,
            "plain and missing rings not counted"
        );
        assert_eq!(book.registered_rings(2), 1);
        book.install_ring(2, Ok(registered_ring(400)));
        assert_eq!(book.registered_rings(1), 2);
        book.give_up_ring(0);
        assert_eq!(
            book.registered_rings(1),
            1,
            "a given-up ring is not counted"
        );
        assert_eq!(book.registered_rings(3), 0);
    }

    #[test]
    fn a_ring_being_made_counts_until_it_is_made_or_its_operation_ends() {
        let mut book = sync_streams(3);
        book.reserve_ring(0, true);
        book.reserve_ring(1, false);
        assert!(!book.needs_ring(0), "one operation makes it");
        assert_eq!(
            book.registered_rings(1),
            1,
            "a page-locked ring being made takes its place"
        );
        assert_eq!(book.take_slot(0), None, "no slot before it is made");
        book.install_ring(0, Ok(registered_ring(100)));
        assert_eq!(book.registered_rings(1), 1, "counted once");
        book.unreserve_ring(0);
        assert!(book.take_slot(0).is_some(), "a made ring stays");
        book.unreserve_ring(1);
        assert!(book.needs_ring(1), "the next operation makes it");
        assert_eq!(book.registered_rings(1), 1);
    }

    /// The order of a stream the crate does not own goes through the calling thread's sync
    /// stream: the other sync streams' conflicting records are waited for there, its own
    /// event is recorded once after them, and that event is what the stream waits for; a
    /// record known complete is forgotten instead; nothing conflicting, nothing queued.
    #[test]
    fn a_foreign_stream_is_ordered_through_the_callers_sync_stream() {
        let mut book = sync_streams(3); // 0: the caller's (stream 10, event 11)
        let a = [span(0x1000, 16, true)];
        let b = [span(0x2000, 16, true)];
        wrote(&mut book, 1, Touched::Spans(&a));
        wrote(&mut book, 2, Touched::Spans(&b));
        let (mut waits, mut records) = (Vec::new(), Vec::new());
        let via = book.order_through(
            0,
            Touched::Anything,
            |_| Ok(false),
            |e| {
                waits.push(e);
                Ok(())
            },
            |e, s| {
                records.push((e, s));
                Ok(())
            },
        );
        assert_eq!(
            via.unwrap(),
            Some(11),
            "the caller's stream waits for its own event"
        );
        assert_eq!(
            waits,
            [21, 31],
            "the others' records, waited for on the sync stream"
        );
        assert_eq!(
            records,
            [(11, 10)],
            "one record, its own event on its own stream"
        );
        assert_eq!(book.entries[0].event, 11);
        assert!(book.entries[0].pending.is_empty(), "it touched nothing");
        assert_eq!(book.pending(), 2, "the others' accesses stay pending");
        let untouched = [span(0x9000, 4, false)];
        let via = book.order_through(
            0,
            Touched::Spans(&untouched),
            |_| Ok(false),
            |_| panic!("no conflicting record"),
            |_, _| panic!("nothing to record"),
        );
        assert_eq!(via.unwrap(), None, "nothing conflicting: no wait at all");
        let via = book.order_through(
            0,
            Touched::Spans(&a),
            |e| Ok(e == 21),
            |_| panic!("a complete record is not waited for"),
            |_, _| panic!("nothing waited for, nothing to record"),
        );
        assert_eq!(via.unwrap(), None);
        assert!(book.entries[1].pending.is_empty(), "and is forgotten");
    }

    /// Where only the caller's own sync stream has conflicting records, its latest record
    /// (a bounce slot's event here) is what the stream waits for: no wait is queued on the
    /// sync stream and nothing recorded. A failure of a wait or of the record is the
    /// caller's error and lends nothing.
    #[test]
    fn a_foreign_stream_waits_for_the_callers_own_record_without_a_new_one() {
        let mut book = sync_streams(2);
        book.install_ring(0, Ok(new_ring(100)));
        let a = [span(0x1000, 16, true)];
        book.take_slot(0);
        book.record(0, Some(0), Touched::Spans(&a), |_, _| Ok(()))
            .unwrap();
        let via = book.order_through(
            0,
            Touched::Spans(&a),
            |_| Ok(false),
            |_| panic!("its own stream is ordered"),
            |_, _| panic!("its latest record covers it"),
        );
        assert_eq!(
            via.unwrap(),
            Some(100),
            "the slot's event, its latest record"
        );
        wrote(&mut book, 1, Touched::Spans(&a));
        let fail = |_| Err(Error::new("cuStreamWaitEvent", ErrorCode::InvalidHandle));
        let r = book.order_through(0, Touched::Spans(&a), |_| Ok(false), fail, |_, _| Ok(()));
        assert!(r.is_err(), "a failed wait is the caller's error");
        let fail = |_, _| Err(Error::new("cuEventRecord", ErrorCode::InvalidHandle));
        let r = book.order_through(0, Touched::Spans(&a), |_| Ok(false), |_| Ok(()), fail);
        assert!(r.is_err(), "a failed record too");
        assert_eq!(book.entries[0].event, 100, "and changes nothing");
    }

    /// Where no sync stream can carry the wait, the conflicting records are waited for on
    /// the host, each sync stream waited for is known complete afterwards, and the others
    /// keep their accesses.
    #[test]
    fn conflicting_records_waited_for_on_the_host_are_known_complete() {
        let mut book = sync_streams(3);
        book.install_ring(1, Ok(new_ring(200)));
        let a = [span(0x1000, 16, true)];
        let b = [span(0x2000, 16, true)];
        wrote(&mut book, 0, Touched::Spans(&a));
        book.take_slot(1);
        book.record(1, Some(0), Touched::Spans(&a), |_, _| Ok(()))
            .unwrap();
        wrote(&mut book, 2, Touched::Spans(&b));
        let mut synced = Vec::new();
        book.wait_conflicting_on_host(
            Touched::Spans(&a),
            |e| Ok(e == 11),
            |e| {
                synced.push(e);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(synced, [200], "sync stream 0's record was complete");
        assert!(book.entries[0].pending.is_empty() && book.entries[1].pending.is_empty());
        assert_eq!(bits(&book, 1), 0, "its slot is free again");
        assert_eq!(
            book.entries[2].pending.len(),
            1,
            "no conflict, still pending"
        );
        let fail = |_| Err(Error::new("cuEventSynchronize", ErrorCode::IllegalAddress));
        let r = book.wait_conflicting_on_host(Touched::Anything, |_| Ok(false), fail);
        assert!(r.is_err());
        assert_eq!(
            book.entries[2].pending.len(),
            1,
            "a failed wait forgets nothing"
        );
    }
}
