//! Bulk copies between device memory and pageable host memory (a `Vec`, a slice), staged
//! through page-locked buffers that the crate keeps per context.
//!
//! # Why
//!
//! The driver copies pageable memory itself, one thread, through its own small buffers.
//! Measured on an H100 (driver 580, `docs/driver-facts.md`): `cuMemcpyDtoH` into a new
//! `Vec` runs at 1.1–1.4 GB/s (the cost is the driver's handling of never-used pages: into
//! a reused `Vec` it runs at 9–14 GB/s), `cuMemcpyHtoD` from a `Vec` at 6–8 GB/s, while
//! the copy engine moves 55 GB/s from and into page-locked memory.
//!
//! # How
//!
//! A copy of at least a threshold's bytes ([`Kind`], [`threshold`]) is cut into chunks of at
//! most [`SLOT_BYTES`], aligned to their size in the host range (so with 2 MiB huge pages no
//! two threads fault the same page). The calling thread runs the DMA of each chunk with
//! the driver's synchronous copy between the device and one slot of a page-locked staging
//! buffer; up to [`MAX_WORKERS`] scoped threads ([`std::thread::scope`], spawned for the
//! copy) move chunks between the slots and the host range with `memcpy`. The two overlap:
//! while the copy engine fills or drains one slot, the threads work on others.
//!
//! * Device to host: the DMA writes a slot, a thread copies the slot into the
//!   destination. The destination's pages are first touched by several threads at once,
//!   and the driver never sees them. A new `Vec` ([`DeviceSlice::to_vec`](crate::DeviceSlice::to_vec)) is also
//!   advised to the kernel as huge-page memory (`madvise(MADV_HUGEPAGE)`, Linux) where it
//!   spans whole 2 MiB pages, so a fault maps 2 MiB instead of 4 KiB.
//! * Host to device: threads copy chunks of the source into slots, the calling thread
//!   sends each filled slot to the device. At the end it waits for the legacy stream, as
//!   the unstaged path does, so the copy is complete when it returns.
//!
//! The copies stay synchronous, on the calling thread's current context and its legacy
//! stream, as without staging: each DMA is `cuMemcpyDtoH`/`cuMemcpyHtoD` between the
//! device and page-locked memory, which the driver completes before it returns. Host
//! memory the driver already knows (page-locked or registered: a
//! [`PinnedBuffer`](crate::PinnedBuffer)'s contents) is copied directly, without staging.
//!
//! # What the crate keeps, and when it is freed
//!
//! A *staging* is [`STAGING_BYTES`] (20 MiB) of host memory that the crate allocates
//! itself (`std::alloc`) and page-locks for one context with `cuMemHostRegister`. A
//! context gets its first staging at its first staged copy (or from [`reserve`]), and at
//! most [`MAX_STAGINGS_PER_CONTEXT`] (so at most 40 MiB page-locked per context): a copy
//! finding all of them busy on other threads waits for one (never for anything else, so
//! it cannot deadlock). No threads are kept: the copying threads exist for one copy.
//!
//! A context's stagings are unregistered and freed:
//!
//! * [`with_context`](crate::with_context): at its teardown, after the synchronization,
//!   while the context is still current, before it is destroyed;
//! * [`with_raw_context`](crate::with_raw_context): before the pop at the end of every
//!   call (the owner may destroy the context afterwards);
//! * [`with_primary_context`](crate::with_primary_context): the primary context can be
//!   held by others (the runtime API, another crate, an outer or concurrent
//!   `with_primary_context`), so its stagings stay while it stays active; after a release
//!   that leaves it inactive (the driver destroyed it, unregistering its memory) the
//!   crate frees them. A program that uses the runtime API's context for the whole run
//!   keeps one or two stagings for the whole run.
//!
//! A staging in use by a copy when its context's entry is freed is freed by that copy
//! when it is done. Failing to page-lock memory (`cuMemHostRegister` refused) is no
//! error: the copy takes the driver's path, and so do the context's later copies until
//! [`reserve`] succeeds or the context ends.
//!
//! The staging memory is the crate's own allocation, not the driver's: if a context
//! vanished without the crate's teardown (destroyed by code outside the crate while it
//! was current), its entry holds memory that is merely no longer page-locked; copies
//! through it stay correct. Nothing the crate keeps is a driver handle (no stream, no
//! event), so a stale entry can never reach the driver as a dangling handle.
//!
//! # The setup/run split
//!
//! [`reserve`] allocates a context's first staging now (in a setup phase), and [`freeze`]
//! stops a context from allocating any more: a frozen context's bulk copies use the
//! stagings it has (waiting for one if another thread is using it) or, if it has none,
//! the driver's path.

use std::alloc::Layout;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use cuda_driver_sys::CUctx_st;

use crate::context::{self, ContextGuard};
use crate::driver::{self, CUcontext, CUdevice, CUdeviceptr};
use crate::error::{Error, ErrorCode, Result};

/// Bytes of one slot of a staging: the largest chunk one DMA moves, and the huge-page size
/// the chunks of a large copy are aligned to.
pub const SLOT_BYTES: usize = 2 << 20;
/// Slots in one staging: enough for [`MAX_WORKERS`] threads each holding one while the DMA
/// fills or drains two more.
pub const SLOTS: usize = MAX_WORKERS + 2;
/// Bytes of page-locked host memory in one staging (20 MiB).
pub const STAGING_BYTES: usize = SLOT_BYTES * SLOTS;
/// The most stagings one context has at once (so at most 40 MiB page-locked per context):
/// two threads copying at once each get one, a third waits.
pub const MAX_STAGINGS_PER_CONTEXT: usize = 2;
/// The most threads one staged copy spawns to move chunks between the host range and the
/// slots (fewer on a machine with fewer cores, or for a smaller copy).
pub const MAX_WORKERS: usize = 8;
/// A staged copy spawns one thread for every this many bytes (at least one).
pub const MIN_BYTES_PER_WORKER: usize = 256 << 10;
/// The smallest chunk.
const MIN_CHUNK: usize = 64 << 10;
/// A new `Vec` of at least this size is advised as huge-page memory.
const HUGE_PAGE_MIN: usize = 4 << 20;

/// The kinds of bulk copy, each with its own threshold (see [`threshold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Device to a new `Vec`: [`DeviceSlice::to_vec`](crate::DeviceSlice::to_vec).
    ToNewHost = 0,
    /// Device to an existing slice: [`DeviceSlice::copy_to_host`](crate::DeviceSlice::copy_to_host).
    ToHost = 1,
    /// Host slice to the device: [`DeviceBuffer::from_slice`](crate::DeviceBuffer::from_slice)
    /// (and `from_slice_in`), [`DeviceSlice::copy_from_host`](crate::DeviceSlice::copy_from_host).
    FromHost = 2,
}

impl Kind {
    /// Every kind, in order.
    pub const ALL: [Kind; 3] = [Kind::ToNewHost, Kind::ToHost, Kind::FromHost];

    /// The built-in threshold in bytes: copies of at least this size are staged. Picked
    /// by `bench/benches/bulk_copies.rs`, whose sweep reports where staging starts to
    /// win; `docs`: BENCHMARKS.md, "Bulk copies".
    pub const fn default_threshold(self) -> usize {
        match self {
            // measured on an H100 (BENCHMARKS.md, "Bulk copies"): staging loses at 1 MiB
            // (the copy threads' start-up) and wins from 16 MiB on, for every kind
            Kind::ToNewHost => 16 << 20,
            Kind::ToHost => 16 << 20,
            Kind::FromHost => 16 << 20,
        }
    }
}

static THRESHOLDS: [AtomicUsize; 3] = [
    AtomicUsize::new(Kind::ToNewHost.default_threshold()),
    AtomicUsize::new(Kind::ToHost.default_threshold()),
    AtomicUsize::new(Kind::FromHost.default_threshold()),
];

/// The threshold of `kind` now: its [default](Kind::default_threshold) unless
/// [`set_threshold`] changed it.
pub fn threshold(kind: Kind) -> usize {
    THRESHOLDS[kind as usize].load(Ordering::Relaxed)
}

/// Sets the threshold of `kind` for the whole process (the benchmark's sweep: 0 stages
/// every copy, `usize::MAX` none).
pub fn set_threshold(kind: Kind, bytes: usize) {
    THRESHOLDS[kind as usize].store(bytes, Ordering::Relaxed);
}

/// Whether a copy of `bytes` of `kind` should be staged: one relaxed load and a compare,
/// all that a small copy pays.
#[inline(always)]
pub(crate) fn wanted(kind: Kind, bytes: usize) -> bool {
    bytes >= THRESHOLDS[kind as usize].load(Ordering::Relaxed)
}

/// Bytes of staging memory that exist in the process (all contexts).
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Makes every staging allocation fail (tests of the fallback).
static FAIL_ALLOCATIONS: AtomicBool = AtomicBool::new(false);

/// Bytes of staging memory that exist now, in all contexts of the process.
pub fn live_bytes() -> usize {
    LIVE_BYTES.load(Ordering::SeqCst)
}

/// Makes every later staging allocation fail (`true`) or work again (`false`), to test
/// the fallback to the driver's path.
pub fn simulate_allocation_failure(on: bool) {
    FAIL_ALLOCATIONS.store(on, Ordering::SeqCst);
}

// ---- stagings ----------------------------------------------------------------------------

/// Host memory the crate allocated, page-locked (registered) for one context or not.
pub(crate) struct Staging {
    base: NonNull<u8>,
    bytes: usize,
    registered: bool,
}

// SAFETY: a `Staging` owns plain host memory; which thread reads or writes which slot is
// decided by the pipeline below, under its mutex.
unsafe impl Send for Staging {}
// SAFETY: `&Staging` only hands out raw slot pointers; every access through them is
// justified where it happens (one owner per slot at a time, handed over under a mutex).
unsafe impl Sync for Staging {}

impl Staging {
    fn layout(bytes: usize) -> Option<Layout> {
        Layout::from_size_align(bytes, SLOT_BYTES).ok()
    }

    /// `bytes` (a multiple of [`SLOT_BYTES`], not 0) of host memory, not page-locked.
    fn allocate(bytes: usize) -> Option<Staging> {
        if bytes == 0 || FAIL_ALLOCATIONS.load(Ordering::SeqCst) {
            return None;
        }
        let layout = Self::layout(bytes)?;
        // SAFETY: the layout has a non-zero size.
        let base = NonNull::new(unsafe { std::alloc::alloc(layout) })?;
        LIVE_BYTES.fetch_add(bytes, Ordering::SeqCst);
        Some(Staging {
            base,
            bytes,
            registered: false,
        })
    }

    /// A staging of [`STAGING_BYTES`], page-locked for the current context.
    fn create() -> Result<Staging> {
        let Some(mut staging) = Self::allocate(STAGING_BYTES) else {
            return Err(Error::with_detail(
                "staging",
                ErrorCode::OutOfMemory,
                format!("allocating {STAGING_BYTES} bytes of host memory for staging failed"),
            ));
        };
        thp::advise_huge(staging.base.as_ptr(), staging.bytes);
        // SAFETY: the staging owns the range, and unregisters it before freeing it (`Drop`).
        unsafe { driver::mem_host_register(staging.base.as_ptr().cast(), staging.bytes, 0) }?;
        staging.registered = true;
        Ok(staging)
    }

    fn slots(&self) -> usize {
        self.bytes / SLOT_BYTES
    }

    /// The start of slot `i` (`i < slots()`), [`SLOT_BYTES`] long.
    fn slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.slots());
        self.base.as_ptr().wrapping_add(i * SLOT_BYTES)
    }

    /// Marks the memory as no longer page-locked, for a staging whose context the driver
    /// has destroyed (which unregistered it).
    fn forget_registration(&mut self) {
        self.registered = false;
    }
}

impl Drop for Staging {
    /// Unregisters the memory (in the current context, which must be the one that
    /// registered it: the crate drops a staging only with its context current, or after
    /// [`Staging::forget_registration`]) and frees it. If the driver refuses the
    /// unregistration for another reason than "not registered", the memory is leaked
    /// rather than handed back to the allocator while the driver may keep it page-locked.
    fn drop(&mut self) {
        if self.registered {
            // SAFETY: registered by this staging; no copy uses it (a staging is dropped only
            // when no lease holds it).
            match unsafe { driver::mem_host_unregister(self.base.as_ptr().cast()) } {
                Ok(()) => {}
                Err(e) if e.code() == ErrorCode::HostMemoryNotRegistered => {}
                Err(_) => return,
            }
        }
        let Some(layout) = Self::layout(self.bytes) else {
            return;
        };
        // SAFETY: allocated by `allocate` with this layout, not registered any more.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), layout) };
        LIVE_BYTES.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

// ---- the registry of stagings per context -------------------------------------------------

/// The stagings of one context.
struct Entry {
    /// The context's handle as a number (a key, never dereferenced or passed on).
    key: usize,
    /// Distinguishes this entry from a later one of a context with the same handle.
    generation: u64,
    /// Stagings no copy is using.
    idle: Vec<Staging>,
    /// Stagings that exist or are being created, idle or leased.
    live: usize,
    /// No more allocations ([`freeze`]).
    frozen: bool,
    /// An allocation failed: no more attempts until [`reserve`] or the context's end.
    unavailable: bool,
}

struct Registry {
    entries: Vec<Entry>,
    generations: u64,
}

impl Registry {
    fn position(&self, key: usize) -> Option<usize> {
        self.entries.iter().position(|e| e.key == key)
    }

    /// The entry of `key`, made if there is none.
    fn entry(&mut self, key: usize) -> &mut Entry {
        let i = match self.position(key) {
            Some(i) => i,
            None => {
                // from the first entry on, every context teardown frees its context's
                register_end_hooks();
                self.generations += 1;
                self.entries.push(Entry {
                    key,
                    generation: self.generations,
                    idle: Vec::new(),
                    live: 0,
                    frozen: false,
                    unavailable: false,
                });
                ENTRIES.store(self.entries.len(), Ordering::SeqCst);
                self.entries.len() - 1
            }
        };
        &mut self.entries[i]
    }

    /// The entry of `key` if it is still the one of `generation`.
    fn entry_of(&mut self, key: usize, generation: u64) -> Option<&mut Entry> {
        self.entries
            .iter_mut()
            .find(|e| e.key == key && e.generation == generation)
    }

    fn remove(&mut self, key: usize) -> Option<Entry> {
        let i = self.position(key)?;
        let entry = self.entries.swap_remove(i);
        ENTRIES.store(self.entries.len(), Ordering::SeqCst);
        Some(entry)
    }
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    entries: Vec::new(),
    generations: 0,
});
/// Signalled whenever a staging goes back to the registry, an entry goes away, or a
/// context is unfrozen: what a copy waiting for a staging waits for.
static RETURNED: Condvar = Condvar::new();
/// The number of entries: teardown looks at the registry only when it is not zero.
static ENTRIES: AtomicUsize = AtomicUsize::new(0);

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A staging checked out of the registry for one copy; it goes back when dropped (also
/// while a panic unwinds), or is freed then if its context's entry went away meanwhile.
pub(crate) struct Lease {
    key: usize,
    generation: u64,
    staging: Option<Staging>,
}

impl Lease {
    fn staging(&self) -> Option<&Staging> {
        self.staging.as_ref()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(staging) = self.staging.take() {
            check_in(self.key, self.generation, staging);
        }
    }
}

/// A staging for a copy in context `key`: an idle one, a new one from `create` (if the
/// context may have another), or one another thread gives back (waiting for it). `None`:
/// the copy takes the driver's path (frozen with none, or allocation failed).
fn acquire(key: usize, create: impl FnOnce() -> Result<Staging>) -> Option<Lease> {
    let mut reg = registry();
    loop {
        let e = reg.entry(key);
        if let Some(staging) = e.idle.pop() {
            return Some(Lease {
                key,
                generation: e.generation,
                staging: Some(staging),
            });
        }
        if !e.frozen && !e.unavailable && e.live < MAX_STAGINGS_PER_CONTEXT {
            e.live += 1;
            let generation = e.generation;
            drop(reg);
            return match create() {
                Ok(staging) => Some(Lease {
                    key,
                    generation,
                    staging: Some(staging),
                }),
                Err(_) => {
                    give_up(key, generation, true);
                    None
                }
            };
        }
        if e.live == 0 {
            return None;
        }
        // Another copy of this context holds every staging it may have: wait for one.
        reg = RETURNED.wait(reg).unwrap_or_else(PoisonError::into_inner);
    }
}

/// Undoes the `live += 1` of a creation that failed.
fn give_up(key: usize, generation: u64, failed: bool) {
    let mut reg = registry();
    if let Some(e) = reg.entry_of(key, generation) {
        e.live -= 1;
        e.unavailable |= failed;
    }
    drop(reg);
    RETURNED.notify_all();
}

fn check_in(key: usize, generation: u64, staging: Staging) {
    let mut reg = registry();
    match reg.entry_of(key, generation) {
        Some(e) => {
            e.idle.push(staging);
            drop(reg);
            RETURNED.notify_all();
        }
        // The context's entry went away while the copy ran: free it now (the copy's
        // context is still current here).
        None => {
            drop(reg);
            drop(staging);
        }
    }
}

/// Removes the entry of `key` and returns its idle stagings (leased ones are freed by
/// their copies).
fn retire(key: usize) -> Vec<Staging> {
    if ENTRIES.load(Ordering::SeqCst) == 0 {
        return Vec::new();
    }
    let removed = registry().remove(key);
    RETURNED.notify_all();
    removed.map(|e| e.idle).unwrap_or_default()
}

fn reserve_with(key: usize, create: impl FnOnce() -> Result<Staging>) -> Result<()> {
    let mut reg = registry();
    let e = reg.entry(key);
    if e.live > 0 {
        return Ok(());
    }
    e.live += 1;
    e.unavailable = false;
    let generation = e.generation;
    drop(reg);
    match create() {
        Ok(staging) => {
            check_in(key, generation, staging);
            Ok(())
        }
        Err(err) => {
            give_up(key, generation, false);
            Err(err)
        }
    }
}

fn freeze_key(key: usize, frozen: bool) {
    registry().entry(key).frozen = frozen;
    RETURNED.notify_all();
}

fn live_of(key: usize) -> usize {
    let reg = registry();
    reg.position(key).map_or(0, |i| reg.entries[i].live)
}

fn key(ctx: ContextGuard<'_>) -> usize {
    ctx.as_non_null().as_ptr() as usize
}

/// Allocates the first staging of `ctx` now, unless it has one: for a setup phase, before
/// [`freeze`]. An error says why the memory could not be allocated or page-locked (the
/// context's copies then take the driver's path).
pub(crate) fn reserve(ctx: ContextGuard<'_>) -> Result<()> {
    ctx.with_current(|| reserve_with(key(ctx), Staging::create))
}

/// Freezes (`true`) or unfreezes the stagings of `ctx`: a frozen context allocates no
/// staging; its bulk copies use the stagings it has ([`reserve`]) or the driver's path.
pub(crate) fn freeze(ctx: ContextGuard<'_>, frozen: bool) {
    freeze_key(key(ctx), frozen);
}

/// Frees the idle stagings of `ctx` now and forgets its reservation and freeze; a later
/// bulk copy allocates again.
pub(crate) fn release(ctx: ContextGuard<'_>) -> Result<()> {
    ctx.with_current(|| {
        drop(retire(key(ctx)));
        Ok(())
    })
}

/// The bytes of staging `ctx` has (idle, in use, or being created).
pub(crate) fn bytes_of(ctx: ContextGuard<'_>) -> usize {
    live_of(key(ctx)) * STAGING_BYTES
}

/// Has every context teardown run [`on_context_end`] and [`after_primary_release`] (the
/// context layer, below this one, cannot name them). Registered before the first entry is
/// made: until then no context has anything to free, and a teardown costs one atomic load.
fn register_end_hooks() {
    context::teardown::register_end_hooks(context::teardown::EndHooks {
        before_give_up: on_context_end,
        after_primary_release,
    });
}

/// Teardown hook of a context the crate gives up and whose owner may destroy it next
/// (`with_context` before `cuCtxDestroy`, `with_raw_context` before its pop): unregisters
/// and frees its idle stagings. One atomic load when no context has any.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
#[inline]
pub(crate) unsafe fn on_context_end(raw: CUcontext) {
    if ENTRIES.load(Ordering::Relaxed) != 0 {
        drop(retire(raw as usize));
    }
}

/// Teardown hook after `cuDevicePrimaryCtxRelease` of `raw`, the primary context of
/// `device`: if the release left it inactive, the driver destroyed it (and unregistered
/// its memory), so its stagings are freed; otherwise someone still holds it and they stay.
#[inline]
pub(crate) fn after_primary_release(raw: CUcontext, device: CUdevice) {
    if ENTRIES.load(Ordering::Relaxed) != 0 {
        after_primary_release_slow(raw as usize, device);
    }
}

#[cold]
#[inline(never)]
fn after_primary_release_slow(key: usize, device: CUdevice) {
    if registry().position(key).is_none() {
        return;
    }
    // Only a context known to be gone: were it alive (or its state unknown), freeing memory
    // it still has page-locked could let the allocator hand the addresses out again while
    // the driver maps them to the old pages.
    let Ok((_, false)) = driver::primary_ctx_state(device) else {
        return;
    };
    for mut staging in retire(key) {
        staging.forget_registration();
    }
}

// ---- the copies ---------------------------------------------------------------------------

/// Whether the driver knows the host address (page-locked, registered or managed memory),
/// in which case it copies at full speed itself.
fn host_is_known(p: *const u8) -> Result<bool> {
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

// ---- huge pages ---------------------------------------------------------------------------

/// `madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages of a new allocation (Linux; the
/// advice's value, 14, is the same on every architecture CUDA supports there). The
/// crate declares the one function itself rather than depending on `libc`: the C library
/// is linked by `std` on Linux already.
#[cfg(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "powerpc64",
        target_arch = "riscv64"
    )
))]
mod thp {
    use std::ffi::{c_int, c_void};

    const MADV_HUGEPAGE: c_int = 14;
    const HUGE_PAGE: usize = 2 << 20;

    unsafe extern "C" {
        /// `int madvise(void *addr, size_t length, int advice)`, POSIX/Linux.
        fn madvise(addr: *mut c_void, length: usize, advice: c_int) -> c_int;
    }

    /// Advises the 2 MiB-aligned part of `[start, start + bytes)`, an allocation of the
    /// crate's, as huge-page memory. Only whole huge pages inside the range are advised,
    /// so no neighbouring allocation is touched. A refusal (huge pages disabled) changes
    /// nothing, so it is ignored.
    pub(super) fn advise_huge(start: *mut u8, bytes: usize) {
        let lo = start as usize;
        let first = lo.next_multiple_of(HUGE_PAGE);
        let last = (lo + bytes) / HUGE_PAGE * HUGE_PAGE;
        if last > first {
            let at = start.wrapping_add(first - lo).cast::<c_void>();
            // SAFETY: `[first, last)` is page-aligned and inside an allocation the caller
            // owns; `MADV_HUGEPAGE` changes how the kernel backs the range, never its
            // contents or whether it is mapped.
            let _ = unsafe { madvise(at, last - first, MADV_HUGEPAGE) };
        }
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "powerpc64",
        target_arch = "riscv64"
    )
)))]
mod thp {
    pub(super) fn advise_huge(_start: *mut u8, _bytes: usize) {}
}

// ---- for the crate's tests and benchmarks -------------------------------------------------

/// What `cuda_brand::__staging` exports (hidden): the thresholds and counters, for the
/// crate's GPU tests and `bench/benches/bulk_copies.rs`. Not an API: it may change at
/// any time.
pub mod hidden {
    pub use super::{
        Kind, MAX_STAGINGS_PER_CONTEXT, MAX_WORKERS, MIN_BYTES_PER_WORKER, SLOT_BYTES, SLOTS,
        STAGING_BYTES, live_bytes, set_threshold, simulate_allocation_failure, threshold,
    };
    use crate::{ContextGuard, Result};

    /// Bytes of staging that context `ctx` has (idle, in use, or being created).
    pub fn bytes_of(ctx: ContextGuard<'_>) -> usize {
        super::bytes_of(ctx)
    }

    /// Allocates the first staging of `ctx` now, unless it has one.
    pub fn reserve(ctx: ContextGuard<'_>) -> Result<()> {
        super::reserve(ctx)
    }

    /// Freezes or unfreezes the stagings of `ctx`.
    pub fn freeze(ctx: ContextGuard<'_>, frozen: bool) {
        super::freeze(ctx, frozen)
    }

    /// Frees the idle stagings of `ctx` now.
    pub fn release(ctx: ContextGuard<'_>) -> Result<()> {
        super::release(ctx)
    }

    /// The host addresses of the idle stagings of `ctx`.
    pub fn addresses_of(ctx: ContextGuard<'_>) -> Vec<usize> {
        let key = super::key(ctx);
        let reg = super::registry();
        reg.position(key).map_or_else(Vec::new, |i| {
            reg.entries[i]
                .idle
                .iter()
                .map(|s| s.base.as_ptr() as usize)
                .collect()
        })
    }

    /// Whether the driver knows host address `addr` (page-locked or registered in a
    /// context), from `cuPointerGetAttributes`.
    pub fn is_known_to_driver(addr: usize) -> Result<bool> {
        super::host_is_known(addr as *const u8)
    }

    /// The number of threads a staged copy of `bytes` spawns on this machine.
    pub fn workers_for(bytes: usize) -> usize {
        super::Plan::new(bytes).workers
    }
}

#[cfg(test)]
mod tests {
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

    fn fake(bytes: usize) -> impl FnOnce() -> Result<Staging> {
        move || Staging::allocate(bytes).ok_or_else(|| Error::new("fake", ErrorCode::OutOfMemory))
    }

    fn failing() -> Result<Staging> {
        Err(Error::new("fake", ErrorCode::OutOfMemory))
    }

    // Keys no real context has (and distinct per test: the registry is shared).
    const A: usize = 0xdead_0001;
    const B: usize = 0xdead_0002;
    const C: usize = 0xdead_0003;
    const D: usize = 0xdead_0004;

    #[test]
    fn a_context_reuses_its_staging_and_has_at_most_the_maximum() {
        let first = acquire(A, fake(SLOT_BYTES)).expect("created");
        let base = first.staging().unwrap().base.as_ptr() as usize;
        drop(first);
        let again = acquire(A, failing).expect("the idle one, nothing created");
        assert_eq!(again.staging().unwrap().base.as_ptr() as usize, base);
        let second = acquire(A, fake(SLOT_BYTES)).expect("a second one while the first is busy");
        assert_eq!(live_of(A), MAX_STAGINGS_PER_CONTEXT);
        // a third copy waits until one comes back, and gets that one
        std::thread::scope(|s| {
            let waiter = s
                .spawn(|| acquire(A, failing).map(|l| l.staging().unwrap().base.as_ptr() as usize));
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiter.is_finished(), "waits for a staging");
            drop(again);
            assert_eq!(waiter.join().unwrap(), Some(base));
        });
        drop(second);
        assert_eq!(live_of(A), 2);
        drop(retire(A));
        assert_eq!(live_of(A), 0);
    }

    #[test]
    fn a_frozen_context_never_allocates_and_uses_its_reservation() {
        freeze_key(B, true);
        assert!(
            acquire(B, fake(SLOT_BYTES)).is_none(),
            "frozen with none: driver path"
        );
        assert_eq!(live_of(B), 0);
        reserve_with(B, fake(SLOT_BYTES)).unwrap();
        reserve_with(B, failing).expect("already reserved: nothing to do");
        assert_eq!(live_of(B), 1);
        let lease = acquire(B, failing).expect("the reserved one");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| acquire(B, failing).is_some());
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiter.is_finished(), "frozen: waits for the reserved one");
            drop(lease);
            assert!(waiter.join().unwrap());
        });
        assert_eq!(live_of(B), 1, "never more than the reservation");
        drop(retire(B));
    }

    #[test]
    fn a_failed_allocation_falls_back_and_is_not_retried() {
        assert!(acquire(C, failing).is_none());
        assert_eq!(live_of(C), 0);
        assert!(acquire(C, fake(SLOT_BYTES)).is_none(), "not retried");
        assert!(reserve_with(C, failing).is_err());
        reserve_with(C, fake(SLOT_BYTES)).expect("a reservation tries again");
        assert!(acquire(C, failing).is_some());
        drop(retire(C));
    }

    #[test]
    fn a_staging_in_use_when_its_context_ends_is_freed_by_its_copy() {
        let lease = acquire(D, fake(SLOT_BYTES)).unwrap();
        assert!(retire(D).is_empty(), "the only staging is in use");
        drop(lease); // its entry is gone: freed
        assert_eq!(live_of(D), 0);
        // a new entry for the same key starts afresh
        let lease = acquire(D, fake(SLOT_BYTES)).unwrap();
        drop(lease);
        assert_eq!(live_of(D), 1);
        drop(retire(D));
    }
}
