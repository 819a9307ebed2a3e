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
//! A copy of at least a threshold's bytes ([`CopyKind`], [`threshold`]) is cut into chunks,
//! the DMA's units: powers of two from 256 KiB to [`SLOT_BYTES`], each inside one block
//! of its size in the host range and at most half of what is left, the first few growing
//! from 256 KiB; so a large copy moves 2 MiB chunks that each fill one huge page, and its
//! first and last chunks are short. The calling thread queues each chunk's DMA between
//! the device and one slot of a page-locked staging buffer with
//! `cuMemcpyDtoHAsync`/`cuMemcpyHtoDAsync` on the copy's stream (below; an upload: a run
//! of up to four filled slots as one DMA), an event after each, and waits for the event before the
//! slots change hands. Up to [`MAX_WORKERS`] threads
//! that the staging keeps copy each chunk between its slot and the host range in pieces
//! of 256 KiB, several threads on one chunk (a new `Vec`: a whole chunk per thread, so
//! that each huge page is faulted in by one thread); the calling thread copies pieces too
//! whenever it has nothing to queue or wait for. The copy engine and the threads overlap:
//! while it fills or drains some slots, the threads work on others. Pieces copied out into
//! memory written before use streaming stores (x86-64), which do not read the
//! destination's cache lines first.
//!
//! * Device to host: the DMA writes a slot, a thread copies the slot into the
//!   destination. The destination's pages are first touched by several threads at once,
//!   and the driver never sees them. A new `Vec` ([`DeviceSlice::to_vec`](crate::DeviceSlice::to_vec)) is also
//!   advised to the kernel as huge-page memory (`madvise(MADV_HUGEPAGE)`, Linux) where it
//!   spans whole 2 MiB pages, so a fault maps 2 MiB instead of 4 KiB.
//! * Host to device: threads copy chunks of the source into slots (at most 8 slots, so
//!   16 MiB of the staging; a copy of up to 16 MiB with streaming stores, so that the
//!   copy engine reads the slots from memory instead of out of the copying cores'
//!   caches), the calling thread queues each filled slot's DMA (filled slots that follow
//!   each other in the staging and in the copy as one DMA of up to 8 MiB) and frees the
//!   slots when its event completes, watching for filled slots meanwhile. The slots are
//!   handed out in turn, so that filled ones follow each other.
//!
//! The copies stay synchronous, in the calling thread's current context: the call returns
//! after every DMA's event completed and every byte was copied on the host. Their stream is
//! the one every other synchronous operation of the thread uses there
//! (`crate::synchronous`): the thread's sync stream, a non-blocking stream that waits for no
//! `StreamFlags::Default` stream (so a staged copy returns while such a stream's host
//! function waits), ordered after the pending accesses the copy conflicts with
//! and synchronized at the end, as any operation that touches host memory; the legacy
//! stream, after those accesses, only where no synchronous operation may use a sync stream
//! (memory the host reads directly, pool memory in a context with no sync stream of the
//! crate, no context of the memory's device current, `CUDA_BRAND_SYNC_WRITES=wait`: the
//! list is in `docs/design/ordering.md`, "Which synchronous operations run on the legacy
//! stream"), which waits for every
//! `StreamFlags::Default` stream of the context. A copy that finds every staging of its
//! context held by other threads' copies waits for one of them to end. The events are made
//! for the copy and destroyed at its end. Host memory the driver already knows (page-locked or registered: a
//! [`PinnedBuffer`](crate::PinnedBuffer)'s contents) is copied directly, without staging.
//!
//! The kept threads spin for up to 100 µs after a copy before they sleep (the next copy
//! often follows at once, and waking a sleeping thread costs tens of microseconds), and
//! inside a copy a waiting thread spins up to 50 µs before it sleeps.
//!
//! # What the crate keeps, and when it is freed
//!
//! A *staging* is [`STAGING_BYTES`] (32 MiB) of host memory that the crate allocates
//! itself (`std::alloc`) and page-locks for one context with `cuMemHostRegister`, and up
//! to [`MAX_WORKERS`] threads (one fewer than the machine's cores; 256 KiB of stack each)
//! started with it, asleep between copies (a thread exits after 2 s without a copy, and
//! the next copy starts it again: a staging that is never freed, its context destroyed
//! behind the crate's back, keeps no threads for good). A context gets its first staging at its first
//! staged copy (or from [`reserve`]), and at most [`MAX_STAGINGS_PER_CONTEXT`] (so at most
//! 64 MiB page-locked and 16 threads per context): a copy finding all of them busy on
//! other threads waits for one (never for anything else, so it cannot deadlock).
//!
//! A context's stagings are unregistered and freed, and their threads ended:
//!
//! * [`with_context`](crate::with_context): at its teardown, after the synchronization,
//!   while the context is still current, before it is destroyed;
//! * [`with_raw_context`](crate::with_raw_context): before the pop at the end of every
//!   call (the owner may destroy the context afterwards);
//! * [`with_primary_context`](crate::with_primary_context): before the release at the
//!   end of every call (the crate cannot tell which release destroys the primary context,
//!   which others may hold: the runtime API, another crate, an outer or concurrent
//!   `with_primary_context`), so a later staged copy pins a staging again;
//! * an [`OwnedContext`](crate::OwnedContext): when its last handle is dropped or closed.
//!
//! A staging in use by a copy when its context's entry is freed is freed by that copy
//! when it is done.
//!
//! Memory of a pool (a [`DeviceBuffer`](crate::DeviceBuffer)'s, from the crate's pool) is
//! tied to no context, so its copies run in whatever context is current. A context that
//! no scope of the crate holds may be current there (another library made it current,
//! such as cudarc's `bind_to_thread` or the runtime API), and no teardown of the crate
//! would free a staging made for it: such a copy takes the driver's path and keeps
//! nothing. A context counts as held when the crate created it, retained it as the
//! primary context (`with_primary_context`,
//! [`OwnedContext::primary`](crate::OwnedContext::primary)), entered it as an SM
//! partition, or has a sync stream in it of a scope not yet ended, or when the context has
//! a staging already (made by one of those, or for memory allocated in the context). So
//! inside `with_raw_context` a copy of pool memory is staged only after something was
//! staged or synchronously written in the context.
//!
//! Failing to page-lock memory (`cuMemHostRegister` refused) is no error: the copy takes
//! the driver's path, and so do the context's later copies until [`reserve`] succeeds or
//! the context ends.
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

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use cuda_driver_sys::CUctx_st;

use crate::context::ContextGuard;
use crate::driver::{CUdeviceptr, CUstream};
use crate::error::Result;
use crate::span::Touched;
use crate::synchronous::{self, Completion, Stage};

// The rooms: the kinds and their thresholds here, in every build; with the `staging`
// feature, `kept.rs` (the sizes, counters and staging memory, the test hooks),
// `registry.rs` (the stagings of each context, leases, what a context's end frees),
// `pipeline.rs` (the copies: DMA and worker threads), `pipe.rs` (chunks, pieces and their
// hand-over), `streaming.rs` (the copy with streaming stores), `workers.rs` (the kept
// threads). Without the feature none of them is built: `wanted` is false, and every copy
// takes the driver's path.
#[cfg(feature = "staging")]
mod kept;
#[cfg(feature = "staging")]
mod pipe;
#[cfg(feature = "staging")]
mod pipeline;
#[cfg(feature = "staging")]
mod registry;
#[cfg(feature = "staging")]
mod streaming;
#[cfg(feature = "staging")]
mod workers;

#[cfg(feature = "staging")]
use kept::*;
#[cfg(all(feature = "staging", feature = "test-hooks"))]
pub(crate) use registry::release;

// The front the rest of the crate calls, in every build. Without the `staging` feature no
// copy is staged (`wanted` is false, so the copies below are never asked for), nothing is
// reserved and nothing is frozen.

/// Copies `bytes` from host memory at `src` into device memory at `dst`, in `ctx`, as the
/// synchronous path's [`upload`](crate::synchronous::upload) does, staged where [`wanted`]
/// says so (in the memory's context, `ctx`).
///
/// # Safety
/// As `synchronous::upload`.
#[inline]
pub(crate) unsafe fn upload(
    ctx: Option<NonNull<CUctx_st>>,
    completion: Completion,
    touched: Touched<'_>,
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
) -> Result<()> {
    let staged = ctx.filter(|_| wanted(CopyKind::FromHost, bytes));
    let held = completion.held();
    let mut stage = staged.map(|ctx| {
        // SAFETY: the caller's promises, on a stream of `ctx` that the staging is given
        // (the thread's sync stream, busy for this operation alone, or the legacy stream),
        // after the pending accesses `touched` conflicts with; complete when it returns.
        move |stream: CUstream| unsafe { host_to_device(ctx, held, stream, dst, src.cast(), bytes) }
    });
    let stage = stage.as_mut().map(|f| f as Stage<'_>);
    // SAFETY: the caller's promises; `stage` is this copy's, complete when it returns.
    unsafe { synchronous::upload(ctx, completion, touched, dst, src, bytes, stage) }
}

/// Copies `bytes` from device memory at `src` into host memory at `dst`, in `ctx`, as the
/// synchronous path's [`download`](crate::synchronous::download) does, staged where `kind`
/// (`ToHost`, or `ToNewHost` for a new `Vec`'s room) says so ([`wanted`]).
///
/// # Safety
/// As `synchronous::download`.
#[inline]
pub(crate) unsafe fn download(
    ctx: Option<NonNull<CUctx_st>>,
    completion: Completion,
    kind: CopyKind,
    touched: Touched<'_>,
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
) -> Result<()> {
    let staged = ctx.filter(|_| wanted(kind, bytes));
    let (fresh, held) = (kind == CopyKind::ToNewHost, completion.held());
    let mut stage = staged.map(|ctx| {
        // SAFETY: the caller's promises, on a stream of `ctx` that the staging is given (as
        // in `upload`), after the pending accesses `touched` conflicts with; complete when
        // it returns.
        move |stream: CUstream| unsafe {
            device_to_host(ctx, held, stream, dst.cast(), src, bytes, fresh)
        }
    });
    let stage = stage.as_mut().map(|f| f as Stage<'_>);
    // SAFETY: the caller's promises; `stage` is this copy's, complete when it returns.
    unsafe { synchronous::download(ctx, completion, touched, dst, src, bytes, stage) }
}

/// Copies `bytes` from the device at `src` into host memory at `dst` through a staging of
/// `ctx`: the pipeline's [`device_to_host`](pipeline::device_to_host), whose answer and
/// contract it has (`Ok(false)`: nothing copied, the caller takes the driver's path).
///
/// # Safety
/// As `pipeline::device_to_host`.
#[inline]
pub(crate) unsafe fn device_to_host(
    ctx: NonNull<CUctx_st>,
    held: bool,
    stream: CUstream,
    dst: *mut u8,
    src: CUdeviceptr,
    bytes: usize,
    fresh: bool,
) -> Result<bool> {
    #[cfg(feature = "staging")]
    // SAFETY: the caller's promises.
    return unsafe { pipeline::device_to_host(ctx, held, stream, dst, src, bytes, fresh) };
    #[allow(unreachable_code)]
    {
        let _ = (ctx, held, stream, dst, src, bytes, fresh);
        Ok(false)
    }
}

/// Copies `bytes` from host memory at `src` to the device at `dst` through a staging of
/// `ctx`: the pipeline's [`host_to_device`](pipeline::host_to_device), as
/// [`device_to_host`].
///
/// # Safety
/// As `pipeline::host_to_device`.
#[inline]
pub(crate) unsafe fn host_to_device(
    ctx: NonNull<CUctx_st>,
    held: bool,
    stream: CUstream,
    dst: CUdeviceptr,
    src: *const u8,
    bytes: usize,
) -> Result<bool> {
    #[cfg(feature = "staging")]
    // SAFETY: the caller's promises.
    return unsafe { pipeline::host_to_device(ctx, held, stream, dst, src, bytes) };
    #[allow(unreachable_code)]
    {
        let _ = (ctx, held, stream, dst, src, bytes);
        Ok(false)
    }
}

/// Allocates the first staging of `ctx` now, unless it has one (a setup phase:
/// `ContextGuard::reserve_staging`); nothing without the `staging` feature.
pub(crate) fn reserve(ctx: ContextGuard<'_>) -> Result<()> {
    #[cfg(feature = "staging")]
    registry::reserve(ctx)?;
    let _ = ctx;
    Ok(())
}

/// Stops `ctx` from allocating more stagings (`frozen`), or lets it again (a run phase);
/// nothing without the `staging` feature.
pub(crate) fn freeze(ctx: ContextGuard<'_>, frozen: bool) {
    #[cfg(feature = "staging")]
    registry::freeze(ctx, frozen);
    let _ = (ctx, frozen);
}

/// The kinds of bulk copy, each with its own threshold (see `threshold` in this module).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
// the copies' directions are named by where the host side is (crate-private without the
// `staging` feature, where clippy would ask for other names)
#[allow(clippy::enum_variant_names)]
pub enum CopyKind {
    /// Device to a new `Vec`: [`DeviceSlice::to_vec`](crate::DeviceSlice::to_vec).
    ToNewHost = 0,
    /// Device to an existing slice: [`DeviceSlice::copy_to_host`](crate::DeviceSlice::copy_to_host).
    ToHost = 1,
    /// Host slice to the device: [`DeviceBuffer::from_slice`](crate::DeviceBuffer::from_slice)
    /// (and `from_slice_in`), [`DeviceSlice::copy_from_host`](crate::DeviceSlice::copy_from_host).
    FromHost = 2,
}

impl CopyKind {
    /// Every kind, in order.
    #[cfg(all(feature = "staging", feature = "test-hooks"))]
    pub const ALL: [CopyKind; 3] = [CopyKind::ToNewHost, CopyKind::ToHost, CopyKind::FromHost];

    /// The built-in threshold in bytes: copies of at least this size are staged. Picked
    /// by `bench/benches/bulk_copies.rs`, whose sweep reports where staging starts to
    /// win; `docs`: BENCHMARKS.md, "Bulk copies".
    pub const fn default_threshold(self) -> usize {
        match self {
            // measured on an H100 and H200s (BENCHMARKS.md, "Bulk copies"): with the kept
            // threads, staging wins from 1 MiB on out of the device (at 512 KiB too in
            // most runs, but not all: up to 1.04 of the driver's time); into it, with
            // streaming stores into the slots, from 512 KiB (0.76-0.83 in six H200 sweeps;
            // with plain copies it lost there, 1.03-1.35)
            CopyKind::ToNewHost => 1 << 20,
            CopyKind::ToHost => 1 << 20,
            CopyKind::FromHost => 512 << 10,
        }
    }
}

static THRESHOLDS: [AtomicUsize; 3] = [
    AtomicUsize::new(CopyKind::ToNewHost.default_threshold()),
    AtomicUsize::new(CopyKind::ToHost.default_threshold()),
    AtomicUsize::new(CopyKind::FromHost.default_threshold()),
];

/// Whether a copy of `bytes` of `kind` should be staged: one relaxed load and a compare,
/// all that a small copy pays; never without the `staging` feature.
#[inline(always)]
pub(crate) fn wanted(kind: CopyKind, bytes: usize) -> bool {
    cfg!(feature = "staging") && bytes >= THRESHOLDS[kind as usize].load(Ordering::Relaxed)
}

// ---- for the crate's tests and benchmarks -------------------------------------------------

/// What `cuda_brand::__staging` exports (hidden): the thresholds and counters, for the
/// crate's GPU tests and `bench/benches/bulk_copies.rs`. Not an API: it may change at
/// any time. Built with the `test-hooks` feature.
#[cfg(all(feature = "test-hooks", feature = "staging"))]
pub mod hidden {
    use std::sync::atomic::Ordering;

    pub use super::CopyKind;
    use super::THRESHOLDS;
    use super::kept::{FAIL_ALLOCATIONS, LIVE_BYTES};
    pub use super::kept::{
        MAX_STAGINGS_PER_CONTEXT, MAX_WORKERS, MIN_BYTES_PER_WORKER, SLOT_BYTES, SLOTS,
        STAGING_BYTES,
    };
    use crate::context::ContextGuard;
    use crate::error::Result;

    /// The threshold of `kind` now: its [default](CopyKind::default_threshold) unless
    /// [`set_threshold`] changed it.
    pub fn threshold(kind: CopyKind) -> usize {
        THRESHOLDS[kind as usize].load(Ordering::Relaxed)
    }

    /// Sets the threshold of `kind` for the whole process (the benchmark's sweep: 0 stages
    /// every copy, `usize::MAX` none).
    pub fn set_threshold(kind: CopyKind, bytes: usize) {
        THRESHOLDS[kind as usize].store(bytes, Ordering::Relaxed);
    }

    /// Bytes of staging memory that exist now, in all contexts of the process.
    pub fn live_bytes() -> usize {
        LIVE_BYTES.load(Ordering::SeqCst)
    }

    /// Makes every later staging allocation fail (`true`) or work again (`false`), to test
    /// the fallback to the driver's path.
    pub fn simulate_allocation_failure(on: bool) {
        FAIL_ALLOCATIONS.store(on, Ordering::SeqCst);
    }

    /// Bytes of staging that context `ctx` has (idle, in use, or being created).
    pub fn bytes_of(ctx: ContextGuard<'_>) -> usize {
        super::registry::bytes_of(ctx)
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
        super::registry::addresses_of(ctx)
    }

    /// Whether the driver knows host address `addr` (page-locked or registered in a
    /// context), from `cuPointerGetAttributes`.
    pub fn is_known_to_driver(addr: usize) -> Result<bool> {
        super::pipeline::host_is_known(addr as *const u8)
    }

    /// The number of threads a staged copy of `bytes` spawns on this machine.
    pub fn workers_for(bytes: usize) -> usize {
        super::pipeline::workers_for(bytes)
    }
}
