//! [`PinnedBuffer`], page-locked host memory allocated by a context, and the guard's
//! constructors for it.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::mem;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::DeviceCopy;
use super::extent::checked_byte_len;
use crate::context::{self, Allocating, Brand, ContextGuard, Part, Phase};
use crate::driver;
use crate::error::{Error, Invalid, Result};

/// Page-locked ("pinned") host memory allocated by the context branded `'ctx`
/// (`cuMemHostAlloc`), the source and destination of truly asynchronous copies.
///
/// It dereferences to `[T]`, so the host reads and writes it like any slice. Asynchronous
/// copies from or to it only exist inside [`Stream::scope`](crate::Stream::scope), which
/// borrows the slice until the stream has finished the copy: the host can neither free nor
/// touch the memory while the GPU's copy engine is reading or writing it. (A pinned copy
/// returns in microseconds, long before the data has moved: `docs/c/async_host_memory.out`.)
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let mut host = ctx.pinned_zeroed::<u32>(1 << 20)?; // or PinnedBuffer::zeroed
///     host.fill(3); // a plain &mut [u32] on the host
///     let mut dev = ctx.zeroed::<u32>(1 << 20)?;
///     ctx.new_stream()?.scope(|s| s.copy_from_host(&mut dev, &host))?; // truly asynchronous
///     assert_eq!(dev.to_vec()?[17], 3);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: pinned buffers of two contexts never have one type, and
/// a function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
///
/// /// Takes two pinned buffers of one context.
/// fn one_context<'ctx>(_: &PinnedBuffer<'ctx, u32>, _: &PinnedBuffer<'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = a.pinned_zeroed::<u32>(4)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = b.pinned_zeroed::<u32>(4)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct PinnedBuffer<'ctx, T: DeviceCopy> {
    ptr: NonNull<T>,
    len: usize,
    ctx: NonNull<cuda_driver_sys::CUctx_st>,
    /// Invariant in `'ctx` (the crate's `Brand`), like every brand, though no operation
    /// takes a pinned buffer of a given context (it dereferences to a plain `[T]`): here
    /// the brand's work is its lifetime, which keeps the buffer inside the closure of the
    /// context that frees it. A covariant brand would still do that (it can only be
    /// shortened), but it would let pinned buffers of two contexts pass for one context's,
    /// which a later operation pairing a pinned buffer with a stream of its context could
    /// not rely on.
    _brand: Brand<'ctx>,
}

// SAFETY: page-locked memory is ordinary host memory to every thread; freeing it pushes
// the owning context explicitly, so the dropping thread needs no current context.
unsafe impl<T: DeviceCopy + Send> Send for PinnedBuffer<'_, T> {}
// SAFETY: `&PinnedBuffer` only gives `&[T]`.
unsafe impl<T: DeviceCopy + Sync> Sync for PinnedBuffer<'_, T> {}

impl<'ctx, T: DeviceCopy> PinnedBuffer<'ctx, T> {
    /// Allocates `len` elements of page-locked host memory set to zero bytes.
    pub fn zeroed<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        len: usize,
    ) -> Result<Self> {
        let bytes = checked_byte_len::<T>("PinnedBuffer::zeroed", len)?;
        let ptr = if bytes == 0 {
            NonNull::dangling()
        } else {
            let p = ctx.with_current(|| driver::mem_host_alloc(bytes, 0))?;
            let p = driver::non_null("cuMemHostAlloc", p.cast::<T>())?;
            if p.as_ptr() as usize % std::mem::align_of::<T>() != 0 {
                // SAFETY: just allocated by cuMemHostAlloc in `ctx`, not used.
                let freed =
                    ctx.with_current(|| unsafe { driver::mem_free_host(p.as_ptr().cast()) });
                let refused = Error::invalid_input(
                    "PinnedBuffer::zeroed",
                    Invalid::Misaligned {
                        what: "the driver's page-locked memory",
                        value: p.as_ptr() as u64,
                        align: std::mem::align_of::<T>(),
                    },
                );
                // the free's error, if any, comes along
                return Err(match freed {
                    Ok(()) => refused,
                    Err(e) => refused.with_teardown_error(e),
                });
            }
            // SAFETY: the driver allocated `bytes` bytes at `p`, aligned for `T` (checked).
            unsafe { std::ptr::write_bytes(p.as_ptr().cast::<u8>(), 0, bytes) };
            p
        };
        let deferred = P::DEFERS_FREES && bytes != 0;
        if deferred {
            // on failure the memory is freed there
            crate::context::deferred::defer_free(
                ctx.as_non_null().as_ptr(),
                ptr.as_ptr() as usize,
                crate::context::deferred::FreeBy::Pinned,
            )?;
        }
        // a context is aligned to at least 8 bytes: the low bit marks memory of a setup phase
        let tagged = ctx
            .as_non_null()
            .as_ptr()
            .wrapping_byte_add(deferred as usize);
        Ok(PinnedBuffer {
            ptr,
            len,
            ctx: NonNull::new(tagged).unwrap_or(ctx.as_non_null()),
            _brand: PhantomData,
        })
    }

    /// Allocates page-locked memory holding a copy of `src`.
    pub fn from_slice<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        src: &[T],
    ) -> Result<Self> {
        let mut buf = Self::zeroed(ctx, src.len())?;
        buf.copy_from_slice(src);
        Ok(buf)
    }

    /// Adopts `len` elements of page-locked host memory at `ptr` that another library
    /// allocated in the context of `ctx` (`cuMemHostAlloc`, `cuMemAllocHost`,
    /// `cudaHostAlloc`, `cudaMallocHost`), or that
    /// [`into_raw_parts`](PinnedBuffer::into_raw_parts) gave: the buffer owns it from here
    /// on, and frees it with `cuMemFreeHost` when dropped or
    /// [closed](PinnedBuffer::close). The CUDA runtime allocates in the device's primary
    /// context: adopt its memory with a guard of
    /// [`with_primary_context`](crate::with_primary_context).
    ///
    /// **What the crate checks** before it accepts (an `Err` naming `ptr`, `len` or `ctx`
    /// otherwise, before anything is taken over):
    /// * that `len` elements of `T` do not overflow `usize`; with zero bytes nothing is
    ///   taken over and nothing else checked (the memory at `ptr`, if any, stays the
    ///   caller's);
    /// * that `ptr` is not null, is aligned for `T`, and the range does not wrap;
    /// * through the driver: that the first and the last byte are page-locked host memory
    ///   (not managed, not device memory) allocated in `ctx`'s own context
    ///   (`cuPointerGetAttributes`, which makes no driver error of an unknown address).
    ///   The driver does not tell memory that `cuMemHostAlloc` allocated from memory that
    ///   `cuMemHostRegister` page-locked (`cuMemHostGetFlags` accepts both, measured on an
    ///   H100 with driver 580): that the memory was allocated, not registered, is the
    ///   caller's promise below.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let host = ctx.pinned_from_slice(&[7u16, 8, 9])?;
    ///     // SAFETY: taken back below, unused meanwhile.
    ///     let (ptr, len) = unsafe { host.into_raw_parts() };
    ///     // SAFETY: `into_raw_parts` of this context gave `ptr` and `len`: initialised,
    ///     // freed by nothing else, used by no copy.
    ///     let back = unsafe { PinnedBuffer::<u16>::from_raw_parts(ctx, ptr, len) }?;
    ///     assert_eq!(&back[..], [7, 8, 9]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// The buffer lends `&mut [T]` of the memory to safe code, and frees it. The caller
    /// gives the memory over and promises:
    /// * `ptr` is the address an allocation call (`cuMemHostAlloc`, `cuMemAllocHost`,
    ///   `cudaMallocHost`, `cudaHostAlloc`) returned, not memory page-locked with
    ///   `cuMemHostRegister` (`cuMemFreeHost` frees only the former, only at that
    ///   address), and `len` elements of `T` from it lie in that allocation;
    /// * the `len` elements are initialised (written by the host, a copy or a kernel; as
    ///   for [`std::slice::from_raw_parts`], every bit pattern of a `DeviceCopy` type is a
    ///   value, but bytes never written are none);
    /// * nothing else frees it, reads it or writes it after this call but through the
    ///   buffer, and no copy or kernel queued before it still does (each stream that used
    ///   it has been synchronized since).
    ///
    /// The brand gives the rest: the memory was allocated in `ctx`'s context (checked), so
    /// it lives as long as the context, which outlives the buffer.
    pub unsafe fn from_raw_parts(ctx: ContextGuard<'ctx>, ptr: *mut T, len: usize) -> Result<Self> {
        const CALL: &str = "PinnedBuffer::from_raw_parts";
        let raw = ptr as usize as u64;
        let ptr = match super::adopt::check_parts::<T>(CALL, raw, len)? {
            None => NonNull::dangling(),
            Some(bytes) => {
                ctx.with_current(|| super::adopt::check_pinned(CALL, ctx, raw, len, bytes))?;
                // not null: checked
                NonNull::new(ptr).unwrap_or(NonNull::dangling())
            }
        };
        Ok(PinnedBuffer {
            ptr,
            len,
            ctx: ctx.as_non_null(),
            _brand: PhantomData,
        })
    }
}

// The bounds are on the methods, not on the impl: a run-phase guard then finds the method
// and fails the bound with `Allocating`'s own message (a bound on the impl would hide the
// method, and rustc would only say that the method's trait bounds were not satisfied).
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// `len` elements of page-locked host memory set to zero bytes:
    /// [`PinnedBuffer::zeroed`].
    pub fn pinned_zeroed<T: DeviceCopy>(self, len: usize) -> Result<PinnedBuffer<'ctx, T>>
    where
        P: Allocating,
    {
        PinnedBuffer::zeroed(self, len)
    }

    /// Page-locked host memory holding a copy of `src`:
    /// [`PinnedBuffer::from_slice`].
    pub fn pinned_from_slice<T: DeviceCopy>(self, src: &[T]) -> Result<PinnedBuffer<'ctx, T>>
    where
        P: Allocating,
    {
        PinnedBuffer::from_slice(self, src)
    }
}

impl<T: DeviceCopy> Deref for PinnedBuffer<'_, T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements at `ptr`, owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceCopy> DerefMut for PinnedBuffer<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: DeviceCopy> PinnedBuffer<'_, T> {
    /// Whether the buffer is memory of a setup phase, which its context's teardown frees
    /// (the owning layer refuses to take such a buffer over).
    #[inline]
    pub(crate) fn of_setup_phase(&self) -> bool {
        self.ctx.as_ptr() as usize & 1 != 0
    }

    /// The memory's address and length, without freeing: it leaves the crate. Nothing of
    /// the crate's is pending on it, so nothing is waited for: a synchronous copy to or
    /// from host memory is complete when it returns, and a scope's or graph's work on it
    /// when the scope ends or the graph's borrow does (the buffer's own safe `Deref` relies
    /// on the same). [`PinnedBuffer::from_raw_parts`] takes it back in the same context;
    /// otherwise free it yourself with `cuMemFreeHost` (`cudaFreeHost`). Like all
    /// page-locked memory of a context, it is freed when the context is destroyed, at the
    /// end of its closure, if not before. A buffer of a setup phase is taken off its
    /// teardown's list. A buffer of zero bytes owns no memory: its address is dangling
    /// (aligned, never allocated).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let host = ctx.pinned_from_slice(&[1.0f64, -1.0])?;
    ///     // SAFETY: taken back below, unused meanwhile.
    ///     let (ptr, len) = unsafe { host.into_raw_parts() };
    ///     // SAFETY: `into_raw_parts` of this context gave `ptr` and `len`: initialised,
    ///     // freed by nothing else, used by no copy.
    ///     let back = unsafe { PinnedBuffer::<f64>::from_raw_parts(ctx, ptr, len) }?;
    ///     assert_eq!(&back[..], [1.0, -1.0]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// Leaking the memory is safe ([`mem::forget`] does it too); `unsafe` marks what the
    /// address allows behind the borrow checker's back. The caller takes the memory over
    /// and promises: it is freed at most once, with `cuMemFreeHost` in the buffer's
    /// context, after the last copy using it has finished, or left to the context's
    /// destruction; it is not used after either; and work given the address (an
    /// asynchronous copy, a kernel through its device alias) reads it while nothing writes
    /// it and writes it while nothing else uses it, as the buffer's borrows would have
    /// made the crate's copies do.
    pub unsafe fn into_raw_parts(self) -> (*mut T, usize) {
        if self.of_setup_phase() {
            crate::context::deferred::undefer(self.ptr.as_ptr() as usize);
        }
        let parts = (self.ptr.as_ptr(), self.len);
        mem::forget(self);
        parts
    }

    /// Frees the page-locked memory and returns the driver's error, where dropping it would
    /// only record the error for the teardown of its context to report. After an error the
    /// memory stays allocated until the context is destroyed.
    /// Memory of the setup phase of [`with_phases`](crate::with_phases) is freed by its
    /// teardown instead: `close` frees nothing and returns `Ok`.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let host = ctx.pinned_zeroed::<u8>(1 << 20)?;
    ///     host.close()
    /// })
    /// # }
    /// ```
    pub fn close(self) -> Result<()> {
        let mut this = mem::ManuallyDrop::new(self);
        this.release()
    }

    /// What `drop` and `close` run: gives the memory back.
    fn release(&mut self) -> Result<()> {
        if self.len == 0 || size_of::<T>() == 0 {
            return Ok(());
        }
        if self.ctx.as_ptr() as usize & 1 != 0 {
            // memory of a setup phase: its context's teardown frees it
            return Ok(());
        }
        let p = self.ptr.as_ptr() as usize;
        let free = move |ctx| {
            let free = || {
                // SAFETY: `p` came from cuMemHostAlloc in `ctx`, which the brand keeps
                // alive; no copy can still use it (they only run inside a scope that
                // borrows the buffer), and the buffer is not used again (dropped, or
                // forgotten by `close`).
                unsafe { driver::mem_free_host(p as *mut c_void) }
            };
            // SAFETY: the brand keeps the context alive (a release parked for a
            // partition's thread runs before the partition ends: `context::confined`).
            unsafe { context::in_context(ctx, free) }
        };
        context::confined::release_in(self.ctx, "PinnedBuffer", free).unwrap_or(Ok(()))
    }
}

impl<T: DeviceCopy> Drop for PinnedBuffer<'_, T> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            // the memory stays allocated; the teardown of the context reports it
            crate::context::teardown::record_failed_release(Some(self.ctx), "PinnedBuffer", e);
        }
    }
}

impl<T: DeviceCopy + fmt::Debug> fmt::Debug for PinnedBuffer<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PinnedBuffer").field(&&**self).finish()
    }
}
