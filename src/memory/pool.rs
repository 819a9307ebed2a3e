//! Memory pools ([`MemoryPool`]): where device memory comes from, stream-ordered.
//!
//! Every [`DeviceBuffer`](crate::DeviceBuffer) and every scope allocation
//! ([`StreamScope::alloc_zeroed`](crate::StreamScope::alloc_zeroed)) comes from a memory pool
//! (`cuMemAllocFromPoolAsync`) and goes back to it when freed (`cuMemFreeAsync`): about a
//! microsecond for both, where `cuMemAlloc` and `cuMemFree` take several (see
//! `BENCHMARKS.md`). By default that is **the crate's pool** of the context's device
//! ([`MemoryPool::of_device`]), created on first use and kept for the process:
//!
//! * only this crate allocates from it, and it frees a block only once no GPU work uses it
//!   (a scope's allocations after its streams are synchronized, a buffer when it is
//!   dropped, which the borrow checker allows only after every scope that used it), except
//!   a synchronous write still running on a sync stream, which the free on the legacy stream
//!   follows (it waits for it on the GPU) and every later scope operation waits for on the
//!   GPU (`docs/design/ordering.md`).
//!   So no block of the pool ever has work pending on it that a later user is not ordered
//!   after, and memory taken from it is valid for every stream at once: there is no
//!   cross-stream hazard of reuse, as there would be in the device's default pool, which
//!   other libraries of the process share;
//! * its release threshold is unlimited: memory freed into it stays reserved for the next
//!   allocation instead of going back to the driver at every synchronization.
//!   [`MemoryPool::trim_to`] gives it back; [`MemoryPool::reserved_bytes`] says how much
//!   there is.
//!
//! Your own pools ([`MemoryPool::new`]) serve buffers and scope allocations through the
//! `_in` constructors ([`DeviceBuffer::zeroed_in`](crate::DeviceBuffer::zeroed_in),
//! [`StreamScope::alloc_zeroed_in`](crate::StreamScope::alloc_zeroed_in)); a pool is branded
//! with its context, so it cannot outlive it or serve another context. The device's default
//! pool ([`MemoryPool::device_default`]) serves them too; since other libraries free into
//! it in stream order, a buffer from it waits for the context's legacy stream when it is
//! made ([`DeviceBuffer::uninitialized_in`](crate::DeviceBuffer::uninitialized_in)), and a
//! scope allocation from it is ordered after the block's earlier work by the driver, on
//! the scope's stream. Devices without
//! memory pools (`MEMORY_POOLS_SUPPORTED` = 0) allocate with `cuMemAlloc` instead;
//! `CUDA_BRAND_NO_MEMORY_POOLS=1` forces that path (for tests).
//!
//! A buffer of a pool takes the context's guard like any other
//! (`DeviceBuffer::zeroed_in(ctx, &pool, len)`), so the phases of
//! [`with_phases`](crate::with_phases) apply to it: made with the setup guard, it is freed
//! only by the teardown (dropped in the run phase, it stays in the pool's
//! [`used_bytes`](MemoryPool::used_bytes)), and the run-phase guard cannot make one (a
//! compile error). What the run phase may draw from a pool made in setup is the scratch of
//! a stream scope ([`StreamScope::alloc_zeroed_in`](crate::StreamScope::alloc_zeroed_in)),
//! freed when the scope ends and bounded by the pool's maximum size (give it one:
//! [`MemoryPool::with_max_size`]).
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::MemoryPool;
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let pool = MemoryPool::new(ctx)?;
//!     pool.set_release_threshold(64 << 20)?; // keep up to 64 MiB between synchronizations
//!     let buf = DeviceBuffer::<f32>::zeroed_in(ctx, &pool, 1 << 20)?;
//!     assert!(pool.used_bytes()? >= 4 << 20);
//!     drop(buf);
//!     pool.trim_to(0)?;
//!     Ok(())
//! })
//! # }
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::sync::OnceLock;

use crate::context::{Allocating, Brand, ContextGuard, Part};
use crate::driver::{self, CUdevice, CUmemoryPool};
use crate::error::{Error, ErrorCode, Result};

/// A pool of device memory of the context branded `'ctx`'s device (`CUmemoryPool`).
///
/// Made by [`MemoryPool::new`] (owned: destroyed when dropped; allocations still out are
/// released by the driver once freed), or a view of the crate's pool of the device
/// ([`MemoryPool::of_device`]) or of the device's default pool
/// ([`MemoryPool::device_default`]), which are not destroyed.
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: pools of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::MemoryPool;
///
/// /// Takes two pools of one context.
/// fn one_context<'ctx>(_: &MemoryPool<'ctx>, _: &MemoryPool<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = MemoryPool::new(a)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = MemoryPool::new(b)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct MemoryPool<'ctx> {
    raw: CUmemoryPool,
    origin: Origin,
    /// The pool's context. A guard is invariant in `'ctx`, so this field alone makes the
    /// pool invariant too; `_brand` says so where a reader looks for the brand.
    ctx: ContextGuard<'ctx>,
    /// Invariant in `'ctx` (the crate's `Brand`), as `ctx` already is. Were both covariant,
    /// pools of two contexts could be shortened to one brand and pass for one another.
    _brand: Brand<'ctx>,
}

/// Where a [`MemoryPool`] comes from, and so who destroys it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Made by [`MemoryPool::new`]: destroyed when the handle goes.
    Own,
    /// The crate's pool of the device ([`MemoryPool::of_device`]), kept for the process.
    Crate,
    /// The device's default pool ([`MemoryPool::device_default`]): other libraries of the
    /// process allocate from it and free into it in stream order (see
    /// `DeviceBuffer::uninitialized_in`).
    DeviceDefault,
}

/// How a pool may reuse memory freed in stream order (`CU_MEMPOOL_ATTR_REUSE_*`); all three
/// are on by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReusePolicy {
    /// Reuse a block whose free is pending on another stream, making the allocating stream
    /// wait for the free's stream (`REUSE_FOLLOW_EVENT_DEPENDENCIES`).
    pub follow_event_dependencies: bool,
    /// Reuse a block whose free has already completed, without any dependency
    /// (`REUSE_ALLOW_OPPORTUNISTIC`).
    pub allow_opportunistic: bool,
    /// Insert waits of its own to reuse blocks (`REUSE_ALLOW_INTERNAL_DEPENDENCIES`).
    pub allow_internal_dependencies: bool,
}

impl Default for ReusePolicy {
    fn default() -> Self {
        ReusePolicy {
            follow_event_dependencies: true,
            allow_opportunistic: true,
            allow_internal_dependencies: true,
        }
    }
}

// SAFETY: a pool handle may be used from any thread; the driver's pool calls are
// thread-safe, and the guard it keeps is only used to make its context current for them.
unsafe impl Send for MemoryPool<'_> {}
// SAFETY: as above; every method takes `&self` and is a thread-safe driver call.
unsafe impl Sync for MemoryPool<'_> {}

const REUSE_FOLLOW_EVENT_DEPENDENCIES: i32 = 1;
const REUSE_ALLOW_OPPORTUNISTIC: i32 = 2;
const REUSE_ALLOW_INTERNAL_DEPENDENCIES: i32 = 3;
const RELEASE_THRESHOLD: i32 = 4;
const RESERVED_MEM_CURRENT: i32 = 5;
const RESERVED_MEM_HIGH: i32 = 6;
const USED_MEM_CURRENT: i32 = 7;
const USED_MEM_HIGH: i32 = 8;

impl<'ctx> MemoryPool<'ctx> {
    /// A new pool on the context's device, with the driver's defaults (release threshold
    /// 0: freed memory goes back to the driver at the next synchronization). Destroyed when
    /// dropped.
    pub fn new<P: Allocating, S: Part>(ctx: ContextGuard<'ctx, P, S>) -> Result<Self> {
        Self::with_max_size(ctx, 0)
    }

    /// A new pool that never holds more than `max_bytes` (allocations beyond it fail with
    /// `CUDA_ERROR_OUT_OF_MEMORY`): a bounded arena. Drivers older than CUDA 12.2 ignore
    /// the bound.
    pub fn with_max_size<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        max_bytes: usize,
    ) -> Result<Self> {
        let raw = ctx.with_current(|| {
            let device = driver::ctx_get_device()?;
            driver::mem_pool_create(device, max_bytes)
        })?;
        let raw = driver::non_null("cuMemPoolCreate", raw)?.as_ptr();
        Ok(MemoryPool {
            raw,
            origin: Origin::Own,
            ctx: ctx.unphased(),
            _brand: PhantomData,
        })
    }

    /// The crate's pool of the context's device, the one buffers and scope allocations come
    /// from by default (see the [module documentation](crate::memory::pool)), created on first use
    /// (hence a guard that may create). An error with `CUDA_ERROR_NOT_SUPPORTED` on a
    /// device without memory pools.
    pub fn of_device<P: Allocating, S: Part>(ctx: ContextGuard<'ctx, P, S>) -> Result<Self> {
        let device = ctx.with_current(driver::ctx_get_device)?;
        match crate_pool(device)? {
            Some(raw) => Ok(MemoryPool {
                raw,
                origin: Origin::Crate,
                ctx: ctx.unphased(),
                _brand: PhantomData,
            }),
            None => Err(no_pools()),
        }
    }

    /// The device's default pool (`cuDeviceGetDefaultMemPool`), which the runtime API and
    /// other libraries of the process allocate from too. A buffer made from it waits for the
    /// context's legacy stream (see [`DeviceBuffer::uninitialized_in`](crate::DeviceBuffer::uninitialized_in)).
    pub fn device_default<P: Allocating, S: Part>(ctx: ContextGuard<'ctx, P, S>) -> Result<Self> {
        let device = ctx.with_current(driver::ctx_get_device)?;
        let raw = driver::device_default_mem_pool(device)?;
        let raw = driver::non_null("cuDeviceGetDefaultMemPool", raw)?.as_ptr();
        Ok(MemoryPool {
            raw,
            origin: Origin::DeviceDefault,
            ctx: ctx.unphased(),
            _brand: PhantomData,
        })
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUmemoryPool {
        self.raw
    }

    /// Whether other libraries allocate from it too (the device's default pool).
    #[inline]
    pub(crate) fn is_shared(&self) -> bool {
        self.origin == Origin::DeviceDefault
    }

    /// The driver's handle (`CUmemoryPool`), for calls this crate does not wrap.
    ///
    /// Nothing is waited for: the handle reaches no memory of the crate's. A block of a
    /// buffer the crate freed goes back to the pool with a free queued after the buffer's
    /// pending synchronous operations, and the pool hands the block out again only after
    /// that free (as it orders every reuse), so an allocation through the handle finds
    /// them done.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: the pool is not
    /// destroyed (`cuMemPoolDestroy`); the handle is not used after this `MemoryPool` is
    /// dropped; the access of devices to it (`cuMemPoolSetAccess`) is not taken away from
    /// a device this crate uses it on; and memory allocated from it through the handle is
    /// the caller's to free, never memory a buffer of this crate owns.
    #[inline]
    pub unsafe fn as_raw(&self) -> CUmemoryPool {
        self.raw()
    }

    fn get(&self, attribute: i32) -> Result<u64> {
        // SAFETY: the pool is alive (owned, or the crate's or the device's, which live as
        // long as the process).
        unsafe { driver::mem_pool_get(self.raw, attribute) }
    }

    fn set(&self, attribute: i32, value: u64) -> Result<()> {
        // SAFETY: as in `get`; the attribute's width is right for each caller.
        unsafe { driver::mem_pool_set(self.raw, attribute, value) }
    }

    /// How much freed memory the pool keeps reserved across synchronizations before it
    /// returns the rest to the driver (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`).
    pub fn release_threshold(&self) -> Result<u64> {
        self.get(RELEASE_THRESHOLD)
    }

    /// Sets the release threshold (`u64::MAX`: keep everything).
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.set(RELEASE_THRESHOLD, bytes)
    }

    /// The pool's reuse policy.
    pub fn reuse_policy(&self) -> Result<ReusePolicy> {
        Ok(ReusePolicy {
            follow_event_dependencies: self.get(REUSE_FOLLOW_EVENT_DEPENDENCIES)? != 0,
            allow_opportunistic: self.get(REUSE_ALLOW_OPPORTUNISTIC)? != 0,
            allow_internal_dependencies: self.get(REUSE_ALLOW_INTERNAL_DEPENDENCIES)? != 0,
        })
    }

    /// Sets the pool's reuse policy.
    pub fn set_reuse_policy(&self, policy: ReusePolicy) -> Result<()> {
        self.set(
            REUSE_FOLLOW_EVENT_DEPENDENCIES,
            policy.follow_event_dependencies as u64,
        )?;
        self.set(REUSE_ALLOW_OPPORTUNISTIC, policy.allow_opportunistic as u64)?;
        self.set(
            REUSE_ALLOW_INTERNAL_DEPENDENCIES,
            policy.allow_internal_dependencies as u64,
        )
    }

    /// Returns reserved memory that no allocation uses to the driver, keeping at least
    /// `keep_bytes` reserved (`cuMemPoolTrimTo`).
    pub fn trim_to(&self, keep_bytes: usize) -> Result<()> {
        // SAFETY: as in `get`.
        unsafe { driver::mem_pool_trim(self.raw, keep_bytes) }
    }

    /// Memory the pool has reserved from the driver, in bytes.
    pub fn reserved_bytes(&self) -> Result<u64> {
        self.get(RESERVED_MEM_CURRENT)
    }

    /// Memory of the pool that allocations use, in bytes.
    pub fn used_bytes(&self) -> Result<u64> {
        self.get(USED_MEM_CURRENT)
    }

    /// The most memory the pool has had reserved since creation or the last
    /// [`reset_high_watermarks`](Self::reset_high_watermarks).
    pub fn reserved_high_watermark(&self) -> Result<u64> {
        self.get(RESERVED_MEM_HIGH)
    }

    /// The most memory allocations have used at once since creation or the last reset.
    pub fn used_high_watermark(&self) -> Result<u64> {
        self.get(USED_MEM_HIGH)
    }

    /// Resets both high watermarks to the current values.
    pub fn reset_high_watermarks(&self) -> Result<()> {
        self.set(RESERVED_MEM_HIGH, 0)?;
        self.set(USED_MEM_HIGH, 0)
    }
}

impl MemoryPool<'_> {
    /// Destroys the pool (if this handle owns it: a pool of
    /// [`MemoryPool::of_device`] is the crate's and stays) and returns the driver's error,
    /// where dropping it would only record the error for the teardown of its context to
    /// report.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::MemoryPool;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let pool = MemoryPool::new(ctx)?;
    ///     pool.close()
    /// })
    /// # }
    /// ```
    pub fn close(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        this.release()
    }

    /// What `drop` and `close` run.
    fn release(&self) -> Result<()> {
        if self.origin != Origin::Own {
            return Ok(());
        }
        // SAFETY: an owned pool, never used again by this handle (dropped, or forgotten by
        // `close`); allocations from it that are still out keep it alive in the driver until
        // they are freed.
        unsafe { driver::mem_pool_destroy(self.raw) }
    }
}

impl Drop for MemoryPool<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            // its teardown reports this
            let ctx = Some(self.ctx.as_non_null());
            crate::context::teardown::record_failed_release(ctx, "MemoryPool", e);
        }
    }
}

impl fmt::Debug for MemoryPool<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryPool")
            .field("raw", &self.raw)
            .field("owned", &(self.origin == Origin::Own))
            .finish()
    }
}

/// `e`, from allocating `bytes` from a pool; an out-of-memory error says which request
/// the pool (bounded by [`MemoryPool::with_max_size`], or by the device) could not serve.
#[cold]
pub(crate) fn exhausted(e: Error, bytes: usize) -> Error {
    if e.code() != ErrorCode::OutOfMemory {
        return e;
    }
    Error::with_detail(
        e.call(),
        e.code(),
        format!(
            "the pool has no room for {bytes} bytes: it is exhausted (its maximum size, or the device's memory, is reached)"
        ),
    )
}

#[cold]
fn no_pools() -> Error {
    Error::with_detail(
        "MemoryPool::of_device",
        ErrorCode::NotSupported,
        "this device has no memory pools (MEMORY_POOLS_SUPPORTED is 0), or CUDA_BRAND_NO_MEMORY_POOLS=1 switched them off",
    )
}

/// Whether stream-ordered allocation is switched off by `CUDA_BRAND_NO_MEMORY_POOLS=1`
/// (read once): buffers and scopes then allocate as on a device without memory pools, with
/// `cuMemAlloc`. For testing that path on devices that have pools.
#[inline]
pub(crate) fn pools_disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED
        .get_or_init(|| std::env::var_os("CUDA_BRAND_NO_MEMORY_POOLS").is_some_and(|v| v == "1"))
}

/// Devices the crate keeps a pool for (device handles are ordinals on every platform the
/// driver supports; a handle beyond this falls back to `cuMemAlloc`).
const MAX_DEVICES: usize = 64;

/// The crate's pool of `device`, created on first use (release threshold unlimited), or
/// `None` where the device has no memory pools or they are switched off.
#[inline]
pub(crate) fn crate_pool(device: CUdevice) -> Result<Option<CUmemoryPool>> {
    static POOLS: [OnceLock<Option<usize>>; MAX_DEVICES] = [const { OnceLock::new() }; MAX_DEVICES];
    if pools_disabled() {
        return Ok(None);
    }
    let Some(slot) = usize::try_from(device).ok().and_then(|d| POOLS.get(d)) else {
        return Ok(None);
    };
    if let Some(pool) = slot.get() {
        return Ok(pool.map(|p| p as CUmemoryPool));
    }
    const MEMORY_POOLS_SUPPORTED: i32 = 115;
    let pool = match driver::device_attribute(device, MEMORY_POOLS_SUPPORTED)? {
        0 => None,
        _ => {
            let pool = driver::mem_pool_create(device, 0)?;
            // SAFETY: just created; an `u64` attribute.
            unsafe { driver::mem_pool_set(pool, RELEASE_THRESHOLD, u64::MAX) }?;
            Some(pool as usize)
        }
    };
    // Two threads racing here may both create a pool: the loser's stays unused (and is
    // destroyed); the winner's is every thread's from now on.
    let winner = *slot.get_or_init(|| pool);
    if let (Some(ours), Some(theirs)) = (pool, winner) {
        if ours != theirs {
            // SAFETY: our pool, never handed out.
            let _ = unsafe { driver::mem_pool_destroy(ours as CUmemoryPool) };
        }
    }
    Ok(winner.map(|p| p as CUmemoryPool))
}
