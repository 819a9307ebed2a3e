//! [`DeviceBuffer`], owned device memory: allocation (from the crate's pool, a program's
//! pool or `cuMemAlloc`), freeing, and the guard's constructors for it.

use std::fmt;
use std::marker::PhantomData;
use std::mem;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

#[cfg(doc)]
use super::PinnedBuffer;
use super::extent::{byte_len, checked_byte_len, empty_address};
use super::{DeviceCopy, DeviceSlice, MemoryPool, adopt, staging};
use crate::context::{self, Allocating, Brand, ContextGuard, Part, Phase};
use crate::driver::{self, CUdeviceptr, Pattern};
use crate::error::Result;
use crate::span::{Span, Touched};
use crate::synchronous::{self, Access, Completion};

/// Frees memory that `cuMemAlloc` (or `cuMemAllocPitch`, `cuMemAllocManaged`) gave a
/// buffer, from `drop` or `close`: with its context `ctx` current, whatever the calling
/// thread has current. An error leaves the memory allocated, to be reclaimed with the
/// context.
///
/// # Safety
/// `ptr` is such an allocation of `ctx`, owned by the buffer being dropped or closed, and no
/// queued work uses it (asynchronous work runs only in a scope that borrows the buffer
/// until its streams are idle); `ctx` is alive (the buffer's brand).
pub(crate) unsafe fn free_plain(
    ctx: std::ptr::NonNull<cuda_driver_sys::CUctx_st>,
    ptr: CUdeviceptr,
) -> Result<()> {
    let free = || {
        // `cuMemFree` is not documented to wait for work of other streams on the memory:
        // synchronous writes still pending are waited for first (`docs/design/ordering.md`)
        crate::synchronous::wait_on_host()?;
        // SAFETY: the caller gives up `ptr`.
        unsafe { driver::mem_free(ptr) }
    };
    // SAFETY: the caller guarantees the context.
    unsafe { context::in_context(ctx, free) }
}

/// Frees the memory of a device buffer made in `ctx`, `bytes` long: `cuMemFree` for
/// `plain` memory ([`free_plain`]), else `cuMemFreeAsync` on the legacy stream, with `ctx`
/// current. The latter is queued, not waited for: it returns while the legacy stream waits
/// for a `StreamFlags::Default` stream (one whose host function runs, say), and so does the
/// wait for the memory's pending synchronous accesses queued before it, which goes through
/// the thread's sync stream with the book's lock released (`crate::synchronous`).
///
/// # Safety
/// `ptr` is such an allocation of the live context `ctx`, given up by its owner, and no
/// queued work uses it.
unsafe fn free_buffer_memory(
    ctx: NonNull<cuda_driver_sys::CUctx_st>,
    ptr: CUdeviceptr,
    bytes: usize,
    plain: bool,
) -> Result<()> {
    if plain {
        // SAFETY: the caller's promise, memory from `cuMemAlloc`.
        return unsafe { free_plain(ctx, ptr) };
    }
    let free = || {
        // the free runs on `ctx`'s legacy stream, which is ordered here after the pending
        // synchronous accesses of the memory (of every sync stream, of any context: a
        // slice of pool memory may be written while another context is current); a later
        // user of the block waits for them too (it touches the same addresses)
        let freed = [Span {
            start: ptr,
            bytes: bytes as u64,
            write: true,
        }];
        crate::synchronous::before_legacy_op(Touched::Spans(&freed), true)?;
        // SAFETY: the caller gives up `ptr`, pool memory with no work pending on it.
        unsafe { driver::mem_free_async(ptr, std::ptr::null_mut()) }
    };
    // SAFETY: the caller guarantees the context.
    unsafe { context::in_context(ctx, free) }
}

/// Owned device memory of the context branded `'ctx`: the `Vec<T>` of [`DeviceSlice`].
///
/// It comes from a memory pool, stream-ordered (`cuMemAllocFromPoolAsync`, by default from
/// the crate's pool of the device, see [`pool`](crate::memory::pool)), and goes back to it when
/// dropped (`cuMemFreeAsync`): about a microsecond for both. On a device without memory
/// pools it comes from `cuMemAlloc` and goes back with `cuMemFree`. Three words: the
/// device pointer, the length, and the context it belongs to (pool memory is tied to no
/// context, so the buffer remembers which one frees it; the brand itself adds nothing).
///
/// A buffer cannot outlive its context, cannot be used with another context's streams or
/// buffers, and cannot be dropped while a stream scope still uses it: each is a compile
/// error (see `ui-tests/fail/`).
///
/// Zero-length buffers allocate nothing.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let a = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?; // or ctx.from_slice(..)
///     let mut b = DeviceBuffer::<u32>::zeroed(ctx, 3)?; // or ctx.zeroed(3)
///     b.copy_from_device(&a)?;
///     assert_eq!(b.to_vec()?, [1, 2, 3]);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: buffers of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
///
/// /// Takes two buffers of one context.
/// fn one_context<'ctx>(_: &DeviceBuffer<'ctx, u32>, _: &DeviceBuffer<'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = a.zeroed::<u32>(4)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = b.zeroed::<u32>(4)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
///
/// # Bulk copies to and from pageable memory
///
/// The driver copies between the device and pageable host memory (a `Vec`, any slice it
/// has not page-locked) itself, on one thread. Measured on an H100 (driver 580): 1.0–1.4
/// GB/s into a new `Vec` (what a plain `to_vec` gets), 9–14 GB/s into a reused one, 6–8
/// GB/s from a `Vec`, while the copy engine moves 55 GB/s from and into page-locked
/// memory. So the crate stages large synchronous copies through page-locked memory it
/// keeps per context:
///
/// * [`to_vec`](DeviceSlice::to_vec) and [`copy_to_host`](DeviceSlice::copy_to_host) from
///   1 MiB, [`from_slice`](DeviceBuffer::from_slice),
///   [`from_slice_in`](DeviceBuffer::from_slice_in) and
///   [`copy_from_host`](DeviceSlice::copy_from_host) from 512 KiB (below that, handing
///   chunks to the copy threads costs more than staging saves: `BENCHMARKS.md`, "Bulk
///   copies");
/// * the calling thread queues the DMA of each chunk (up to 2 MiB; an upload's filled
///   chunks that follow each other in the staging as one DMA of up to 8 MiB) between the
///   device and the staging on its sync stream, where its other synchronous operations run
///   (the legacy stream where they do), an event after each, while up to 8 threads
///   that the staging keeps (one fewer than the cores) copy each chunk between its slot
///   and the host memory in pieces of 256 KiB: the copy engine and the threads work at
///   once, and the driver never handles the pageable memory (an upload of up to 16 MiB is
///   written into the staging with streaming stores, which the copy engine reads sooner);
/// * a new `Vec` of 4 MiB or more is advised to the kernel as huge-page memory
///   (`madvise(MADV_HUGEPAGE)`, on Linux), so that its first touch maps 2 MiB at a time.
///
/// Nothing else changes: the copies are synchronous, complete when they return, on the
/// current context's legacy stream as before. Smaller copies, and host memory the driver
/// already knows (a [`PinnedBuffer`]'s contents), go straight to the driver.
///
/// **What the crate keeps.** Per context, a staging of 32 MiB of host memory, page-locked
/// for that context (`cuMemHostRegister`), and up to 8 threads (asleep between copies,
/// after spinning up to 100 µs; a thread exits after 2 s without a copy and the next copy
/// starts it again), made at the context's first staged copy; a second staging
/// only while two threads copy at once (so at most 64 MiB and 16 threads per context; a
/// third copy waits for one to be free). The stagings are unregistered and freed, and
/// their threads ended, at the end of [`with_context`](crate::with_context) (before the
/// context is destroyed) and at the end of every
/// [`with_raw_context`](crate::with_raw_context) and
/// [`with_primary_context`](crate::with_primary_context) (before the release: the crate
/// cannot tell which release destroys the primary context). A copy of a buffer's memory
/// (the crate's pool ties it to no context) runs in the current context; where another
/// library made a context current that no scope of the crate holds, the crate keeps
/// nothing for it and the copy takes the driver's path. If memory cannot be page-locked,
/// the copies take the driver's path.
/// Measurements: `BENCHMARKS.md`, "Bulk copies".
pub struct DeviceBuffer<'ctx, T: DeviceCopy> {
    ptr: CUdeviceptr,
    len: usize,
    owner: Owner,
    /// Invariant in `'ctx` (the crate's `Brand`), like the [`DeviceSlice`] it dereferences
    /// to. Were it covariant, two owned buffers of two contexts could be shortened to one
    /// brand (`let mut dst: DeviceBuffer<'x, T> = of_a;`), and
    /// `dst.copy_from_device(&of_b)` would copy between contexts.
    _brand: Brand<'ctx>,
    _elem: PhantomData<T>,
}

/// Who frees a buffer, and how: its context's address, with the low bit set for memory
/// from `cuMemAlloc` (freed with `cuMemFree`) and clear for pool memory (freed with
/// `cuMemFreeAsync` on the context's legacy stream), and the next bit set for a buffer of a
/// setup phase, which its context's teardown frees (see [`crate::phase`]). Contexts are
/// driver objects aligned to at least 8 bytes, so the two bits are free.
#[derive(Clone, Copy)]
struct Owner(usize);

impl Owner {
    const PLAIN: usize = 1;
    const DEFERRED: usize = 2;

    fn new(ctx: ContextGuard<'_>, plain: bool, deferred: bool) -> Self {
        Owner(
            ctx.as_non_null().as_ptr() as usize
                | plain as usize
                | if deferred { Self::DEFERRED } else { 0 },
        )
    }

    fn is_deferred(self) -> bool {
        self.0 & Self::DEFERRED != 0
    }

    fn context(self) -> std::ptr::NonNull<cuda_driver_sys::CUctx_st> {
        let raw = (self.0 & !(Self::PLAIN | Self::DEFERRED)) as *mut cuda_driver_sys::CUctx_st;
        // A guard's context is never null, so neither is this.
        std::ptr::NonNull::new(raw).unwrap_or(std::ptr::NonNull::dangling())
    }

    fn is_plain(self) -> bool {
        self.0 & Self::PLAIN != 0
    }
}

// SAFETY: the buffer owns device memory, which any thread may access through the driver
// (synchronous operations run in the memory's own context, or its device's, whatever is
// current), its drop makes its own context current, and `T: DeviceCopy` owns nothing on
// the host.
unsafe impl<T: DeviceCopy> Send for DeviceBuffer<'_, T> {}
// SAFETY: `&DeviceBuffer` only allows reading the device memory, which is safe from any
// number of threads.
unsafe impl<T: DeviceCopy> Sync for DeviceBuffer<'_, T> {}

/// Allocates `bytes` in the context of `ctx` from `pool` (`None`: the crate's pool of the
/// context's device, or `cuMemAlloc` where the device has no pools). Returns the pointer
/// and whether it came from `cuMemAlloc`.
fn allocate(
    ctx: ContextGuard<'_>,
    pool: Option<driver::CUmemoryPool>,
    bytes: usize,
) -> Result<(CUdeviceptr, bool)> {
    ctx.with_current(|| {
        let pool = match pool {
            Some(pool) => Some(pool),
            None => super::pool::crate_pool(driver::ctx_get_device()?)?,
        };
        match pool {
            // SAFETY: a live pool of the context's device; the legacy stream of the current
            // context (null) orders the allocation. No block of a pool the crate
            // allocates from has work pending on it that a later user is not ordered after
            // (see the `pool` module: a free may still wait on the legacy stream for a
            // synchronous write, which every user of the memory waits for too), so the
            // memory is valid for every stream as soon as the call returns.
            Some(pool) => Ok((
                unsafe { driver::mem_alloc_from_pool_async(bytes, pool, std::ptr::null_mut()) }?,
                false,
            )),
            None => Ok((driver::mem_alloc(bytes)?, true)),
        }
    })
}

impl<'ctx, T: DeviceCopy> DeviceBuffer<'ctx, T> {
    /// Allocates `len` elements without initialising them, from the crate's pool of the
    /// device (see [`pool`](crate::memory::pool)).
    ///
    /// # Safety
    /// The contents are whatever the memory held. Reading them before writing is not
    /// undefined behaviour for `DeviceCopy` types (every bit pattern is valid), but it is
    /// a read of stale data, possibly another allocation's: hence `unsafe`.
    pub unsafe fn uninitialized<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        len: usize,
    ) -> Result<Self> {
        Self::allocate_in_phase(ctx, None, len)
    }

    /// As [`DeviceBuffer::uninitialized`], from `pool` (a pool of this context: the brand
    /// says so). The guard is the phase's: in the setup phase of
    /// [`with_phases`](crate::with_phases) the buffer is freed only by the teardown, like
    /// every setup buffer, and a run-phase guard does not compile here.
    ///
    /// From the device's default pool ([`MemoryPool::device_default`]), which other
    /// libraries allocate and free in stream order too, the call also waits for the
    /// context's legacy stream: the driver may hand out a block whose earlier owner's work
    /// is still queued, ordering only the allocating stream after it.
    ///
    /// # Safety
    /// As for [`DeviceBuffer::uninitialized`].
    pub unsafe fn uninitialized_in<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        pool: &MemoryPool<'ctx>,
        len: usize,
    ) -> Result<Self> {
        let buf = Self::allocate_in_phase(ctx, Some(pool.raw()), len)?;
        if pool.is_shared() && buf.size_in_bytes() != 0 {
            // The default pool reuses blocks with internal dependencies: a block another
            // library freed (`cuMemFreeAsync` on its stream) may come back with that stream's
            // work still queued, and the driver makes only the allocating stream, the legacy
            // one here, wait for it. The crate's later uses (the thread's sync stream, any
            // scope's) do not wait for the legacy stream, so the host waits for it now: then
            // the memory is valid for every stream. (On failure `buf` is dropped, freeing
            // the block in order on the legacy stream.)
            ctx.with_current(crate::synchronous::legacy_wait)?;
        }
        Ok(buf)
    }

    /// Allocates `len` elements from `pool` (`None`: the crate's pool) with a guard of
    /// phase `P`; memory of a setup phase goes on its teardown's list.
    fn allocate_in_phase<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        pool: Option<driver::CUmemoryPool>,
        len: usize,
    ) -> Result<Self> {
        let buf = Self::allocate(ctx.unphased(), pool, len, P::DEFERS_FREES)?;
        if P::DEFERS_FREES && buf.size_in_bytes() != 0 {
            // on failure the memory is freed there and `buf` (marked deferred) frees nothing
            let kind = match buf.owner.is_plain() {
                true => crate::context::deferred::FreeBy::Plain,
                false => crate::context::deferred::FreeBy::Pool,
            };
            crate::context::deferred::defer_free(
                buf.owner.context().as_ptr(),
                buf.ptr as usize,
                kind,
            )?;
        }
        Ok(buf)
    }

    fn allocate(
        ctx: ContextGuard<'ctx>,
        pool: Option<driver::CUmemoryPool>,
        len: usize,
        deferred: bool,
    ) -> Result<Self> {
        let bytes = checked_byte_len::<T>("DeviceBuffer::uninitialized", len)?;
        let (ptr, plain) = if bytes == 0 {
            (empty_address::<T>(), false)
        } else {
            allocate(ctx, pool, bytes)?
        };
        Ok(DeviceBuffer {
            ptr,
            len,
            owner: Owner::new(ctx, plain, deferred),
            _brand: PhantomData,
            _elem: PhantomData,
        })
    }

    /// Allocates `len` elements set to zero bytes; complete when it returns.
    pub fn zeroed<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        len: usize,
    ) -> Result<Self> {
        // SAFETY: every byte is written below before anyone can read it.
        let buf = unsafe { Self::uninitialized(ctx, len) }?;
        buf.zero()?;
        Ok(buf)
    }

    /// As [`DeviceBuffer::zeroed`], from `pool` (see [`DeviceBuffer::uninitialized_in`]).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::MemoryPool;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let pool = MemoryPool::with_max_size(ctx, 64 << 20)?;
    ///     let buf = DeviceBuffer::<f32>::zeroed_in(ctx, &pool, 1 << 20)?; // or ctx.zeroed_in(..)
    ///     assert!(pool.used_bytes()? >= 4 << 20);
    ///     drop(buf);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn zeroed_in<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        pool: &MemoryPool<'ctx>,
        len: usize,
    ) -> Result<Self> {
        // SAFETY: every byte is written below before anyone can read it.
        let buf = unsafe { Self::uninitialized_in(ctx, pool, len) }?;
        buf.zero()?;
        Ok(buf)
    }

    fn zero(&self) -> Result<()> {
        if self.size_in_bytes() == 0 {
            return Ok(());
        }
        let ctx = self.owner.context();
        let zero = || {
            // SAFETY: `ctx` is current (`in_context`) and alive (the brand); the buffer's
            // own bytes, just allocated, device memory ordered before every later user by
            // the sync stream's record.
            let op = |stream| {
                // SAFETY: the ranges as stated above, on the stream `run` gives.
                unsafe {
                    driver::memset_async(self.ptr, Pattern::D8(0), self.size_in_bytes(), stream)
                }
            };
            let spans = [self.span(true)];
            // SAFETY: as stated above; the buffer's own memory, all of it named.
            unsafe {
                synchronous::run(
                    Some(ctx),
                    Completion::Record,
                    Access::Device,
                    Touched::Spans(&spans),
                    op,
                )
            }
        };
        // SAFETY: the brand keeps the buffer's context alive.
        unsafe { context::in_context(ctx, zero) }
    }

    /// Allocates a buffer holding a copy of `src`; complete when it returns. From 512 KiB,
    /// pageable memory is staged: see
    /// [the type's documentation](DeviceBuffer#bulk-copies-to-and-from-pageable-memory).
    pub fn from_slice<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        src: &[T],
    ) -> Result<Self> {
        // SAFETY: every element is written by the copy below before anyone can read it.
        let buf = unsafe { Self::uninitialized(ctx, src.len()) }?;
        buf.fill_from(src)?;
        Ok(buf)
    }

    /// As [`DeviceBuffer::from_slice`], from `pool` (see
    /// [`DeviceBuffer::uninitialized_in`]).
    pub fn from_slice_in<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        pool: &MemoryPool<'ctx>,
        src: &[T],
    ) -> Result<Self> {
        // SAFETY: every element is written by the copy below before anyone can read it.
        let buf = unsafe { Self::uninitialized_in(ctx, pool, src.len()) }?;
        buf.fill_from(src)?;
        Ok(buf)
    }

    fn fill_from(&self, src: &[T]) -> Result<()> {
        let bytes = byte_len::<T>(self.len);
        if bytes == 0 {
            return Ok(());
        }
        let ctx = self.owner.context();
        let written = Span {
            start: self.ptr,
            bytes: bytes as u64,
            write: true,
        };
        // SAFETY: `ctx` is current (`in_context` below) and alive (the brand); same
        // length; the buffer was just allocated, all of it named; `src` is a shared borrow.
        let copy = || unsafe {
            staging::upload(
                Some(ctx),
                Completion::Record,
                Touched::Spans(&[written]),
                self.ptr,
                src.as_ptr().cast(),
                bytes,
            )
        };
        // SAFETY: the brand keeps the buffer's context alive.
        unsafe { context::in_context(ctx, copy) }
    }

    /// The raw device pointer and length, without freeing: the buffer's memory leaves the
    /// crate, once the crate's pending synchronous operations on it are done (this call
    /// waits on the host for them first, as [`DeviceSlice::as_device_ptr`] does, so that
    /// the caller's work on any stream finds the memory written; where that wait cannot
    /// run or fails, the parts are returned all the same, as that method says).
    /// [`DeviceBuffer::from_raw_parts`] takes it back (in the same context, or for
    /// pool memory in any context of the device); otherwise free it yourself, with
    /// `cuMemFreeAsync` (`cudaFreeAsync`) where it is memory of a pool, as every buffer is
    /// on a device with pools, else `cuMemFree` (`cudaFree`), in the buffer's context.
    /// Memory of a pool is not reclaimed when the context is destroyed (the pool is the
    /// device's): left alone, it stays allocated until the process ends. A buffer of a
    /// setup phase is taken off its teardown's list. A buffer of zero bytes owns no memory:
    /// its address is a sentinel that is no allocation.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let buf = ctx.from_slice(&[1u32, 2, 3])?;
    ///     // SAFETY: the memory is handed straight back below, unused meanwhile.
    ///     let (ptr, len) = unsafe { buf.into_raw_parts() };
    ///     // ... another library uses `ptr` here, on streams it synchronizes ...
    ///     // SAFETY: `into_raw_parts` of this context gave `ptr` and `len`; nothing else
    ///     // frees the memory, and no work uses it any more.
    ///     let back = unsafe { DeviceBuffer::<u32>::from_raw_parts(ctx, ptr, len) }?;
    ///     assert_eq!(back.to_vec()?, [1, 2, 3]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// Leaking the memory is safe ([`mem::forget`] does it too); `unsafe` marks what the
    /// address allows behind the borrow checker's back. The caller takes the memory over
    /// and promises: it is freed at most once, after the last work using it has finished;
    /// and the address is used as [`DeviceSlice::as_device_ptr`] requires (not after the
    /// free; read while nothing writes it, written while nothing else uses it).
    pub unsafe fn into_raw_parts(self) -> (CUdeviceptr, usize) {
        if !self.is_empty() {
            crate::synchronous::before_raw_escape(Touched::Spans(&[self.span(true)]));
        }
        if self.owner.is_deferred() {
            crate::context::deferred::undefer(self.ptr as usize);
        }
        let parts = (self.ptr, self.len);
        mem::forget(self);
        parts
    }

    /// Adopts `len` elements of device memory at `ptr` that another library allocated in
    /// the context of `ctx` (`cuMemAlloc`, `cudaMalloc`, `cuMemAllocPitch`), or in a memory
    /// pool of its device (`cuMemAllocAsync`, `cudaMallocAsync`, `cuMemAllocFromPoolAsync`),
    /// or that [`into_raw_parts`](DeviceBuffer::into_raw_parts) gave: the buffer owns it
    /// from here on, and frees it when dropped or [closed](DeviceBuffer::close). The CUDA
    /// runtime (`cudaMalloc`, and the libraries built on it) allocates in the device's
    /// primary context: adopt its memory with a guard of
    /// [`with_primary_context`](crate::with_primary_context).
    ///
    /// **How it is freed** is the driver's to say, not the caller's: memory of a pool
    /// (`CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE` is set) goes back with `cuMemFreeAsync` on
    /// the context's legacy stream, straight into its pool and without waiting (as every
    /// pool buffer of the crate); other memory with `cuMemFree`. (The driver's reference
    /// lets `cuMemFree` free pool memory too, without synchronizing, but recommends
    /// `cuMemFreeAsync` for it; it documents `cuMemFreeAsync` for pool memory only. A
    /// choice left to the caller would be one more promise to get wrong.)
    ///
    /// **What the crate checks** before it accepts (an `Err` naming `ptr`, `len` or `ctx`
    /// otherwise, before anything is taken over):
    /// * that `len` elements of `T` do not overflow `usize`; with zero bytes nothing is
    ///   taken over and nothing else checked (the memory at `ptr`, if any, stays the
    ///   caller's; the buffer has the crate's sentinel address);
    /// * that `ptr` is not null, is aligned for `T`, and the range does not wrap;
    /// * through the driver (`cuPointerGetAttributes`, which makes no driver error of an
    ///   unknown address): that `ptr` is device memory the driver knows, neither managed
    ///   (a [`ManagedBuffer`](crate::ManagedBuffer)'s) nor page-locked host memory (a
    ///   [`PinnedBuffer`]'s); memory of no pool must be of `ctx`'s own context and start
    ///   at `ptr` (an allocation's start: a tensor of PyTorch's caching allocator is a
    ///   piece of a larger one, and is refused); pool memory must be of `ctx`'s device;
    ///   and `len` elements from `ptr` end inside the allocation the driver reports.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let buf = ctx.from_slice(&[1.5f32, 2.5])?;
    ///     // SAFETY: taken back below, unused meanwhile.
    ///     let (ptr, len) = unsafe { buf.into_raw_parts() };
    ///     // one element too many: refused, naming `len`, and nothing is taken over
    ///     // SAFETY: (refused before anything is adopted)
    ///     let too_long = unsafe { DeviceBuffer::<f32>::from_raw_parts(ctx, ptr, 1 << 30) };
    ///     assert!(too_long.unwrap_err().to_string().contains("`len`"));
    ///     // SAFETY: `into_raw_parts` of this context gave `ptr` and `len`; nothing else
    ///     // frees the memory, and no work uses it.
    ///     let buf = unsafe { DeviceBuffer::<f32>::from_raw_parts(ctx, ptr, len) }?;
    ///     assert_eq!(buf.to_vec()?, [1.5, 2.5]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// The crate cannot see who else holds the memory, nor work it did not queue itself.
    /// The caller gives the memory over and promises:
    /// * `ptr` is the address the allocation call returned, and `len` elements of `T` from
    ///   it lie in that allocation (the checks above refuse most violations, not every
    ///   one: memory mapped with `cuMemMap`, or opened with `cuIpcOpenMemHandle`, would
    ///   pass some of them, and is not memory that `cuMemFree` may free);
    /// * nothing else frees it, or uses it after this call but through the buffer (the
    ///   allocating library forgets it, as with `cudaFree` never called; a PyTorch tensor
    ///   is not adoptable: its allocator keeps the memory);
    /// * no work is queued on it any more, on any stream, the allocating stream of
    ///   stream-ordered memory included: each stream that allocated, wrote or read it has
    ///   been synchronized since (`cudaStreamSynchronize`). The buffer is then like every
    ///   buffer of the crate's pool (see [`pool`](crate::memory::pool)): valid for every
    ///   stream at once, and freed only after the last scope using it has ended.
    ///
    /// The rest the brand and the checks give: memory of no pool was allocated in `ctx`'s
    /// context and so lives as long as it, which outlives the buffer; memory of a pool
    /// outlives even its pool (`cuMemPoolDestroy` waits, by the driver's reference, for
    /// the pool's allocations to be freed).
    pub unsafe fn from_raw_parts(
        ctx: ContextGuard<'ctx>,
        ptr: CUdeviceptr,
        len: usize,
    ) -> Result<Self> {
        const CALL: &str = "DeviceBuffer::from_raw_parts";
        let Some(bytes) = adopt::check_parts::<T>(CALL, ptr, len)? else {
            return Ok(DeviceBuffer {
                ptr: empty_address::<T>(),
                len,
                owner: Owner::new(ctx, false, false),
                _brand: PhantomData,
                _elem: PhantomData,
            });
        };
        let release = ctx.with_current(|| adopt::check_device(CALL, ctx, ptr, len, bytes))?;
        Ok(DeviceBuffer {
            ptr,
            len,
            owner: Owner::new(ctx, release == adopt::Release::Free, false),
            _brand: PhantomData,
            _elem: PhantomData,
        })
    }
}

impl<'ctx, T: DeviceCopy> Deref for DeviceBuffer<'ctx, T> {
    type Target = DeviceSlice<'ctx, T>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        // SAFETY: the buffer owns `len` elements at `ptr` for as long as it is borrowed.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The buffer's elements, shared: what a function that reads device memory of either
/// kind takes as `impl Into<&DeviceSlice>` ([`copy_peer`](crate::copy_peer)'s source), so
/// that `&buffer` and `&buffer[range]` are accepted and `&mut buffer` is not.
impl<'a, 'ctx, T: DeviceCopy> From<&'a DeviceBuffer<'ctx, T>> for &'a DeviceSlice<'ctx, T> {
    #[inline]
    fn from(buffer: &'a DeviceBuffer<'ctx, T>) -> Self {
        buffer
    }
}

impl<T: DeviceCopy> DerefMut for DeviceBuffer<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        // SAFETY: as above, and the borrow is exclusive.
        unsafe { DeviceSlice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: DeviceCopy> DeviceBuffer<'_, T> {
    /// Whether the buffer is memory of a setup phase, which its context's teardown frees
    /// (the owning layer refuses to take such a buffer over).
    #[inline]
    pub(crate) fn of_setup_phase(&self) -> bool {
        self.owner.is_deferred()
    }

    /// Frees the buffer and returns the driver's error, where dropping it would only record
    /// the error for the teardown of its context to report (see
    /// [`with_context`](crate::with_context)). After an error the memory stays allocated
    /// until the driver reclaims it (with the context, or for pool memory with the process).
    /// Memory of the setup phase of [`with_phases`](crate::with_phases) is freed by its
    /// teardown instead: `close` frees nothing and returns `Ok`.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let buf = ctx.zeroed::<f32>(1024)?;
    ///     buf.close() // the free's error, here and now
    /// })
    /// # }
    /// ```
    pub fn close(self) -> Result<()> {
        let mut this = mem::ManuallyDrop::new(self);
        this.release()
    }

    /// What `drop` and `close` run: gives the memory back.
    fn release(&mut self) -> Result<()> {
        if self.len == 0 || self.size_in_bytes() == 0 {
            return Ok(());
        }
        let ptr = self.ptr;
        if self.owner.is_deferred() {
            // memory of a setup phase: its context's teardown frees it
            return Ok(());
        }
        let (ctx, bytes) = (self.owner.context(), self.size_in_bytes());
        let plain = self.owner.is_plain();
        let free = move |ctx| {
            // SAFETY: the buffer owns `ptr`, `bytes` long (from `cuMemAlloc` in its own context
            // where it is plain, else from a pool), and no queued work can still use it:
            // asynchronous work only runs inside a stream scope, which borrows the buffer until
            // its stream has finished, so a pool gets back a block with nothing pending on it.
            // The brand keeps the context alive (a release parked for a partition's thread runs
            // before the partition ends: `context::confined`); the buffer is not used again
            // (dropped, or forgotten by `close`).
            unsafe { free_buffer_memory(ctx, ptr, bytes, plain) }
        };
        context::confined::release_in(ctx, "DeviceBuffer", free).unwrap_or(Ok(()))
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<'_, T> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            // the memory stays allocated; the teardown of the context reports it
            crate::context::teardown::record_failed_release(
                Some(self.owner.context()),
                "DeviceBuffer",
                e,
            );
        }
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceBuffer<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>({:#x}, len {})",
            std::any::type_name::<T>(),
            self.ptr,
            self.len
        )
    }
}

// The bounds are on the methods, not on the impl: a run-phase guard then finds the method
// and fails the bound with `Allocating`'s own message (a bound on the impl would hide the
// method, and rustc would only say that the method's trait bounds were not satisfied).
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// `len` elements of device memory set to zero bytes:
    /// [`DeviceBuffer::zeroed`].
    pub fn zeroed<T: DeviceCopy>(self, len: usize) -> Result<DeviceBuffer<'ctx, T>>
    where
        P: Allocating,
    {
        DeviceBuffer::zeroed(self, len)
    }

    /// Device memory holding a copy of `src`:
    /// [`DeviceBuffer::from_slice`].
    pub fn from_slice<T: DeviceCopy>(self, src: &[T]) -> Result<DeviceBuffer<'ctx, T>>
    where
        P: Allocating,
    {
        DeviceBuffer::from_slice(self, src)
    }

    /// `len` elements of device memory from `pool`, set to zero bytes:
    /// [`DeviceBuffer::zeroed_in`].
    pub fn zeroed_in<T: DeviceCopy>(
        self,
        pool: &MemoryPool<'ctx>,
        len: usize,
    ) -> Result<DeviceBuffer<'ctx, T>>
    where
        P: Allocating,
    {
        DeviceBuffer::zeroed_in(self, pool, len)
    }

    /// Device memory from `pool` holding a copy of `src`:
    /// [`DeviceBuffer::from_slice_in`].
    pub fn from_slice_in<T: DeviceCopy>(
        self,
        pool: &MemoryPool<'ctx>,
        src: &[T],
    ) -> Result<DeviceBuffer<'ctx, T>>
    where
        P: Allocating,
    {
        DeviceBuffer::from_slice_in(self, pool, src)
    }
}
