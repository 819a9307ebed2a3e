//! The copies: a copy cut into chunks ([`Plan`], [`Chunks`]), the calling thread's DMA
//! between the device and the slots of a staging, and the worker threads between the slots
//! and the host memory ([`Pipe`]).

use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use cuda_driver_sys::CUctx_st;

use super::pool::{POOL, Pool, threads_for_machine};
use super::registry::{Lease, acquire};
use super::{HUGE_PAGE_MIN, MIN_BYTES_PER_WORKER, MIN_CHUNK, SLOT_BYTES, Staging, thp};
use crate::driver::{self, CUdeviceptr};
use crate::error::{Error, ErrorCode, Result};

/// Whether the driver knows the host address (page-locked, registered or managed memory),
/// in which case it copies at full speed itself.
pub(super) fn host_is_known(p: *const u8) -> Result<bool> {
    Ok(driver::pointer_info(p as usize as CUdeviceptr)?.known)
}

/// A staging for a copy in `ctx` (current).
fn lease(ctx: NonNull<CUctx_st>) -> Option<Lease> {
    acquire(ctx.as_ptr() as usize, Staging::create)
}

/// Copies `bytes` from the device at `src` into host memory at `dst` through a staging of
/// `ctx`: `Ok(true)` when done, `Ok(false)` when nothing was copied and the caller takes
/// the driver's path (no staging to be had, or host memory the driver knows). `fresh`:
/// `dst` is a new allocation of the caller's (advised as huge-page memory when large).
///
/// # Safety
/// `ctx` is alive and current on the calling thread; `src` is device memory readable in
/// it for `bytes`; `dst` is host memory valid for `bytes` of writes (it may be
/// uninitialised) that nothing else reads or writes during the call.
pub(crate) unsafe fn device_to_host(
    ctx: NonNull<CUctx_st>,
    dst: *mut u8,
    src: CUdeviceptr,
    bytes: usize,
    fresh: bool,
) -> Result<bool> {
    if !fresh && host_is_known(dst)? {
        return Ok(false);
    }
    let Some(lease) = lease(ctx) else {
        return Ok(false);
    };
    let Some(staging) = lease.staging() else {
        return Ok(false);
    };
    if fresh && bytes >= HUGE_PAGE_MIN {
        thp::advise_huge(dst, bytes);
    }
    let plan = Plan::new(bytes);
    let dma = |slot: *mut u8, offset: usize, len: usize| {
        // SAFETY: the pipeline hands over a slot it owns with room for `len` bytes, and
        // `offset + len <= bytes`, so the device range lies in the source (the caller's
        // guarantee); the context is current. Complete when it returns.
        unsafe { driver::memcpy_dtoh(slot.cast::<c_void>(), src + offset as u64, len) }
    };
    // SAFETY: the caller's guarantees for `dst`; the lease holds the staging for this copy
    // only.
    unsafe { pipeline_to_host(&POOL, staging, dst, bytes, plan, fresh, dma) }
}

/// Copies `bytes` from host memory at `src` to the device at `dst` through a staging of
/// `ctx`, then waits for the legacy stream: `Ok(true)` when done (complete), `Ok(false)`
/// when nothing was copied and the caller takes the driver's path.
///
/// # Safety
/// `ctx` is alive and current on the calling thread; `dst` is device memory writable in it
/// for `bytes`; `src` is host memory valid for `bytes` of reads that nothing writes during
/// the call.
pub(crate) unsafe fn host_to_device(
    ctx: NonNull<CUctx_st>,
    dst: CUdeviceptr,
    src: *const u8,
    bytes: usize,
) -> Result<bool> {
    if host_is_known(src)? {
        return Ok(false);
    }
    let Some(lease) = lease(ctx) else {
        return Ok(false);
    };
    let Some(staging) = lease.staging() else {
        return Ok(false);
    };
    let dma = |slot: *const u8, offset: usize, len: usize| {
        // SAFETY: the pipeline hands over a filled slot it owns, holding `len` bytes, and
        // `offset + len <= bytes`, so the device range lies in the destination (the
        // caller's guarantee); the context is current. From page-locked memory the copy
        // is complete when it returns, so the slot may be refilled right after.
        unsafe { driver::memcpy_htod_unwaited(dst + offset as u64, slot.cast::<c_void>(), len) }
    };
    // SAFETY: the caller's guarantees for `src`; the lease holds the staging for this copy
    // only.
    let done = unsafe { pipeline_from_host(&POOL, staging, src, bytes, Plan::new(bytes), dma) }?;
    drop(lease);
    if done {
        // Each DMA came from page-locked memory and was complete when it returned; were the
        // staging not page-locked after all, the driver only staged the data. Either way
        // this wait makes the copy complete, as `driver::memcpy_htod` does.
        // SAFETY: null is the current context's legacy stream.
        unsafe { driver::stream_wait_idle(std::ptr::null_mut()) }?;
    }
    Ok(done)
}

/// How one copy is cut up: threads and chunk size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    workers: usize,
    chunk: usize,
}

/// The machine's parallelism, read once (`available_parallelism` reads cgroup files).
pub(super) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl Plan {
    fn new(bytes: usize) -> Plan {
        Plan::for_threads(bytes, threads_for_machine())
    }

    /// One thread per [`MIN_BYTES_PER_WORKER`], at most `threads` (the pool's size), at
    /// least one; chunks of the largest power of two, between [`MIN_CHUNK`] and a slot, that
    /// gives each thread one chunk or more. Every chunk costs one synchronous DMA call
    /// (about 7 µs on an H100 besides the transfer itself), so chunks are as large as the
    /// threads allow: at 1 MiB, four chunks of 256 KiB for four threads (the DMA of one
    /// overlaps the copies of the others), from 16 MiB on, chunks of a whole slot.
    fn for_threads(bytes: usize, threads: usize) -> Plan {
        let workers = threads.min(bytes.div_ceil(MIN_BYTES_PER_WORKER)).max(1);
        let share = (bytes / workers).max(1);
        let chunk = (1usize << share.ilog2()).clamp(MIN_CHUNK, SLOT_BYTES);
        Plan { workers, chunk }
    }
}

/// The chunks of a host range `[start, start + bytes)`: boundaries at multiples of `size`
/// (a power of two) in the address space, so that the first and last chunk may be shorter.
#[derive(Clone, Copy, Debug)]
struct Chunks {
    start: usize,
    end: usize,
    size: usize,
    base: usize,
    count: usize,
}

impl Chunks {
    fn new(start: usize, bytes: usize, size: usize) -> Chunks {
        let base = start - start % size;
        let end = start + bytes;
        Chunks {
            start,
            end,
            size,
            base,
            count: (end - base).div_ceil(size),
        }
    }

    /// Chunk `k < count`: its offset from the range's start and its length (not zero).
    fn get(&self, k: usize) -> (usize, usize) {
        let lo = (self.base + k * self.size).max(self.start);
        let hi = (self.base + (k + 1) * self.size).min(self.end);
        (lo - self.start, hi - lo)
    }
}

/// The hand-over between the calling thread (DMA) and the pool's threads (`memcpy`): free
/// slots, slots holding a chunk (`ready`), the next chunk to claim, and whether the
/// calling thread has stopped. Every slot is owned by exactly one party at a time: in
/// `free`, in `ready`, or taken by one thread; it changes hands only under the mutex,
/// which orders each owner's accesses before the next owner's.
struct Pipe {
    state: Mutex<PipeState>,
    changed: Condvar,
    /// The slots the copy uses.
    slots: usize,
}

struct PipeState {
    free: Vec<usize>,
    ready: VecDeque<(usize, usize)>,
    next: usize,
    stop: bool,
    /// Threads that may still come to work for this copy: the job's tickets, counted out
    /// as each run ends (also by a panic).
    workers: usize,
    /// A run panicked (and may have kept a slot): the calling thread stops waiting.
    lost: bool,
    /// Device to a new `Vec`: the next chunk of the destination to populate ahead of its
    /// data, and the number of chunks (0: none to populate).
    populate_next: usize,
    populate_end: usize,
}

/// What a thread does next for a copy to the host.
enum Task {
    /// Copy the chunk in the slot to its place.
    Copy(usize, usize),
    /// Populate the chunk's pages (a new `Vec`, nothing ready yet).
    Populate(usize),
}

impl Pipe {
    fn new(slots: usize) -> Pipe {
        Pipe {
            state: Mutex::new(PipeState {
                free: (0..slots).collect(),
                ready: VecDeque::with_capacity(slots),
                next: 0,
                stop: false,
                workers: 0,
                lost: false,
                populate_next: 0,
                populate_end: 0,
            }),
            changed: Condvar::new(),
            slots,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, PipeState>) -> MutexGuard<'a, PipeState> {
        self.changed
            .wait(guard)
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn update(&self, f: impl FnOnce(&mut PipeState)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }

    /// A free slot (the calling thread, device to host); `None` if no worker is left to
    /// give one back.
    fn take_free(&self) -> Option<usize> {
        let mut st = self.lock();
        loop {
            if let Some(slot) = st.free.pop() {
                return Some(slot);
            }
            if st.workers == 0 || st.lost {
                return None;
            }
            st = self.wait(st);
        }
    }

    /// A chunk in a slot: for a worker (device to host), `None` once the calling thread
    /// has stopped and nothing is left; for the calling thread (host to device), `None`
    /// if no worker is left to fill one.
    fn take_ready(&self) -> Option<(usize, usize)> {
        let mut st = self.lock();
        loop {
            if let Some(item) = st.ready.pop_front() {
                return Some(item);
            }
            if st.stop || st.workers == 0 || st.lost {
                return None;
            }
            st = self.wait(st);
        }
    }

    /// A worker's next task, device to host: a chunk in a slot, else a chunk of a new
    /// `Vec` to populate ahead; `None` once the calling thread has stopped and nothing is
    /// ready.
    fn next_task(&self) -> Option<Task> {
        let mut st = self.lock();
        loop {
            if let Some((chunk, slot)) = st.ready.pop_front() {
                // chunks come ready in order: this one and those before need no populating
                st.populate_next = st.populate_next.max(chunk + 1);
                return Some(Task::Copy(chunk, slot));
            }
            if st.stop {
                return None;
            }
            if st.populate_next < st.populate_end {
                st.populate_next += 1;
                return Some(Task::Populate(st.populate_next - 1));
            }
            st = self.wait(st);
        }
    }

    /// The next of `count` chunks and a free slot for it (a worker, host to device);
    /// `None` once every chunk is claimed or the calling thread has stopped.
    fn claim(&self, count: usize) -> Option<(usize, usize)> {
        let mut st = self.lock();
        loop {
            if st.stop || st.next >= count {
                return None;
            }
            if let Some(slot) = st.free.pop() {
                let chunk = st.next;
                st.next += 1;
                return Some((chunk, slot));
            }
            st = self.wait(st);
        }
    }

    fn put_ready(&self, chunk: usize, slot: usize) {
        self.update(|st| st.ready.push_back((chunk, slot)));
    }

    fn put_free(&self, slot: usize) {
        self.update(|st| st.free.push(slot));
    }
}

/// Stops the pipe when the calling thread leaves the copy (done, failed or panicking), so
/// that the workers leave the job and the job's drop, which waits for them, returns.
struct StopOnDrop<'a>(&'a Pipe);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.update(|st| st.stop = true);
    }
}

/// Counts a worker out when its run ends (also by a panic, which marks the copy lost).
struct WorkerExit<'a>(&'a Pipe);

impl Drop for WorkerExit<'_> {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        self.0.update(|st| {
            st.workers -= 1;
            st.lost |= panicking;
        });
    }
}

/// A host address that worker threads use: each chunk of the range is touched by one
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

// SAFETY: only an address; the pipeline gives each chunk of the range to one thread at a
// time, and the range outlives the job that uses it (the job's drop waits for its runs).
unsafe impl Send for HostRange {}
// SAFETY: as above.
unsafe impl Sync for HostRange {}

#[cold]
fn workers_lost() -> Error {
    Error::with_detail(
        "staging",
        ErrorCode::Unknown,
        "every copying thread left before the copy was done",
    )
}

/// Runs `caller` on this thread while up to `workers` threads of `pool` run `work` for
/// the copy; returns `Ok(false)` without calling `caller` when the pool has no thread.
/// Returns only after every run of `work` has ended (the job's drop, also while a panic
/// unwinds); a panic in a run is raised here then.
fn with_workers(
    pool: &'static Pool,
    pipe: &Pipe,
    workers: usize,
    work: &(dyn Fn() + Sync),
    caller: impl FnOnce() -> Result<()>,
) -> Result<bool> {
    let run = || {
        let _exit = WorkerExit(pipe);
        work();
    };
    // the tickets are counted in before any thread can take one (and count itself out)
    pipe.lock().workers = workers;
    let (job, tickets) = pool.job(workers, &run);
    // the job's drop runs after `stop`'s (reverse order of declaration): the workers are
    // told to stop, then waited for
    let stop = StopOnDrop(pipe);
    if tickets < workers {
        // fewer threads than planned: the tickets that will never be taken
        pipe.update(|st| st.workers -= workers - tickets);
    }
    if tickets == 0 {
        drop(stop);
        drop(job);
        return Ok(false);
    }
    let result = caller();
    drop(stop);
    drop(job);
    result.map(|()| true)
}

/// Device to host through `staging`: the calling thread fills a free slot with each chunk
/// (`dma(slot, offset, len)`: the chunk at `offset` of the source, complete when it
/// returns), a worker copies the slot into the chunk's place in `dst`; with `fresh` (a new
/// allocation), idle workers populate the destination's pages ahead of the data.
/// `Ok(false)`: no thread could be started, nothing was copied.
///
/// # Safety
/// `dst` is valid for `bytes` of writes (it may be uninitialised) and nothing else uses it
/// during the call; `staging` is used by no other copy; `dma` writes at most `len` bytes
/// to the slot it is given.
unsafe fn pipeline_to_host(
    pool: &'static Pool,
    staging: &Staging,
    dst: *mut u8,
    bytes: usize,
    plan: Plan,
    fresh: bool,
    mut dma: impl FnMut(*mut u8, usize, usize) -> Result<()>,
) -> Result<bool> {
    let chunks = Chunks::new(dst as usize, bytes, plan.chunk);
    let pipe = Pipe::new((plan.workers + 2).min(staging.slots()));
    if fresh {
        pipe.lock().populate_end = chunks.count;
    }
    let host = HostRange(dst);
    let work = || {
        while let Some(task) = pipe.next_task() {
            match task {
                Task::Copy(chunk, slot) => {
                    let (offset, len) = chunks.get(chunk);
                    let to = host.at(offset);
                    // SAFETY: the slot holds the chunk's `len <= SLOT_BYTES` bytes (its DMA
                    // was complete before the slot was put ready) and is this thread's
                    // until it is put back; `[to, to + len)` lies in `dst` (the chunks
                    // cover it exactly), is written by this thread only (each chunk is
                    // handed out once), and nobody else uses `dst` during the copy (the
                    // caller's guarantee).
                    unsafe { std::ptr::copy_nonoverlapping(staging.slot(slot), to, len) };
                    pipe.put_free(slot);
                }
                Task::Populate(chunk) => {
                    let (offset, len) = chunks.get(chunk);
                    thp::populate(host.at(offset), len);
                }
            }
        }
    };
    with_workers(pool, &pipe, plan.workers, &work, || {
        for chunk in 0..chunks.count {
            let Some(slot) = pipe.take_free() else {
                return Err(workers_lost());
            };
            let (offset, len) = chunks.get(chunk);
            // the slot is this thread's (taken from `free`) until it is put ready
            dma(staging.slot(slot), offset, len)?;
            pipe.put_ready(chunk, slot);
        }
        // wait until the workers have copied every chunk (every slot is free again): a
        // ticket not yet taken is withdrawn when the copy ends, so the chunks ready now
        // must not be left to it
        let mut st = pipe.lock();
        while st.free.len() < pipe.slots && st.workers > 0 && !st.lost {
            st = pipe.wait(st);
        }
        if st.free.len() < pipe.slots {
            return Err(workers_lost());
        }
        Ok(())
    })
}

/// Host to device through `staging`: workers copy chunks of `src` into free slots, the
/// calling thread sends each filled slot on (`dma(slot, offset, len)`: to the chunk at
/// `offset` of the destination; the slot may be refilled when it returns). `Ok(false)`:
/// no thread could be started, nothing was copied.
///
/// # Safety
/// `src` is valid for `bytes` of reads and nothing writes it during the call; `staging` is
/// used by no other copy; `dma` reads at most `len` bytes of the slot it is given.
unsafe fn pipeline_from_host(
    pool: &'static Pool,
    staging: &Staging,
    src: *const u8,
    bytes: usize,
    plan: Plan,
    mut dma: impl FnMut(*const u8, usize, usize) -> Result<()>,
) -> Result<bool> {
    let chunks = Chunks::new(src as usize, bytes, plan.chunk);
    let pipe = Pipe::new((plan.workers + 2).min(staging.slots()));
    let host = HostRange(src.cast_mut());
    let count = chunks.count;
    let work = || {
        while let Some((chunk, slot)) = pipe.claim(count) {
            let (offset, len) = chunks.get(chunk);
            let from = host.at(offset).cast_const();
            // SAFETY: `[from, from + len)` lies in `src`, which nobody writes during the
            // copy (the caller's guarantee); the slot is this thread's (claimed from
            // `free`) until it is put ready, with room for `len <= SLOT_BYTES` bytes.
            unsafe { std::ptr::copy_nonoverlapping(from, staging.slot(slot), len) };
            pipe.put_ready(chunk, slot);
        }
    };
    with_workers(pool, &pipe, plan.workers, &work, || {
        for _ in 0..count {
            let Some((chunk, slot)) = pipe.take_ready() else {
                return Err(workers_lost());
            };
            let (offset, len) = chunks.get(chunk);
            // the slot is this thread's (taken from `ready`: filled, and no worker touches
            // it until it is put back)
            dma(staging.slot(slot).cast_const(), offset, len)?;
            pipe.put_free(slot);
        }
        Ok(())
    })
}

/// The number of the pool's threads a staged copy of `bytes` uses on this machine.
pub(super) fn workers_for(bytes: usize) -> usize {
    Plan::new(bytes).workers
}

#[cfg(test)]
mod tests {
    use super::super::{MAX_WORKERS, SLOTS, STAGING_BYTES};
    use super::*;

    /// The pools of these tests: a fixed size, whatever the machine.
    static FOUR: Pool = Pool::new(4);
    static ONE: Pool = Pool::new(1);

    #[test]
    fn chunks_cover_the_range_exactly_at_aligned_boundaries() {
        for (start, bytes, size) in [
            (0x1000_0000usize, 1usize, 64usize << 10),
            (0x1000_0001, 3 << 20, 2 << 20),
            (0x2000_0000, 8 << 20, 2 << 20),
            (0x2000_0010, (64 << 10) * 5 - 17, 64 << 10),
            (0x3fff_fff0, 7, 64 << 10),
        ] {
            let c = Chunks::new(start, bytes, size);
            let mut at = 0;
            for k in 0..c.count {
                let (offset, len) = c.get(k);
                assert_eq!(offset, at, "chunk {k} follows the previous one");
                assert!(len > 0 && len <= size);
                let (lo, hi) = (start + offset, start + offset + len);
                assert_eq!(
                    lo / size,
                    (hi - 1) / size,
                    "a chunk stays inside one aligned block"
                );
                at += len;
            }
            assert_eq!(at, bytes, "{start:#x} + {bytes}");
        }
    }

    #[test]
    fn plans_are_bounded() {
        assert_eq!(
            Plan::for_threads(64 << 20, 8),
            Plan {
                workers: 8,
                chunk: SLOT_BYTES
            }
        );
        assert_eq!(Plan::for_threads(64 << 20, 1).workers, 1);
        assert_eq!(Plan::for_threads(64 << 20, 0).workers, 1, "at least one");
        let small = Plan::for_threads(1 << 20, 8);
        assert_eq!(small.workers, 4);
        assert_eq!(small.chunk, 256 << 10, "four chunks for four threads");
        assert_eq!(Plan::for_threads(4 << 20, 7).chunk, 512 << 10);
        assert_eq!(Plan::for_threads(16 << 20, 8).chunk, SLOT_BYTES);
        assert_eq!(Plan::for_threads(1, 8).chunk, MIN_CHUNK);
        for bytes in [1usize, 4095, 1 << 20, 3 << 20, 1 << 30] {
            let p = Plan::for_threads(bytes, MAX_WORKERS);
            assert!(p.chunk.is_power_of_two() && p.chunk <= SLOT_BYTES);
            assert!(p.workers + 2 <= SLOTS);
        }
        assert!(threads_for_machine() <= MAX_WORKERS && threads_for_machine() >= 1);
    }

    /// The pipelines with a fake device (a host buffer, copied with `memcpy`): every byte
    /// arrives, for odd starts and lengths, one or several threads, and nothing around the
    /// destination is touched.
    #[test]
    fn staged_copies_move_every_byte_through_a_fake_device() {
        let staging = Staging::allocate(STAGING_BYTES).unwrap();
        let device: Vec<u8> = (0..(9usize << 20) + 4099)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for (start, bytes) in [
            (0usize, 1usize),
            (3, 100),
            (1, 64 << 10),
            (4096, (64 << 10) + 1),
            (5, (1 << 20) + 3),
            (0, 2 << 20),
            (17, 9 << 20),
        ] {
            for (threads, pool) in [(1, &ONE), (2, &FOUR), (4, &FOUR)] {
                let plan = Plan::for_threads(bytes, threads);
                let source = &device[start..start + bytes];
                // device to host, into a range at an odd offset of a zeroed buffer
                let mut host = vec![0u8; bytes + 64];
                let at = 1 + start % 61;
                let dst = host[at..].as_mut_ptr();
                let dma = |slot: *mut u8, offset: usize, len: usize| {
                    assert!(offset + len <= bytes && len <= SLOT_BYTES);
                    // SAFETY: in bounds of `source` (asserted) and of the slot (at most a
                    // slot's bytes).
                    unsafe { std::ptr::copy_nonoverlapping(source[offset..].as_ptr(), slot, len) };
                    Ok(())
                };
                let fresh = threads != 2;
                // SAFETY: `dst` has room for `bytes`; the staging is this test's.
                let done =
                    unsafe { pipeline_to_host(pool, &staging, dst, bytes, plan, fresh, dma) };
                assert!(done.unwrap());
                assert!(
                    host[at..at + bytes] == *source,
                    "{bytes} bytes at {start}, {threads} threads"
                );
                assert!(
                    host[..at]
                        .iter()
                        .chain(&host[at + bytes..])
                        .all(|&b| b == 0)
                );
                // host to device
                let mut device_out = vec![0u8; bytes + 64];
                let out = device_out[at..].as_mut_ptr();
                let dma = |slot: *const u8, offset: usize, len: usize| {
                    assert!(offset + len <= bytes && len <= SLOT_BYTES);
                    // SAFETY: in bounds of the output (asserted) and of the slot.
                    unsafe { std::ptr::copy_nonoverlapping(slot, out.wrapping_add(offset), len) };
                    Ok(())
                };
                // SAFETY: `source` has `bytes`; the staging is this test's.
                let done = unsafe {
                    pipeline_from_host(pool, &staging, source.as_ptr(), bytes, plan, dma)
                };
                assert!(done.unwrap());
                assert!(device_out[at..at + bytes] == *source);
                assert!(
                    device_out[..at]
                        .iter()
                        .chain(&device_out[at + bytes..])
                        .all(|&b| b == 0)
                );
            }
        }
    }

    /// A copy whose tickets no thread takes for a while (the pool busy with another copy)
    /// still copies every byte: the calling thread waits for the chunks it made ready.
    #[test]
    fn a_copy_waits_for_a_busy_pool() {
        static BUSY: Pool = Pool::new(1);
        let staging = Staging::allocate(STAGING_BYTES).unwrap();
        let bytes = 3 << 20;
        let source: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        let mut host = vec![0u8; bytes];
        let started = std::sync::atomic::AtomicBool::new(false);
        let hold = || {
            started.store(true, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                let (job, _) = BUSY.job(1, &hold);
                // the job's drop would withdraw a ticket not taken yet
                while !started.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                drop(job);
            });
            while !started.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let dma = |slot: *mut u8, offset: usize, len: usize| {
                // SAFETY: in bounds of `source` and of the slot.
                unsafe { std::ptr::copy_nonoverlapping(source[offset..].as_ptr(), slot, len) };
                Ok(())
            };
            let plan = Plan::for_threads(bytes, 1);
            // SAFETY: `host` has room for `bytes`; the staging is this test's.
            let done = unsafe {
                pipeline_to_host(&BUSY, &staging, host.as_mut_ptr(), bytes, plan, true, dma)
            };
            assert!(done.unwrap());
        });
        assert!(host == source);
    }

    #[test]
    fn a_failing_dma_stops_the_pipeline_with_its_error() {
        let staging = Staging::allocate(STAGING_BYTES).unwrap();
        let bytes = 8 << 20;
        let source = vec![7u8; bytes];
        let mut host = vec![0u8; bytes];
        let plan = Plan::for_threads(bytes, 4);
        let mut calls = 0;
        let dma = |slot: *mut u8, offset: usize, len: usize| {
            calls += 1;
            if calls == 3 {
                return Err(Error::new("fake DMA", ErrorCode::IllegalAddress));
            }
            // SAFETY: in bounds of `source` and of the slot.
            unsafe { std::ptr::copy_nonoverlapping(source[offset..].as_ptr(), slot, len) };
            Ok(())
        };
        // SAFETY: `host` has room for `bytes`; the staging is this test's.
        let e = unsafe {
            pipeline_to_host(&FOUR, &staging, host.as_mut_ptr(), bytes, plan, false, dma)
        };
        assert_eq!(e.unwrap_err().call(), "fake DMA");
        let mut calls = 0;
        let dma = |_: *const u8, _: usize, _: usize| {
            calls += 1;
            match calls {
                2 => Err(Error::new("fake DMA", ErrorCode::IllegalAddress)),
                _ => Ok(()),
            }
        };
        // SAFETY: `source` has `bytes`; the staging is this test's.
        let e = unsafe { pipeline_from_host(&FOUR, &staging, source.as_ptr(), bytes, plan, dma) };
        assert_eq!(e.unwrap_err().call(), "fake DMA");
    }
}
