//! The copies: a copy cut into chunks ([`Plan`], [`Chunks`]), the calling thread's DMA
//! between the device and the slots of a staging, and the worker threads between the slots
//! and the host memory ([`Pipe`]).

use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use cuda_driver_sys::CUctx_st;

use super::registry::{Lease, acquire};
use super::{
    HUGE_PAGE_MIN, MAX_WORKERS, MIN_BYTES_PER_WORKER, MIN_CHUNK, SLOT_BYTES, Staging, thp,
};
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
    let dma = |slot: *mut u8, offset: usize, len: usize| {
        // SAFETY: the pipeline hands over a slot it owns with room for `len` bytes, and
        // `offset + len <= bytes`, so the device range lies in the source (the caller's
        // guarantee); the context is current. Complete when it returns.
        unsafe { driver::memcpy_dtoh(slot.cast::<c_void>(), src + offset as u64, len) }
    };
    // SAFETY: the caller's guarantees for `dst`; the lease holds the staging for this copy
    // only.
    unsafe { pipeline_to_host(staging, dst, bytes, Plan::new(bytes), dma) }
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
    let done = unsafe { pipeline_from_host(staging, src, bytes, Plan::new(bytes), dma) }?;
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
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl Plan {
    fn new(bytes: usize) -> Plan {
        Plan::for_cores(bytes, cores())
    }

    /// One thread per [`MIN_BYTES_PER_WORKER`], at most [`MAX_WORKERS`] and one fewer than
    /// the cores (the calling thread runs the DMA), at least one; chunks of a power of two
    /// between 64 KiB and a slot, about a quarter of each thread's share (so the threads
    /// take turns and the DMA has slots to fill).
    fn for_cores(bytes: usize, cores: usize) -> Plan {
        let workers = MAX_WORKERS
            .min(cores.saturating_sub(1))
            .min(bytes.div_ceil(MIN_BYTES_PER_WORKER))
            .max(1);
        let chunk = (bytes / (4 * workers))
            .max(1)
            .next_power_of_two()
            .clamp(MIN_CHUNK, SLOT_BYTES);
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

/// The hand-over between the calling thread (DMA) and the worker threads (`memcpy`):
/// free slots, slots holding a chunk (`ready`), the next chunk to claim, and whether the
/// calling thread has stopped. Every slot is owned by exactly one party at a time: in
/// `free`, in `ready`, or taken by one thread; it changes hands only under the mutex,
/// which orders each owner's accesses before the next owner's.
struct Pipe {
    state: Mutex<PipeState>,
    changed: Condvar,
}

struct PipeState {
    free: Vec<usize>,
    ready: VecDeque<(usize, usize)>,
    next: usize,
    stop: bool,
    /// Worker threads that have not exited.
    workers: usize,
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
            }),
            changed: Condvar::new(),
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
            if st.workers == 0 {
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
            if st.stop || st.workers == 0 {
                return None;
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
/// that the workers exit and the thread scope's join returns.
struct StopOnDrop<'a>(&'a Pipe);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.update(|st| st.stop = true);
    }
}

/// Counts a worker out when it exits (also by a panic).
struct WorkerExit<'a>(&'a Pipe);

impl Drop for WorkerExit<'_> {
    fn drop(&mut self) {
        self.0.update(|st| st.workers -= 1);
    }
}

/// Spawns up to `n` scoped threads running `work`; returns how many started (a failed
/// spawn, e.g. at a thread limit, just means fewer).
fn spawn_workers<'scope, 'env, F>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    n: usize,
    pipe: &'env Pipe,
    work: &'env F,
) -> usize
where
    F: Fn() + Sync,
{
    let mut started = 0;
    for _ in 0..n {
        pipe.lock().workers += 1;
        let spawned = std::thread::Builder::new()
            .name("cuda-brand-copy".to_owned())
            .stack_size(256 << 10)
            .spawn_scoped(scope, move || {
                let _exit = WorkerExit(pipe);
                work();
            });
        if spawned.is_err() {
            pipe.update(|st| st.workers -= 1);
            break;
        }
        started += 1;
    }
    started
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
// time, and the range outlives the thread scope that uses it.
unsafe impl Send for HostRange {}
// SAFETY: as above.
unsafe impl Sync for HostRange {}

#[cold]
fn workers_lost() -> Error {
    Error::with_detail(
        "staging",
        ErrorCode::Unknown,
        "every copying thread exited before the copy was done",
    )
}

/// Device to host through `staging`: the calling thread fills a free slot with each chunk
/// (`dma(slot, offset, len)`: the chunk at `offset` of the source, complete when it
/// returns), a worker copies the slot into the chunk's place in `dst`. `Ok(false)`: no
/// thread could be started, nothing was copied.
///
/// # Safety
/// `dst` is valid for `bytes` of writes (it may be uninitialised) and nothing else uses it
/// during the call; `staging` is used by no other copy; `dma` writes at most `len` bytes
/// to the slot it is given.
unsafe fn pipeline_to_host(
    staging: &Staging,
    dst: *mut u8,
    bytes: usize,
    plan: Plan,
    mut dma: impl FnMut(*mut u8, usize, usize) -> Result<()>,
) -> Result<bool> {
    let chunks = Chunks::new(dst as usize, bytes, plan.chunk);
    let pipe = Pipe::new((plan.workers + 2).min(staging.slots()));
    let host = HostRange(dst);
    let work = || {
        while let Some((chunk, slot)) = pipe.take_ready() {
            let (offset, len) = chunks.get(chunk);
            let to = host.at(offset);
            // SAFETY: the slot holds the chunk's `len <= SLOT_BYTES` bytes (its DMA was
            // complete before the slot was put ready) and is this thread's until it is put
            // back; `[to, to + len)` lies in `dst` (the chunks cover it exactly), is
            // written by this thread only (each chunk is handed out once), and nobody else
            // uses `dst` during the copy (the caller's guarantee).
            unsafe { std::ptr::copy_nonoverlapping(staging.slot(slot), to, len) };
            pipe.put_free(slot);
        }
    };
    std::thread::scope(|scope| {
        let stop = StopOnDrop(&pipe);
        if spawn_workers(scope, plan.workers, &pipe, &work) == 0 {
            return Ok(false);
        }
        for chunk in 0..chunks.count {
            let Some(slot) = pipe.take_free() else {
                return Err(workers_lost());
            };
            let (offset, len) = chunks.get(chunk);
            // the slot is this thread's (taken from `free`) until it is put ready
            dma(staging.slot(slot), offset, len)?;
            pipe.put_ready(chunk, slot);
        }
        drop(stop);
        Ok(true)
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
    std::thread::scope(|scope| {
        let stop = StopOnDrop(&pipe);
        if spawn_workers(scope, plan.workers, &pipe, &work) == 0 {
            return Ok(false);
        }
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
        drop(stop);
        Ok(true)
    })
}

/// The number of threads a staged copy of `bytes` spawns on this machine.
pub(super) fn workers_for(bytes: usize) -> usize {
    Plan::new(bytes).workers
}

#[cfg(test)]
mod tests {
    use super::super::{SLOTS, STAGING_BYTES};
    use super::*;

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
            Plan::for_cores(64 << 20, 16),
            Plan {
                workers: MAX_WORKERS,
                chunk: SLOT_BYTES
            }
        );
        assert_eq!(Plan::for_cores(64 << 20, 2).workers, 1);
        assert_eq!(Plan::for_cores(64 << 20, 1).workers, 1, "at least one");
        let small = Plan::for_cores(1 << 20, 16);
        assert_eq!(small.workers, 4);
        assert_eq!(small.chunk, 64 << 10);
        assert_eq!(Plan::for_cores(1, 16).chunk, MIN_CHUNK);
        for bytes in [1usize, 4095, 1 << 20, 3 << 20, 1 << 30] {
            let p = Plan::for_cores(bytes, 64);
            assert!(p.chunk.is_power_of_two() && p.chunk <= SLOT_BYTES);
            assert!(p.workers + 2 <= SLOTS);
        }
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
            for cores in [2, 3, 16] {
                let plan = Plan::for_cores(bytes, cores);
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
                // SAFETY: `dst` has room for `bytes`; the staging is this test's.
                let done = unsafe { pipeline_to_host(&staging, dst, bytes, plan, dma) };
                assert!(done.unwrap());
                assert!(
                    host[at..at + bytes] == *source,
                    "{bytes} bytes at {start}, {cores} cores"
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
                let done =
                    unsafe { pipeline_from_host(&staging, source.as_ptr(), bytes, plan, dma) };
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

    #[test]
    fn a_failing_dma_stops_the_pipeline_with_its_error() {
        let staging = Staging::allocate(STAGING_BYTES).unwrap();
        let bytes = 8 << 20;
        let source = vec![7u8; bytes];
        let mut host = vec![0u8; bytes];
        let plan = Plan::for_cores(bytes, 16);
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
        let e = unsafe { pipeline_to_host(&staging, host.as_mut_ptr(), bytes, plan, dma) };
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
        let e = unsafe { pipeline_from_host(&staging, source.as_ptr(), bytes, plan, dma) };
        assert_eq!(e.unwrap_err().call(), "fake DMA");
    }
}
