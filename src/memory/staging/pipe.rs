//! How a staged copy is cut and handed over: the DMA's units ([`Chunks`]), the threads'
//! units ([`Piece`]s of a chunk), and the hand-over of slots between the calling thread,
//! which runs the DMA, and the kept threads, which copy pieces ([`Pipe`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::workers::spin_until;
use super::{MIN_CHUNK, SLOT_BYTES, SLOTS};
use crate::error::{Error, ErrorCode, Result};

/// Doublings from [`MIN_CHUNK`] to a slot: the first chunks of a copy are 256 KiB, 256 KiB,
/// 512 KiB, 512 KiB, 1 MiB, 1 MiB, then up to 2 MiB.
const RAMP_STEPS: usize = 3;

/// The chunks of a host range `[start, start + bytes)`, in order: the DMA's units. Each is
/// a power of two between [`MIN_CHUNK`] and a slot, ends at a multiple of its size in the
/// address space, and is at most half of what is left; the first few are smaller
/// ([`RAMP_STEPS`]). So a large copy moves slots of 2 MiB, each filling one 2 MiB-aligned
/// block, starts with short chunks (the copy engine and the threads start at once instead
/// of after a whole slot's DMA) and ends with short ones (the last DMA is short too). The
/// threads copy a chunk in [`Piece`]s, so a chunk's size does not decide how many threads
/// work on it.
#[derive(Debug)]
pub(super) struct Chunks {
    /// Offset from `start` and length (not zero) of each chunk.
    list: Vec<(usize, usize)>,
}

impl Chunks {
    pub(super) fn new(start: usize, bytes: usize) -> Chunks {
        let end = start + bytes;
        let mut list = Vec::new();
        let mut at = start;
        while at < end {
            let half = ((end - at) / 2).max(1);
            let ramp = MIN_CHUNK << (list.len() / 2).min(RAMP_STEPS);
            let size = (1usize << half.ilog2())
                .min(ramp)
                .clamp(MIN_CHUNK, SLOT_BYTES);
            let hi = ((at / size + 1) * size).min(end);
            list.push((at - start, hi - at));
            at = hi;
        }
        Chunks { list }
    }

    pub(super) fn count(&self) -> usize {
        self.list.len()
    }

    /// Chunk `k < count()`: its offset from the range's start and its length (not zero, at
    /// most [`SLOT_BYTES`]).
    pub(super) fn get(&self, k: usize) -> (usize, usize) {
        self.list[k]
    }
}

/// The most bytes one thread copies between a slot and the host range at a time, as a
/// rule: a chunk's pieces go to as many threads, so that the copy of a 2 MiB slot is
/// shared (the calling thread, serial, handles the DMA of each chunk; tens of threads'
/// pieces per chunk would make it the limit, 2 MiB for one thread would leave the others
/// idle at the copy's end).
pub(super) const PIECE: usize = MIN_CHUNK;
/// The pieces of a copy into memory never written before (a new `Vec`): a whole chunk, so
/// that each 2 MiB huge page is faulted in by one thread while the others fault theirs
/// (pieces of one page stall every thread but one on that page's fault: `to_vec` of
/// 256 MiB fell from 18 to 10 GB/s on an H200).
pub(super) const WHOLE_CHUNK: usize = SLOT_BYTES;

/// `len` bytes at offset `at` of chunk `chunk`, held in slot `slot`: one thread's copy.
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    pub(super) chunk: usize,
    pub(super) slot: usize,
    pub(super) at: usize,
    pub(super) len: usize,
}

/// The hand-over between the calling thread (DMA) and the kept threads (`memcpy`): free
/// slots, slots holding a whole chunk (`ready`), the pieces handed out, the chunks done,
/// and whether the calling thread has stopped. Every byte of a slot has one owner at a
/// time: the slot is in `free`, with the DMA (queued and not yet waited for: also after a
/// stop, until the DMA is dropped), in `ready` waiting for the DMA (host to device), or
/// being copied by pieces, each piece's bytes by one thread (device to host, the front of
/// `ready` may be partly handed out). It changes hands only under the mutex, which orders
/// each owner's accesses before the next owner's; a slot copied by pieces changes hands
/// when its last piece is finished: every piece's thread finishes under the mutex after
/// its copy.
pub(super) struct Pipe {
    state: Mutex<PipeState>,
    /// Bumped (under the mutex) by every hand-over and the stop: what a spinning waiter
    /// watches.
    changes: AtomicU64,
    /// The calling thread waits here (a slot freed or filled, a chunk copied out).
    to_main: Condvar,
    /// The kept threads wait here (a slot filled or freed, the stop).
    to_workers: Condvar,
}

pub(super) struct PipeState {
    pub(super) free: VecDeque<usize>,
    /// Device to host: slots the DMA filled, their pieces to copy out (from `claimed` bytes
    /// into the front one). Host to device: slots filled, for the DMA.
    pub(super) ready: VecDeque<(usize, usize)>,
    /// Bytes of the front of `ready` whose pieces are handed out (device to host).
    claimed: usize,
    /// Host to device: the chunk being handed out by pieces, its slot, and the bytes of it
    /// handed out.
    filling: Option<(usize, usize, usize)>,
    /// Bytes of each slot's chunk whose piece is not finished.
    left: [usize; SLOTS],
    /// The most bytes of a piece: [`PIECE`] or [`WHOLE_CHUNK`].
    piece: usize,
    /// The next chunk to hand out (host to device).
    next: usize,
    /// Chunks copied out of their slot (device to host).
    pub(super) done: usize,
    stop: bool,
    /// A kept thread panicked while it held a piece ([`BreakOnUnwind`]): its slot will
    /// never change hands, so the copy cannot complete.
    broken: bool,
    /// The calling thread is asleep on `to_main`.
    main_asleep: bool,
    /// Kept threads asleep on `to_workers`.
    workers_asleep: usize,
}

impl PipeState {
    /// Device to host: the next piece of the front ready slot.
    fn piece_out(&mut self, chunks: &Chunks) -> Option<Piece> {
        let &(chunk, slot) = self.ready.front()?;
        let len = chunks.get(chunk).1;
        let piece = Piece {
            chunk,
            slot,
            at: self.claimed,
            len: self.piece.min(len - self.claimed),
        };
        self.claimed += piece.len;
        if self.claimed == len {
            self.ready.pop_front();
            self.claimed = 0;
        }
        Some(piece)
    }

    /// The next piece to copy now (`to_host`: [`piece_out`](PipeState::piece_out), else
    /// [`piece_in`](PipeState::piece_in)).
    fn piece(&mut self, chunks: &Chunks, to_host: bool) -> Option<Piece> {
        if to_host {
            self.piece_out(chunks)
        } else {
            self.piece_in(chunks)
        }
    }

    /// Host to device: the next piece of the chunk being handed out, or of the next chunk
    /// (taking a free slot for it).
    fn piece_in(&mut self, chunks: &Chunks) -> Option<Piece> {
        if self.stop {
            // the copy is ending: its slots are not needed any more
            return None;
        }
        if self.filling.is_none() {
            if self.next >= chunks.count() {
                return None;
            }
            let slot = self.free.pop_front()?;
            self.left[slot] = chunks.get(self.next).1;
            self.filling = Some((self.next, slot, 0));
            self.next += 1;
        }
        let (chunk, slot, claimed) = self.filling?;
        let len = chunks.get(chunk).1;
        let piece = Piece {
            chunk,
            slot,
            at: claimed,
            len: self.piece.min(len - claimed),
        };
        self.filling = (claimed + piece.len < len).then_some((chunk, slot, claimed + piece.len));
        Some(piece)
    }
}

/// How long a waiter of the pipe spins before it sleeps: a hand-over usually comes within
/// microseconds, and waking a sleeping thread costs tens of them.
const PIPE_SPIN: Duration = Duration::from_micros(50);
/// How long the calling thread spins before it sleeps: it runs the copy engine, and every
/// time it sleeps the engine may run dry for a wake-up's time.
const MAIN_SPIN: Duration = Duration::from_millis(1);

impl Pipe {
    /// A pipe of `slots` slots (at most [`SLOTS`]) whose pieces are at most `piece`
    /// bytes.
    pub(super) fn new(slots: usize, piece: usize) -> Pipe {
        Pipe {
            state: Mutex::new(PipeState {
                free: (0..slots).collect(),
                ready: VecDeque::with_capacity(slots),
                claimed: 0,
                filling: None,
                left: [0; SLOTS],
                piece,
                next: 0,
                done: 0,
                stop: false,
                broken: false,
                main_asleep: false,
                workers_asleep: 0,
            }),
            changes: AtomicU64::new(0),
            to_main: Condvar::new(),
            to_workers: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the next hand-over (`main`: the calling thread, else a kept thread):
    /// spins a while, then sleeps until woken.
    fn wait<'a>(&'a self, st: MutexGuard<'a, PipeState>, main: bool) -> MutexGuard<'a, PipeState> {
        let seen = self.changes.load(Ordering::Relaxed);
        drop(st);
        let budget = if main { MAIN_SPIN } else { PIPE_SPIN };
        let changed = spin_until(budget, || self.changes.load(Ordering::Acquire) != seen);
        let mut st = self.lock();
        if changed || self.changes.load(Ordering::Relaxed) != seen {
            return st;
        }
        if main {
            st.main_asleep = true;
            st = self
                .to_main
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
            st.main_asleep = false;
        } else {
            st.workers_asleep += 1;
            st = self
                .to_workers
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
            st.workers_asleep -= 1;
        }
        st
    }

    /// The calling thread waits until `until` holds; an error if a kept thread panicked
    /// holding a piece (the copy cannot complete).
    pub(super) fn wait_main(&self, until: impl Fn(&PipeState) -> bool) -> Result<()> {
        let mut st = self.lock();
        loop {
            if st.broken {
                return Err(Error::with_detail(
                    "staged copy",
                    ErrorCode::Unknown,
                    "a copying thread panicked: the copy is incomplete",
                ));
            }
            if until(&st) {
                return Ok(());
            }
            st = self.wait(st, true);
        }
    }

    /// A number that every slot filled or freed and the stop change (not the calling
    /// thread's taking a slot or a ready run): the calling thread, watching it, learns of a
    /// slot filled without the lock.
    pub(super) fn version(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    pub(super) fn try_free(&self) -> Option<usize> {
        self.lock().free.pop_front()
    }

    /// Slots in the free list (a test's check that every slot came back).
    #[cfg(test)]
    pub(super) fn free_count(&self) -> usize {
        self.lock().free.len()
    }

    /// The front of `ready` and up to `most - 1` ready slots after it in one run: the
    /// chunks after its chunk, each in the slot after the one before, every chunk but the
    /// last a whole slot (so the run is one range of the staging and of the copy). Returns
    /// the first chunk, its slot and the run's length in slots.
    pub(super) fn try_ready_run(
        &self,
        chunks: &Chunks,
        most: usize,
    ) -> Option<(usize, usize, usize)> {
        let mut st = self.lock();
        let (chunk, slot) = st.ready.pop_front()?;
        let mut n = 1;
        while n < most && chunks.get(chunk + n - 1).1 == SLOT_BYTES {
            let Some(i) = st.ready.iter().position(|&e| e == (chunk + n, slot + n)) else {
                break;
            };
            st.ready.remove(i);
            n += 1;
        }
        Some((chunk, slot, n))
    }

    /// The next piece to copy, if one is there now (`to_host`: out of a ready slot; else
    /// into a slot, from the next chunk).
    pub(super) fn try_piece(&self, chunks: &Chunks, to_host: bool) -> Option<Piece> {
        let piece = self.lock().piece(chunks, to_host);
        #[cfg(test)]
        if piece.is_none() {
            LOOKS.fetch_add(1, Ordering::Relaxed);
        }
        piece
    }

    /// A kept thread: the next piece to copy, waiting for one; `None` once the calling
    /// thread has stopped (device to host: and no ready slot is left) or, host to device,
    /// every chunk is handed out.
    fn take_piece(&self, chunks: &Chunks, to_host: bool) -> Option<Piece> {
        let mut st = self.lock();
        loop {
            if let Some(piece) = st.piece(chunks, to_host) {
                return Some(piece);
            }
            let handed_out = !to_host && st.next >= chunks.count() && st.filling.is_none();
            if st.stop || handed_out {
                return None;
            }
            st = self.wait(st, false);
        }
    }

    /// A piece copied: its slot changes hands once its last piece is (`to_host`: freed,
    /// its chunk done; else ready for the DMA), for the side `wake` names.
    pub(super) fn finish(&self, piece: Piece, to_host: bool, wake: Wake) {
        let mut st = self.lock();
        st.left[piece.slot] -= piece.len;
        if st.left[piece.slot] > 0 {
            return;
        }
        if to_host {
            st.free.push_back(piece.slot);
            st.done += 1;
        } else {
            st.ready.push_back((piece.chunk, piece.slot));
        }
        self.changed(st, wake);
    }

    /// A kept thread's part of a copy: copies pieces with `copy` (which finishes each, see
    /// [`Pipe::finish`], for the calling thread: [`Wake::Main`]) until [`Pipe::take_piece`]
    /// has none left; a panic in it breaks the pipe ([`BreakOnUnwind`]).
    pub(super) fn serve(&self, chunks: &Chunks, to_host: bool, copy: impl Fn(Piece, Wake)) {
        let _break = BreakOnUnwind(self);
        while let Some(piece) = self.take_piece(chunks, to_host) {
            copy(piece, Wake::Main);
        }
    }

    /// Stops the pipe (`broken`: it cannot complete, see [`BreakOnUnwind`]) and wakes the
    /// kept threads (and, broken, the calling thread) to see it.
    fn halt(&self, broken: bool) {
        let mut st = self.lock();
        st.stop = true;
        st.broken |= broken;
        self.changes.fetch_add(1, Ordering::Release);
        drop(st);
        if broken {
            self.to_main.notify_all();
        }
        self.to_workers.notify_all();
    }

    /// A slot holding `chunk`, filled by the DMA: its pieces are for the kept threads.
    pub(super) fn put_ready(&self, chunk: usize, slot: usize, len: usize) {
        let mut st = self.lock();
        st.left[slot] = len;
        st.ready.push_back((chunk, slot));
        let pieces = len.div_ceil(st.piece);
        self.changed(st, Wake::Workers(pieces));
    }

    /// The `n` slots from `slot` on free again after their DMA: the next chunks' pieces are
    /// for the kept threads.
    pub(super) fn put_free(&self, slot: usize, n: usize) {
        let mut st = self.lock();
        st.free.extend(slot..slot + n);
        let pieces = n * SLOT_BYTES / st.piece;
        self.changed(st, Wake::Workers(pieces));
    }

    /// Publishes a hand-over made under `st` to the spinning waiters, and wakes sleeping
    /// ones of the side `wake` names.
    fn changed(&self, st: MutexGuard<'_, PipeState>, wake: Wake) {
        self.changes.fetch_add(1, Ordering::Release);
        let (main_asleep, workers_asleep) = (st.main_asleep, st.workers_asleep);
        drop(st);
        match wake {
            Wake::Main if main_asleep => self.to_main.notify_one(),
            Wake::Workers(n) => {
                for _ in 0..n.min(workers_asleep) {
                    self.to_workers.notify_one();
                }
            }
            _ => {}
        }
    }
}

/// Whom a hand-over is for: the calling thread, up to that many kept threads, or the
/// calling thread itself (which looks again without waiting).
#[derive(Clone, Copy)]
pub(super) enum Wake {
    Main,
    Workers(usize),
    Nobody,
}

/// Stops the pipe when the calling thread leaves the copy (done, failed or panicking), so
/// that the kept threads return from the job.
pub(super) struct StopOnDrop<'a>(pub(super) &'a Pipe);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.halt(false);
    }
}

/// Breaks the pipe if its kept thread unwinds from the job (a panic while it may hold a
/// piece, which would then never be finished): the calling thread's wait returns an
/// error instead of waiting for good, and the other kept threads stop. Nothing of the
/// dead thread's piece is used again: the calling thread leaves the copy, and `lend`
/// takes the job back from the threads still in it before the staging is reused.
struct BreakOnUnwind<'a>(&'a Pipe);

impl Drop for BreakOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.halt(true);
        }
    }
}

/// Looks for a piece that found none ([`Pipe::try_piece`]), for a test that the calling
/// thread does not poll.
#[cfg(test)]
pub(super) static LOOKS: AtomicU64 = AtomicU64::new(0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_range_exactly_at_aligned_boundaries() {
        for (start, bytes) in [
            (0x1000_0000usize, 1usize),
            (0x1000_0001, 3 << 20),
            (0x2000_0000, 8 << 20),
            (0x2000_0010, (64 << 10) * 5 - 17),
            (0x3fff_fff0, 7),
            (0x4000_1000, 256 << 20),
            (0x5000_0000, 64 << 20),
        ] {
            let c = Chunks::new(start, bytes);
            let mut at = 0;
            for k in 0..c.count() {
                let (offset, len) = c.get(k);
                assert_eq!(offset, at, "chunk {k} follows the previous one");
                assert!(len > 0 && len <= SLOT_BYTES);
                let (lo, hi) = (start + offset, start + offset + len);
                // the block of the chunk's size it lies in: a power of two
                let size = len.next_power_of_two().max(MIN_CHUNK);
                assert_eq!(
                    lo / size,
                    (hi - 1) / size,
                    "a chunk stays inside one aligned block"
                );
                at += len;
            }
            assert_eq!(at, bytes, "{start:#x} + {bytes}");
        }
        // a large copy starts short, moves whole 2 MiB slots, and ends short
        let c = Chunks::new(0x4000_0000, 256 << 20);
        assert_eq!(c.get(0).1, MIN_CHUNK);
        assert!((0..10).any(|k| c.get(k).1 == SLOT_BYTES));
        let whole: usize = (0..c.count())
            .map(|k| c.get(k).1)
            .filter(|&l| l == SLOT_BYTES)
            .sum();
        assert!(whole > 200 << 20, "{whole} bytes in whole slots");
        assert_eq!(c.get(c.count() - 1).1, MIN_CHUNK);
        assert!(c.count() < 200, "{} chunks", c.count());
    }

    /// A run is the front of `ready` and the entries of the next chunks in the next slots,
    /// all but the last chunk a whole slot, at most `most` of them.
    #[test]
    fn ready_slots_that_follow_each_other_leave_as_one_run() {
        let chunks = Chunks::new(0, 64 << 20);
        let whole = |k: usize| chunks.get(k).1 == SLOT_BYTES;
        let w = (0..chunks.count()).find(|&k| whole(k)).unwrap();
        let last = (0..chunks.count()).rev().find(|&k| whole(k)).unwrap();
        assert!(!whole(w - 1) && !whole(last + 1) && last > w + 6);
        let pipe = Pipe::new(SLOTS, PIECE);
        let run = |ready: &[(usize, usize)], most: usize| {
            pipe.lock().ready = ready.iter().copied().collect();
            let runs: Vec<_> = std::iter::from_fn(|| pipe.try_ready_run(&chunks, most)).collect();
            assert!(pipe.lock().ready.is_empty());
            runs
        };
        // the next chunk in the next slot joins, wherever it is in `ready`, up to `most`
        assert_eq!(
            run(
                &[
                    (w + 1, 5),
                    (w, 4),
                    (w + 2, 6),
                    (w + 3, 7),
                    (w + 4, 8),
                    (w + 5, 10)
                ],
                4
            ),
            [(w + 1, 5, 4), (w, 4, 1), (w + 5, 10, 1)]
        );
        assert_eq!(run(&[(w, 4), (w + 1, 5)], 1), [(w, 4, 1), (w + 1, 5, 1)]);
        // a chunk shorter than a slot ends a run: the next one's bytes would not follow it
        // in the staging
        assert_eq!(run(&[(w - 1, 0), (w, 1)], 4), [(w - 1, 0, 1), (w, 1, 1)]);
        assert_eq!(run(&[(last, 2), (last + 1, 3)], 4), [(last, 2, 2)]);
        assert_eq!(
            run(&[(last + 1, 3), (last + 2, 4)], 4),
            [(last + 1, 3, 1), (last + 2, 4, 1)]
        );
        // the next chunk in another slot, or another chunk in the next slot: no run
        assert_eq!(run(&[(w, 4), (w + 1, 6)], 4), [(w, 4, 1), (w + 1, 6, 1)]);
        assert_eq!(run(&[(w, 4), (w + 2, 5)], 4), [(w, 4, 1), (w + 2, 5, 1)]);
    }

    /// Runs out of any ready queue (random): each entry leaves once, in a
    /// run of the next chunks in the next slots, all but the last whole, at most `most`.
    #[test]
    fn runs_out_of_random_ready_queues_take_each_entry_once() {
        let chunks = Chunks::new(SLOT_BYTES - (256 << 10), 60 << 20);
        let count = chunks.count();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rnd = |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        let pipe = Pipe::new(SLOTS, PIECE);
        let mut longest = 0;
        for _ in 0..20_000 {
            // distinct chunks in distinct slots, often following each other, shuffled
            let (first, s0) = (rnd(count), rnd(SLOTS));
            let mut entries: Vec<(usize, usize)> = Vec::new();
            for i in 0..=rnd(SLOTS) {
                let (c, s) = if rnd(3) > 0 {
                    (first + i, (s0 + i) % SLOTS)
                } else {
                    (rnd(count), rnd(SLOTS))
                };
                if c < count && entries.iter().all(|&(d, t)| d != c && t != s) {
                    entries.push((c, s));
                }
            }
            for i in (1..entries.len()).rev() {
                entries.swap(i, rnd(i + 1));
            }
            let most = 1 + rnd(4);
            pipe.lock().ready = entries.iter().copied().collect();
            while let Some((c, s, n)) = pipe.try_ready_run(&chunks, most) {
                assert!((1..=most).contains(&n));
                longest = longest.max(n);
                for i in 0..n {
                    let at = entries.iter().position(|&e| e == (c + i, s + i));
                    entries.remove(at.expect("each entry leaves once"));
                    assert!(i + 1 == n || chunks.get(c + i).1 == SLOT_BYTES);
                }
            }
            assert!(entries.is_empty());
        }
        assert_eq!(longest, 4, "runs of every length up to 4");
    }

    #[test]
    fn freed_slots_are_handed_out_in_turn() {
        let chunks = Chunks::new(0, 64 << 20);
        let pipe = Pipe::new(SLOTS, PIECE);
        let order: Vec<usize> = std::iter::from_fn(|| pipe.try_free()).collect();
        assert_eq!(order, (0..SLOTS).collect::<Vec<_>>());
        pipe.put_free(6, 3);
        pipe.put_free(2, 1);
        assert_eq!(pipe.lock().free, [6, 7, 8, 2]);
        let filling: Vec<usize> = std::iter::from_fn(|| {
            let piece = pipe.try_piece(&chunks, false)?;
            pipe.lock().filling = None;
            Some(piece.slot)
        })
        .collect();
        assert_eq!(filling, [6, 7, 8, 2]);
    }

    /// A slot changes hands only when the last of its chunk's pieces is finished, and the
    /// pieces of a chunk cover it exactly, each handed out once.
    #[test]
    fn a_slot_changes_hands_only_when_its_last_piece_is_finished() {
        let chunks = Chunks::new(0, 64 << 20);
        let whole = (0..chunks.count())
            .find(|&k| chunks.get(k).1 == SLOT_BYTES)
            .unwrap();
        // device to host: a filled slot's pieces go out one by one
        let pipe = Pipe::new(4, PIECE);
        let slot = pipe.try_free().unwrap();
        pipe.put_ready(whole, slot, SLOT_BYTES);
        let pieces: Vec<Piece> = std::iter::from_fn(|| pipe.try_piece(&chunks, true)).collect();
        assert_eq!(pieces.len(), SLOT_BYTES / PIECE);
        let mut at = 0;
        for p in &pieces {
            assert_eq!((p.chunk, p.slot, p.at), (whole, slot, at));
            at += p.len;
        }
        assert_eq!(at, SLOT_BYTES);
        for (i, &p) in pieces.iter().enumerate() {
            let st = pipe.lock();
            assert!(
                !st.free.contains(&slot) && st.done == 0,
                "freed after {i} pieces"
            );
            drop(st);
            pipe.finish(p, true, Wake::Nobody);
        }
        let st = pipe.lock();
        assert!(st.free.contains(&slot) && st.done == 1);
        drop(st);
        // host to device: the next chunks' pieces, each chunk ready after its last piece
        let pipe = Pipe::new(4, PIECE);
        let mut handed = Vec::new();
        while let Some(p) = pipe.try_piece(&chunks, false) {
            handed.push(p);
        }
        // four slots: the first four chunks (256 KiB, 256 KiB, 512 KiB, 512 KiB: six
        // pieces) were taken, and no fifth without a free slot
        assert_eq!(handed.len(), 6);
        assert!(handed.iter().all(|p| p.chunk < 4));
        let len_of = |k: usize| chunks.get(k).1;
        assert_eq!(
            handed.iter().map(|p| p.len).sum::<usize>(),
            (0..4).map(len_of).sum::<usize>()
        );
        for (i, &p) in handed.iter().enumerate() {
            pipe.finish(p, false, Wake::Nobody);
            let ready: Vec<usize> = pipe.lock().ready.iter().map(|&(c, _)| c).collect();
            let finished = |k: usize| {
                handed[..=i].iter().filter(|p| p.chunk == k).count()
                    == handed.iter().filter(|p| p.chunk == k).count()
            };
            let expected: Vec<usize> = (0..4).filter(|&k| finished(k)).collect();
            assert_eq!(ready, expected, "after {} pieces", i + 1);
        }
    }

    /// A kept thread that panics while it holds a piece never finishes it, so its slot
    /// never changes hands: the calling thread's wait returns an error instead of waiting
    /// for good.
    #[test]
    fn a_panic_holding_a_piece_breaks_the_wait_of_the_calling_thread() {
        use std::sync::{Arc, mpsc};
        let chunks = Arc::new(Chunks::new(0, 512 << 10));
        let pipe = Arc::new(Pipe::new(2, PIECE));
        let slot = pipe.try_free().unwrap();
        pipe.put_ready(0, slot, chunks.get(0).1);
        let (p, c) = (Arc::clone(&pipe), Arc::clone(&chunks));
        let worker = std::thread::spawn(move || {
            p.serve(&c, true, |_piece, _| {
                panic!("a job's bug while holding a piece")
            });
        });
        assert!(worker.join().is_err());
        let (tx, rx) = mpsc::channel();
        let p = Arc::clone(&pipe);
        std::thread::spawn(move || {
            let _ = tx.send(p.wait_main(|st| st.done == 1));
        });
        let waited = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the calling thread still waits for the dead thread's piece");
        assert!(waited.is_err());
        // a thread that returns normally breaks nothing
        let pipe = Pipe::new(2, PIECE);
        drop(BreakOnUnwind(&pipe));
        assert!(pipe.wait_main(|_| true).is_ok());
    }
}
