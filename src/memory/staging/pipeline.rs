//! The copies: a copy cut into chunks ([`Chunks`]); the calling thread queues each
//! chunk's DMA between the device and a slot of a staging (asynchronously, on the stream
//! the copy is given: the thread's sync stream, or the legacy stream where it has none; an
//! event after each) and waits for the slot's event; the staging's kept threads
//! ([`Workers`](super::workers::Workers)) move each chunk between its slot and the host
//! memory in pieces ([`Pipe`]); the calling thread copies pieces itself wherever it would
//! otherwise wait for them.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cuda_driver_sys::CUctx_st;

use super::pipe::{Chunks, PIECE, Piece, Pipe, StopOnDrop, WHOLE_CHUNK, Wake};
use super::registry::{Lease, acquire};
use super::streaming::copy_streaming;
use super::{HUGE_PAGE_MIN, MAX_WORKERS, MIN_BYTES_PER_WORKER, SLOT_BYTES, SLOTS, Staging, thp};
use crate::context;
use crate::driver::{self, CUdeviceptr, CUevent, CUstream};
use crate::error::Result;

/// Whether the driver knows the host address (page-locked, registered or managed memory),
/// in which case it copies at full speed itself.
pub(super) fn host_is_known(p: *const u8) -> Result<bool> {
    Ok(driver::pointer_info(p as usize as CUdeviceptr)?.known)
}

/// A staging for a copy in `ctx` (current), with at least one kept thread (alone, the
/// calling thread copies slower than the driver's path). `held`: a scope of the crate holds
/// `ctx` (the memory's own context); else `ctx` is merely current, perhaps made so by
/// another library, and is given a first staging only where the crate holds it after all
/// (`context::held`): a staging of a context no teardown of the crate ends would be kept
/// page-locked until the process ends.
fn lease(ctx: NonNull<CUctx_st>, held: bool) -> Option<Lease> {
    if threads_to_keep() == 0 {
        // one core: no staging is made at all (it would be page-locked for nothing)
        return None;
    }
    let held = || held || context::held(ctx.as_ptr());
    // `Staging::create` refuses a staging that could start no thread
    acquire(ctx.as_ptr() as usize, held, Staging::create)
}

/// Copies `bytes` from the device at `src` into host memory at `dst` through a staging of
/// `ctx` (`held`: as [`lease`]), the DMAs queued on `stream`: `Ok(true)` when done,
/// `Ok(false)` when nothing was copied and the caller takes the driver's path (no staging
/// to be had, or host memory the driver knows). `fresh`: `dst` is a new allocation of the
/// caller's (advised as huge-page memory when large).
///
/// # Safety
/// `ctx` is alive and current on the calling thread; `stream` is a live stream of `ctx`
/// that only this call uses meanwhile (the thread's sync stream) or null (its legacy
/// stream); `src` is device memory readable in it for `bytes`, ordered on `stream` after
/// every write the copy must see; `dst` is host memory valid for `bytes` of writes (it may
/// be uninitialised) that nothing else reads or writes during the call.
pub(crate) unsafe fn device_to_host(
    ctx: NonNull<CUctx_st>,
    held: bool,
    stream: CUstream,
    dst: *mut u8,
    src: CUdeviceptr,
    bytes: usize,
    fresh: bool,
) -> Result<bool> {
    if !fresh && host_is_known(dst)? {
        return Ok(false);
    }
    if fresh && bytes >= HUGE_PAGE_MIN {
        thp::advise_huge(dst, bytes);
    }
    // SAFETY: the caller's guarantees for `dst`; `staged` leases the staging for this copy
    // only and drops `dma` before the lease; `dma` copies from the source (the caller's
    // guarantee) into the slots it is given.
    staged(
        ctx,
        held,
        DriverDma::new(stream, src, true),
        bytes,
        |staging, workers, dma| unsafe {
            pipeline_to_host(staging, dst, bytes, workers, fresh, dma)
        },
    )
}

/// Runs `copy` with a staging of `ctx` (leased for this copy only), the kept threads to
/// lend it, and `dma`, the DMA between its slots and the device; the DMA is dropped
/// (waiting for what it queued) before the lease. `Ok(false)`: no staging with threads to
/// be had, nothing was copied.
fn staged(
    ctx: NonNull<CUctx_st>,
    held: bool,
    mut dma: DriverDma,
    bytes: usize,
    copy: impl FnOnce(&Staging, usize, &mut DriverDma) -> Result<()>,
) -> Result<bool> {
    let Some(lease) = lease(ctx, held) else {
        return Ok(false);
    };
    let Some(staging) = lease.staging() else {
        return Ok(false);
    };
    let workers = workers_for_copy(bytes, staging.workers.count());
    let copied = copy(staging, workers, &mut dma);
    drop(dma);
    drop(lease);
    copied.map(|()| true)
}

/// Copies `bytes` from host memory at `src` to the device at `dst` through a staging of
/// `ctx` (`held`: as [`lease`]), the DMAs queued on `stream`: `Ok(true)` when done
/// (complete: every DMA waited for), `Ok(false)` when nothing was copied and the caller
/// takes the driver's path.
///
/// # Safety
/// `ctx` is alive and current on the calling thread; `stream` as for [`device_to_host`];
/// `dst` is device memory writable in it for `bytes`, ordered on `stream` after every
/// earlier use the copy must follow; `src` is host memory valid for `bytes` of reads that
/// nothing writes during the call.
pub(crate) unsafe fn host_to_device(
    ctx: NonNull<CUctx_st>,
    held: bool,
    stream: CUstream,
    dst: CUdeviceptr,
    src: *const u8,
    bytes: usize,
) -> Result<bool> {
    if host_is_known(src)? {
        return Ok(false);
    }
    // SAFETY: the caller's guarantees for `src`; `staged` leases the staging for this copy
    // only and drops `dma` before the lease; `dma` copies the slots it is given into the
    // destination (the caller's guarantee).
    staged(
        ctx,
        held,
        DriverDma::new(stream, dst, false),
        bytes,
        |staging, workers, dma| unsafe { pipeline_from_host(staging, src, bytes, workers, dma) },
    )
}

/// The device side of a staged copy: the driver's ([`DriverDma`]) or a test's fake.
///
/// # Safety
/// An implementation's `queue` reads or writes at most `len` bytes at the address it is given,
/// and only until `wait` for the DMA's first slot returned (or `wait_or` returned `true`) or
/// the implementation is dropped (which waits for everything it queued).
unsafe trait Dma {
    /// Queues the DMA of the `len` bytes at `offset` in the copy between the device and the
    /// staging from slot `slot` on, at `host` (one slot, or a run of slots that follow each
    /// other, [`RUN_SLOTS`] at most), known as slot `slot` to [`Dma::wait`].
    ///
    /// # Safety
    /// `host` is valid for `len` bytes (of writes, device to host) and the pipeline's until
    /// `wait(slot)` returned (or `wait_or(slot, ..)` returned `true`); `offset + len` lies
    /// in the copy.
    unsafe fn queue(&mut self, slot: usize, host: *mut u8, offset: usize, len: usize)
    -> Result<()>;
    /// Waits until the DMA last queued from `slot` is complete; `slot` is the first slot of
    /// a DMA queued and not yet waited for (never one inside a run).
    fn wait(&mut self, slot: usize) -> Result<()>;
    /// As [`Dma::wait`], or until `stop` holds, whichever comes first: `true` when the DMA
    /// is complete (as after `wait`), `false` when it may still run (`wait` for it later).
    fn wait_or(&mut self, slot: usize, stop: &dyn Fn() -> bool) -> Result<bool>;
}

/// The DMA of a staged copy through the driver: `cuMemcpyDtoHAsync`/`cuMemcpyHtoDAsync` on
/// the copy's stream (the calling thread's sync stream, a non-blocking stream that waits for
/// no `StreamFlags::Default` stream; the current context's legacy stream where the thread
/// has none) between a slot or a run of slots (page-locked) and the device, and the event
/// of its first slot recorded after it. The events are made for
/// this copy (when a DMA first starts at a slot) and destroyed at its end: the crate keeps
/// no driver handle between copies.
/// Every slot the copy uses may have a DMA in flight (a smaller queue measured slower: the
/// copy engine ran dry while the calling thread handed slots over).
struct DriverDma {
    /// A live stream of the current context, only this copy's meanwhile, or null (the
    /// legacy stream).
    stream: CUstream,
    device: CUdeviceptr,
    to_host: bool,
    events: [CUevent; SLOTS],
    /// DMAs queued and not waited for.
    pending: usize,
}

impl DriverDma {
    fn new(stream: CUstream, device: CUdeviceptr, to_host: bool) -> DriverDma {
        DriverDma {
            stream,
            device,
            to_host,
            events: [std::ptr::null_mut(); SLOTS],
            pending: 0,
        }
    }

    /// The event of the DMAs from `slot`; `None` where none started (nothing to wait for).
    fn event(&self, slot: usize) -> Option<CUevent> {
        let event = self.events[slot];
        debug_assert!(
            !event.is_null(),
            "a wait for slot {slot}, where no DMA started"
        );
        (!event.is_null()).then_some(event)
    }
}

// SAFETY: a queued copy touches its slot, or its run of slots, until the event of its first
// slot completes: `wait` waits for it, `wait_or` returns `true` only once it has, and `Drop`
// waits for the copy's stream while any is pending.
unsafe impl Dma for DriverDma {
    unsafe fn queue(
        &mut self,
        slot: usize,
        host: *mut u8,
        offset: usize,
        len: usize,
    ) -> Result<()> {
        if self.events[slot].is_null() {
            self.events[slot] = driver::event_create(EVENT_DISABLE_TIMING)?;
        }
        let device = self.device + offset as u64;
        self.pending += 1;
        let stream = self.stream;
        if self.to_host {
            // SAFETY: the slot is valid for `len` bytes of writes until it is waited for
            // (the caller's promise) and page-locked (a staging's; were its context gone
            // behind the crate's back, merely pageable: then the driver completes the copy
            // before it returns, still correct); the device range lies
            // in the copy's source (the pipeline's callers' promise); the stream is a live
            // stream of the current context, or null, its legacy stream (the promise of
            // `device_to_host`'s and `host_to_device`'s callers).
            unsafe { driver::memcpy_dtoh_async(host.cast::<c_void>(), device, len, stream) }?;
        } else {
            let host = host.cast_const().cast::<c_void>();
            // SAFETY: as above, for reads of the slot and writes of the destination.
            unsafe { driver::memcpy_htod_async(device, host, len, stream) }?;
        }
        // SAFETY: the event was made in the current context, the stream's.
        unsafe { driver::event_record(self.events[slot], stream) }
    }

    fn wait(&mut self, slot: usize) -> Result<()> {
        let Some(event) = self.event(slot) else {
            return Ok(());
        };
        // SAFETY: an event of this copy's, alive until `Drop`.
        unsafe { driver::event_synchronize(event) }?;
        self.pending = self.pending.saturating_sub(1);
        Ok(())
    }

    fn wait_or(&mut self, slot: usize, stop: &dyn Fn() -> bool) -> Result<bool> {
        let Some(event) = self.event(slot) else {
            return Ok(true);
        };
        let start = Instant::now();
        loop {
            // SAFETY: an event of this copy's, alive until `Drop`.
            if unsafe { driver::event_query(event) }? {
                self.pending = self.pending.saturating_sub(1);
                return Ok(true);
            }
            if stop() {
                return Ok(false);
            }
            // the DMA queued behind other work of its stream, and nothing filled:
            // wait as the driver waits instead of spinning on
            if start.elapsed() > POLL_FOR {
                return self.wait(slot).map(|()| true);
            }
            std::hint::spin_loop();
        }
    }
}

/// The most slots one DMA of an upload covers: ready slots that follow each other in the
/// staging and in the copy go to the copy engine as one DMA of up to 8 MiB (fewer calls and
/// events; 64 MiB uploads measured 38.7 GB/s on average against 37.2 with a DMA per slot,
/// within the spread of runs: `bench/results/2026-11-28-28-seventh/`).
const RUN_SLOTS: usize = 4;

/// The most slots an upload uses (of the staging's [`SLOTS`]): 16 MiB of staging in use at
/// once. Measured on two H200s against all 16 (`bench/results/2026-11-28-28-eighth/`, six
/// runs of plain copies): 64 MiB uploads 35.4-39.6 GB/s against 29.8-38.3, 256 MiB
/// 44.4-46.8 against 39.3-44.4.
const UPLOAD_SLOTS: usize = SLOTS / 2;

/// An upload of at most this many bytes writes the slots with streaming stores
/// ([`copy_streaming`]): the copy engine then reads them from memory, not out of the
/// copying cores' caches (the likely reason why a short copy's DMAs then run sooner and
/// faster). Measured on H200s
/// (`bench/results/2026-11-28-28-eighth/`, six runs against seven with plain copies):
/// staged uploads of 512 KiB took 0.76-0.83 of the driver's time against 1.03-1.35, of
/// 2 MiB 0.50-0.61 against 0.91-1.09, of 16 MiB 0.28-0.42 against 0.37-0.52. A longer
/// upload copies plainly: streaming stores into the first 16 or 32 MiB of 64 MiB uploads
/// made them slower (31.3-33.9 GB/s in four runs on one machine, where plain copies
/// through 8 slots ran 35.4-39.6), and into all of 256 MiB ones too (38.6-41.4 in two
/// runs against 44.4-46.8).
const STREAMING_UPLOAD_MAX: usize = 16 << 20;

/// How long [`DriverDma::wait_or`] polls before it waits for the event as the driver waits
/// (a DMA of a run of 8 MiB takes about 170 µs at the copy engine's speed; one that takes
/// longer waits behind other work of its stream).
const POLL_FOR: Duration = Duration::from_millis(1);

/// `CU_EVENT_DISABLE_TIMING`: completion only.
const EVENT_DISABLE_TIMING: u32 = 0x2;

impl Drop for DriverDma {
    /// Waits for the copy's stream if a DMA may still run (an error path), then destroys the
    /// copy's events.
    fn drop(&mut self) {
        if self.pending > 0 {
            // SAFETY: a live stream of the current context, or null, its legacy stream.
            let _ = unsafe { driver::stream_wait_idle(self.stream) };
        }
        for event in self.events {
            if !event.is_null() {
                // SAFETY: made by `queue`, nothing uses it any more.
                let _ = unsafe { driver::event_destroy(event) };
            }
        }
    }
}

/// The machine's parallelism, read once (`available_parallelism` reads cgroup files).
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The threads a staging keeps: one fewer than the cores (the calling thread runs the
/// DMA), at most [`MAX_WORKERS`].
pub(super) fn threads_to_keep() -> usize {
    MAX_WORKERS.min(cores().saturating_sub(1))
}

/// The kept threads a copy of `bytes` is lent: one per [`MIN_BYTES_PER_WORKER`], at most
/// `threads`.
fn workers_for_copy(bytes: usize, threads: usize) -> usize {
    threads.min(bytes.div_ceil(MIN_BYTES_PER_WORKER))
}

/// A host address that kept threads use: each piece of the range is touched by one
/// thread only (see [`Pipe`]).
#[derive(Clone, Copy)]
struct HostRange(*mut u8);

impl HostRange {
    /// The address `offset` bytes into the range (a method, so that closures capture the
    /// whole `HostRange`, not its raw pointer field).
    fn at(self, offset: usize) -> *mut u8 {
        self.0.wrapping_add(offset)
    }
}

// SAFETY: only an address; the pipeline gives each piece of the range to one thread at a
// time, and the range outlives the job that uses it (`Workers::lend` takes it back).
unsafe impl Send for HostRange {}
// SAFETY: as above.
unsafe impl Sync for HostRange {}

/// Device to host through `staging`: the calling thread queues each chunk's DMA into a
/// free slot and, once the slot's DMA is complete, puts it ready; the kept threads (and
/// the calling thread, when it has nothing else to do) copy the slot into the chunk's
/// place in `dst` by pieces, and the last piece frees it. `fresh`: `dst` was never written
/// (whole chunks as pieces, see [`WHOLE_CHUNK`], copied with `memcpy`; else with streaming
/// stores, see [`copy_streaming`]).
///
/// # Safety
/// `dst` is valid for `bytes` of writes (it may be uninitialised) and nothing else uses it
/// during the call; `staging` is used by no other copy; `dma` is dropped before the
/// staging is used by another copy.
unsafe fn pipeline_to_host(
    staging: &Staging,
    dst: *mut u8,
    bytes: usize,
    workers: usize,
    fresh: bool,
    dma: &mut impl Dma,
) -> Result<()> {
    let chunks = Chunks::new(dst as usize, bytes);
    let count = chunks.count();
    let piece = if fresh { WHOLE_CHUNK } else { PIECE };
    let pipe = Pipe::new(staging.slots().min(count), piece);
    let host = HostRange(dst);
    let copy_out = |piece: Piece, wake: Wake| {
        let offset = chunks.get(piece.chunk).0 + piece.at;
        let (from, to) = (
            staging.slot(piece.slot).wrapping_add(piece.at),
            host.at(offset),
        );
        // SAFETY (of both copies): the slot holds the chunk's bytes (its DMA was complete
        // before it was put ready) and is not freed before this piece is finished; `[at, at
        // + len)` lies in the chunk (at most `SLOT_BYTES`), its place in `dst` too (the
        // chunks cover `dst` exactly), and that place is written by this thread only (each
        // piece is handed out once); nobody else uses `dst` during the copy (the caller's
        // guarantee).
        if fresh {
            // SAFETY: above.
            unsafe { std::ptr::copy_nonoverlapping(from, to, piece.len) };
        } else {
            // SAFETY: above.
            unsafe { copy_streaming(from, to, piece.len) };
        }
        pipe.finish(piece, true, wake);
    };
    let job = || pipe.serve(&chunks, true, copy_out);
    staging.workers.lend(workers, &job, |_| {
        // first, before anything that may fail or panic: the kept threads' part ends on
        // every exit, so that `lend`'s take-back, which waits for them, returns
        let _stop = StopOnDrop(&pipe);
        let mut in_flight = VecDeque::with_capacity(SLOTS);
        let mut next = 0;
        loop {
            while next < count {
                let Some(slot) = pipe.try_free() else { break };
                let (offset, len) = chunks.get(next);
                // SAFETY: the slot is this thread's (taken from `free`) until it is put
                // ready, which happens only after `wait(slot)`; `offset + len <= bytes`.
                unsafe { dma.queue(slot, staging.slot(slot), offset, len) }?;
                in_flight.push_back((next, slot));
                next += 1;
            }
            if let Some((chunk, slot)) = in_flight.pop_front() {
                dma.wait(slot)?;
                pipe.put_ready(chunk, slot, chunks.get(chunk).1);
                continue;
            }
            if next == count {
                break;
            }
            // every slot is ready or being copied out: copy a piece here (one piece, so
            // that this thread soon queues the slots the others free), or wait
            match pipe.try_piece(&chunks, true) {
                Some(piece) => copy_out(piece, Wake::Nobody),
                None => pipe.wait_main(|st| !st.free.is_empty() || !st.ready.is_empty())?,
            }
        }
        while let Some(piece) = pipe.try_piece(&chunks, true) {
            copy_out(piece, Wake::Nobody);
        }
        pipe.wait_main(|st| st.done == count)?;
        Ok(())
    })
}

/// Host to device through `staging`: the kept threads (and the calling thread, while the
/// copy engine has nothing to do) copy chunks of `src` into free slots by pieces, and the
/// last piece of a chunk puts its slot ready; the calling thread queues each ready slot's
/// DMA (a run of up to [`RUN_SLOTS`] ready slots that follow each other as one DMA) and
/// frees the slots once it is complete. Complete when it returns: every DMA was waited
/// for.
///
/// # Safety
/// `src` is valid for `bytes` of reads and nothing writes it during the call; `staging` is
/// used by no other copy; `dma` is dropped before the staging is used by another copy.
unsafe fn pipeline_from_host(
    staging: &Staging,
    src: *const u8,
    bytes: usize,
    workers: usize,
    dma: &mut impl Dma,
) -> Result<()> {
    let chunks = Chunks::new(src as usize, bytes);
    let count = chunks.count();
    let slots = staging.slots().min(count).min(UPLOAD_SLOTS);
    let pipe = Pipe::new(slots, PIECE);
    let streaming = bytes <= STREAMING_UPLOAD_MAX;
    let host = HostRange(src.cast_mut());
    let copy_in = |piece: Piece, wake: Wake| {
        let offset = chunks.get(piece.chunk).0 + piece.at;
        let (from, to) = (
            host.at(offset),
            staging.slot(piece.slot).wrapping_add(piece.at),
        );
        match streaming {
            // SAFETY: `[offset, offset + len)` lies in `src`, which nobody writes during the
            // copy (the caller's guarantee); the slot was taken from `free` for this chunk
            // and is not put ready before this piece is finished; `[at, at + len)` lies in
            // the chunk (at most `SLOT_BYTES`) and is written by this thread only (each
            // piece is handed out once).
            true => unsafe { copy_streaming(from, to, piece.len) },
            // SAFETY: as above.
            false => unsafe { std::ptr::copy_nonoverlapping(from, to, piece.len) },
        }
        pipe.finish(piece, false, wake);
    };
    let job = || pipe.serve(&chunks, false, copy_in);
    staging.workers.lend(workers, &job, |_| {
        // first, before anything that may fail or panic: the kept threads' part ends on
        // every exit, so that `lend`'s take-back, which waits for them, returns
        let _stop = StopOnDrop(&pipe);
        let mut in_flight = VecDeque::with_capacity(SLOTS);
        let mut sent = 0;
        while sent < count {
            let seen = pipe.version();
            while let Some((chunk, slot, n)) = pipe.try_ready_run(&chunks, RUN_SLOTS) {
                let offset = chunks.get(chunk).0;
                let len = (n - 1) * SLOT_BYTES + chunks.get(chunk + n - 1).1;
                // SAFETY: the slots are this thread's (taken from `ready`: filled, and no
                // thread touches them until they are put back after `wait(slot)`), one
                // range of the staging; `offset + len <= bytes`.
                unsafe { dma.queue(slot, staging.slot(slot), offset, len) }?;
                in_flight.push_back((slot, n));
                sent += n;
            }
            if sent == count {
                break;
            }
            match in_flight.front() {
                // the copy engine is busy: its oldest DMA completing frees slots, a thread
                // filling one gives it more work; whichever comes first
                Some(&(slot, n)) => {
                    if dma.wait_or(slot, &|| pipe.version() != seen)? {
                        in_flight.pop_front();
                        pipe.put_free(slot, n);
                    }
                }
                // the copy engine is idle: copy a piece here (one piece, so that this
                // thread soon queues the slots the others fill), or wait for a thread's
                None => match pipe.try_piece(&chunks, false) {
                    Some(piece) => copy_in(piece, Wake::Nobody),
                    None => pipe.wait_main(|st| !st.ready.is_empty())?,
                },
            }
        }
        // every slot is free or in flight: a run gave back all of its slots
        #[cfg(test)]
        assert_eq!(
            pipe.free_count() + in_flight.iter().map(|&(_, n)| n).sum::<usize>(),
            slots,
            "slots lost"
        );
        for (slot, _) in in_flight {
            dma.wait(slot)?;
        }
        Ok(())
    })
}

#[cfg(feature = "test-hooks")]
/// The number of kept threads a staged copy of `bytes` uses on this machine.
pub(super) fn workers_for(bytes: usize) -> usize {
    workers_for_copy(bytes, threads_to_keep())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::super::STAGING_BYTES;
    use super::super::pipe::LOOKS;
    use super::super::workers::Workers;
    use super::*;
    use crate::error::{Error, ErrorCode};

    #[test]
    fn workers_are_bounded() {
        assert_eq!(workers_for_copy(256 << 20, MAX_WORKERS), MAX_WORKERS);
        assert_eq!(workers_for_copy(64 << 20, 1), 1);
        assert_eq!(workers_for_copy(64 << 20, 0), 0, "none kept, none lent");
        assert_eq!(workers_for_copy(1 << 20, 8), 4);
        assert_eq!(workers_for_copy(1, 8), 1);
        assert!(threads_to_keep() <= MAX_WORKERS);
    }

    /// What the fake device writes into a slot it owns.
    const POISON: u8 = 0xEE;

    /// A queued DMA: the slot, the offset in the copy, the length, and (host to device) the
    /// slot's bytes when it was queued.
    type Queued = (*mut u8, usize, usize, Vec<u8>);

    /// A fake device: a host buffer. Like the copy engine, a queued DMA moves its bytes only
    /// later: device to host, a queued DMA poisons its slot at once (the copy engine may write
    /// the slot any time before the wait) and writes the real bytes only at the wait; host to
    /// device, a queued DMA reads the slot at once, and the wait checks that nobody wrote the
    /// slot meanwhile (else `violations`), then poisons it (so a piece skipped by the next
    /// chunk shows). `fail_at`/`panic_at`: the k-th queue fails/panics; `delay`: each queue and
    /// wait sleeps that long.
    pub(super) struct FakeDma {
        device: *mut u8,
        to_host: bool,
        pending: [Option<Queued>; SLOTS],
        pub(super) calls: usize,
        pub(super) fail_at: usize,
        pub(super) panic_at: usize,
        pub(super) delay: Duration,
        pub(super) violations: usize,
        /// Calls of `wait_or`.
        polls: usize,
    }

    impl FakeDma {
        pub(super) fn new(device: *mut u8, to_host: bool) -> FakeDma {
            FakeDma {
                device,
                to_host,
                pending: std::array::from_fn(|_| None),
                calls: 0,
                fail_at: usize::MAX,
                panic_at: usize::MAX,
                delay: Duration::ZERO,
                violations: 0,
                polls: 0,
            }
        }
    }

    // SAFETY: touches `len` bytes of the slot between its queue and its wait (or drop).
    unsafe impl Dma for FakeDma {
        unsafe fn queue(
            &mut self,
            slot: usize,
            host: *mut u8,
            offset: usize,
            len: usize,
        ) -> Result<()> {
            self.calls += 1;
            if self.calls == self.fail_at {
                return Err(Error::new("fake DMA", ErrorCode::IllegalAddress));
            }
            assert!(self.calls != self.panic_at, "fake DMA panics");
            assert_run_is_free(
                self.pending.iter().map(|p| p.as_ref().map(|p| p.2)),
                slot,
                len,
            );
            let mut seen = Vec::new();
            if self.to_host {
                // SAFETY: the slot is the DMA's until the wait.
                unsafe { std::ptr::write_bytes(host, POISON, len) };
            } else {
                // SAFETY: the slot holds `len` bytes, the pipeline's until the wait.
                seen.extend_from_slice(unsafe { std::slice::from_raw_parts(host, len) });
                // SAFETY: as above; the test's device buffer holds the copy's range.
                unsafe {
                    std::ptr::copy_nonoverlapping(host, self.device.wrapping_add(offset), len)
                };
            }
            self.pending[slot] = Some((host, offset, len, seen));
            if !self.delay.is_zero() {
                std::thread::sleep(self.delay);
            }
            Ok(())
        }

        fn wait(&mut self, slot: usize) -> Result<()> {
            if let Some((host, offset, len, seen)) = self.pending[slot].take() {
                if !self.delay.is_zero() {
                    std::thread::sleep(self.delay);
                }
                // SAFETY: the slot, or the run of slots from it, holds `len` bytes, the DMA's
                // until this wait returns.
                let slot_bytes = unsafe { std::slice::from_raw_parts(host, len) };
                if self.to_host {
                    if slot_bytes.iter().any(|&b| b != POISON) {
                        self.violations += 1;
                    }
                    // SAFETY: as above; the test's device buffer holds the copy's range.
                    unsafe {
                        std::ptr::copy_nonoverlapping(self.device.wrapping_add(offset), host, len)
                    };
                } else {
                    if slot_bytes != seen.as_slice() {
                        self.violations += 1;
                    }
                    // SAFETY: the run's whole slots are the DMA's until this wait returns.
                    unsafe {
                        std::ptr::write_bytes(host, POISON, len.div_ceil(SLOT_BYTES) * SLOT_BYTES)
                    };
                }
            }
            Ok(())
        }

        /// Every other call finds `stop` first where it holds.
        fn wait_or(&mut self, slot: usize, stop: &dyn Fn() -> bool) -> Result<bool> {
            self.polls += 1;
            if self.polls % 2 == 0 && stop() {
                return Ok(false);
            }
            self.wait(slot).map(|()| true)
        }
    }

    impl Drop for FakeDma {
        /// Waits for every DMA still queued, as the driver's drop does; a slot used during
        /// one of them fails the test here (the tests assert `violations` before the drop).
        fn drop(&mut self) {
            let before = self.violations;
            for slot in 0..SLOTS {
                let _ = self.wait(slot);
            }
            if self.violations > before && !std::thread::panicking() {
                panic!("a slot used during its DMA, found by the waits of the drop");
            }
        }
    }

    /// With a kept thread slower than the copy engine, the calling thread waits for it
    /// instead of looking at the ready queue again and again (before the fix: millions of
    /// looks per copy, each taking the mutex the kept thread needs).
    #[test]
    fn the_calling_thread_waits_rather_than_polls_for_a_slow_thread() {
        let bytes = 64 << 20;
        let mut device = vec![5u8; bytes];
        let mut host = vec![0u8; bytes];
        let staging = staging_with(1);
        let before = LOOKS.load(Ordering::Relaxed);
        let mut dma = FakeDma::new(device.as_mut_ptr(), true);
        // SAFETY: `host` has room for `bytes`; the staging is this test's.
        unsafe { pipeline_to_host(&staging, host.as_mut_ptr(), bytes, 1, false, &mut dma) }
            .unwrap();
        drop(dma);
        assert!(host.iter().all(|&b| b == 5));
        // other tests may run meanwhile and add their few; a poll loop adds millions
        let looks = LOOKS.load(Ordering::Relaxed) - before;
        assert!(looks < 100_000, "{looks} looks for a piece that found none");
    }

    /// Asserts that a DMA of `len` bytes from slot `slot` on (a run of slots) stays inside
    /// the staging and covers no slot of a DMA still queued: `queued[q]` is the length of
    /// the DMA queued from slot `q`, if any.
    pub(super) fn assert_run_is_free(
        queued: impl Iterator<Item = Option<usize>>,
        slot: usize,
        len: usize,
    ) {
        let run = slot..slot + len.div_ceil(SLOT_BYTES);
        assert!(
            len > 0 && run.len() <= RUN_SLOTS && run.end <= SLOTS,
            "{len} bytes from slot {slot}"
        );
        for (q, queued) in queued.enumerate() {
            if let Some(other) = queued.map(|l| q..q + l.div_ceil(SLOT_BYTES)) {
                assert!(
                    other.end <= run.start || run.end <= other.start,
                    "slots {run:?} queued over slots {other:?} without a wait"
                );
            }
        }
    }

    /// A staging of the test's own with `threads` kept threads.
    /// Asserts that `buf` holds `want` at `at` and zeros everywhere else (`what`: the copy).
    pub(super) fn assert_only_at(buf: &[u8], at: usize, want: &[u8], what: &str) {
        assert!(buf[at..at + want.len()] == *want, "{what}");
        assert!(
            buf[..at]
                .iter()
                .chain(&buf[at + want.len()..])
                .all(|&b| b == 0),
            "{what}: a byte written outside the range"
        );
    }

    pub(super) fn staging_with(threads: usize) -> Staging {
        let mut staging = Staging::allocate(STAGING_BYTES).unwrap();
        staging.workers = Workers::spawn(threads);
        staging
    }

    /// The pipelines with a fake device: every byte arrives, for odd starts and lengths,
    /// with no kept thread, one or several, in pieces or whole chunks (`fresh`: the odd
    /// lengths), and nothing around the destination is touched.
    #[test]
    fn staged_copies_move_every_byte_through_a_fake_device() {
        let mut device: Vec<u8> = (0..(9usize << 20) + 4099)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let pattern = device.clone();
        for threads in [0, 1, 3, 8] {
            let staging = staging_with(threads);
            for (start, bytes) in [
                (0usize, 1usize),
                (3, 100),
                (1, 64 << 10),
                (4096, (64 << 10) + 1),
                (5, (1 << 20) + 3),
                (0, 2 << 20),
                (17, 9 << 20),
            ] {
                let workers = workers_for_copy(bytes, threads);
                let fresh = bytes % 2 == 1;
                let source = &pattern[start..start + bytes];
                // device to host, into a range at an odd offset of a zeroed buffer
                let mut host = vec![0u8; bytes + 64];
                let at = 1 + start % 61;
                let mut dma = FakeDma::new(device[start..].as_mut_ptr(), true);
                // SAFETY: `host` has room for `bytes` after `at`; the staging is this test's.
                let done = unsafe {
                    pipeline_to_host(
                        &staging,
                        host[at..].as_mut_ptr(),
                        bytes,
                        workers,
                        fresh,
                        &mut dma,
                    )
                };
                assert_eq!(dma.violations, 0, "a slot used during its DMA");
                drop(dma);
                done.unwrap();
                assert_only_at(
                    &host,
                    at,
                    source,
                    &format!("{bytes} bytes at {start}, {threads} threads"),
                );
                // host to device, into a zeroed device at an odd offset
                let mut out = vec![0u8; bytes + 64];
                let mut dma = FakeDma::new(out[at..].as_mut_ptr(), false);
                // SAFETY: `source` has `bytes`; the staging is this test's.
                let done = unsafe {
                    pipeline_from_host(&staging, source.as_ptr(), bytes, workers, &mut dma)
                };
                assert_eq!(dma.violations, 0, "a slot written during its DMA");
                drop(dma);
                done.unwrap();
                assert_only_at(
                    &out,
                    at,
                    source,
                    &format!("{bytes} bytes up, {threads} threads"),
                );
            }
        }
        assert!(
            device == pattern,
            "the device side of a download is only read"
        );
    }

    #[test]
    fn a_failing_dma_stops_the_pipeline_with_its_error_and_the_threads_stay() {
        let bytes = 8 << 20;
        let mut device = vec![7u8; bytes];
        let mut host = vec![0u8; bytes];
        let mut sink = vec![0u8; bytes];
        let staging = staging_with(4);
        let workers = workers_for_copy(bytes, 4);
        for fail_at in [1, 3, 9] {
            let mut dma = FakeDma::new(device.as_mut_ptr(), true);
            dma.fail_at = fail_at;
            // SAFETY: `host` has room for `bytes`; the staging is this test's.
            let e = unsafe {
                pipeline_to_host(&staging, host.as_mut_ptr(), bytes, workers, false, &mut dma)
            };
            assert_eq!(e.unwrap_err().call(), "fake DMA");
            // dropped (its DMAs waited for) before the staging serves another copy, as
            // `staged` drops the driver's before the lease
            drop(dma);
            let mut dma = FakeDma::new(sink.as_mut_ptr(), false);
            dma.fail_at = fail_at;
            // SAFETY: `host` has `bytes`; the staging is this test's.
            let e =
                unsafe { pipeline_from_host(&staging, host.as_ptr(), bytes, workers, &mut dma) };
            assert_eq!(e.unwrap_err().call(), "fake DMA");
            drop(dma);
        }
        // the kept threads serve the next copy
        let mut dma = FakeDma::new(device.as_mut_ptr(), true);
        // SAFETY: as above.
        unsafe { pipeline_to_host(&staging, host.as_mut_ptr(), bytes, workers, false, &mut dma) }
            .unwrap();
        drop(dma);
        assert!(host.iter().all(|&b| b == 7));
    }
}

/// The pipelines against a stricter fake device: every size and thread count, and an
/// error or a panic at every DMA.
#[cfg(test)]
mod strict_tests;
