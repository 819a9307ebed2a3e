//! Managed (unified) memory ([`ManagedBuffer`]): one allocation that the host and the GPU
//! both address, migrated by the driver on demand.
//!
//! The host reads and writes it through `Deref` to `[T]`; GPU work reaches it through
//! [`ManagedBuffer::as_device`] / [`as_device_mut`](ManagedBuffer::as_device_mut), views
//! that a stream scope borrows until its stream has finished. So the borrow checker keeps
//! the host off the memory while queued work uses it, exactly as for a
//! [`PinnedBuffer`](crate::PinnedBuffer): no host access can race a kernel.
//!
//! Devices without *concurrent managed access* (`CONCURRENT_MANAGED_ACCESS` = 0: GPUs
//! before Pascal, Windows, some virtualised GPUs) forbid host access to managed memory
//! while **any** work runs on the device, even work that never touches it; the crate cannot
//! see all work of a device, so it refuses to create a `ManagedBuffer` there (an error with
//! `CUDA_ERROR_NOT_SUPPORTED` saying so).
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::{ManagedBuffer, MemoryLocation};
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
//!     // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
//!     let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
//!     let mut data = ManagedBuffer::from_slice(ctx, &[1.0f32, 2.0, 3.0])?;
//!     data[0] = 10.0; // the host writes it directly
//!     ctx.new_stream()?.scope(|s| {
//!         let d = s.bind_mut(data.as_device_mut());
//!         s.prefetch(d.into_ref(), MemoryLocation::Device(ctx.device()?))?;
//!         s.launch(&scale, LaunchConfig::linear(1, 32), (d, 2.0f32))?;
//!         s.prefetch(d.into_ref(), MemoryLocation::Host)
//!     })?; // the scope is over: the host may touch it again
//!     assert_eq!(&data[..], [20.0, 4.0, 6.0]);
//!     Ok(())
//! })
//! # }
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use super::{DeviceCopy, DeviceSlice, checked_byte_len, empty_address};
use crate::context::{Allocating, Brand, ContextGuard, Device, Part};
use crate::driver::{self, CUdeviceptr};
use crate::error::{Error, ErrorCode, Invalid, Result};
use crate::span::Touched;
use crate::synchronous;

/// Managed memory of the context branded `'ctx` (`cuMemAllocManaged`): a `[T]` on the host,
/// a [`DeviceSlice`] for GPU work. See the [module documentation](crate::memory::managed).
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: managed buffers of two contexts never have one type, and
/// a function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::ManagedBuffer;
///
/// /// Takes two managed buffers of one context.
/// fn one_context<'ctx>(_: &ManagedBuffer<'ctx, u32>, _: &ManagedBuffer<'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = ManagedBuffer::<u32>::zeroed(a, 4)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = ManagedBuffer::<u32>::zeroed(b, 4)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct ManagedBuffer<'ctx, T: DeviceCopy> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: NonNull<CUctx_st>,
    /// Memory of a setup phase: its context's teardown frees it (see [`crate::phase`]).
    deferred: bool,
    /// Invariant in `'ctx` (the crate's `Brand`), like the [`DeviceSlice`] it lends. Were
    /// it covariant, two owned managed buffers of two contexts could be shortened to one
    /// brand, and their device views (`as_device_mut`, `as_device`) would meet in one copy.
    _brand: Brand<'ctx>,
    _elem: PhantomData<T>,
}

// SAFETY: managed memory is ordinary memory to every host thread; freeing it makes its own
// context current.
unsafe impl<T: DeviceCopy + Send> Send for ManagedBuffer<'_, T> {}
// SAFETY: `&ManagedBuffer` only gives `&[T]` and a shared device view.
unsafe impl<T: DeviceCopy + Sync> Sync for ManagedBuffer<'_, T> {}

/// Where managed memory should live: the host, or a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryLocation {
    /// Host memory (`CU_DEVICE_CPU`).
    Host,
    /// The memory of this device.
    Device(Device),
}

impl MemoryLocation {
    pub(crate) fn raw(self) -> i32 {
        match self {
            MemoryLocation::Host => -1,
            MemoryLocation::Device(d) => d.as_raw(),
        }
    }
}

/// Advice about how managed memory will be used (`CUmem_advise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Advice {
    /// Mostly read: the driver may keep read-only copies where it is read.
    ReadMostly,
    /// Undo [`Advice::ReadMostly`].
    NotReadMostly,
    /// Prefer to keep it at this location.
    PreferredLocation(MemoryLocation),
    /// Undo [`Advice::PreferredLocation`].
    NoPreferredLocation,
    /// This location will access it: keep a mapping there.
    AccessedBy(MemoryLocation),
    /// Undo [`Advice::AccessedBy`].
    NotAccessedBy(MemoryLocation),
}

/// Refuses (`CUDA_ERROR_NOT_SUPPORTED`, naming `call`) a device without concurrent managed
/// access, whose managed memory the host may not touch while any work runs on the device.
fn concurrent_access(call: &'static str, ctx: ContextGuard<'_>) -> Result<()> {
    const CONCURRENT_MANAGED_ACCESS: i32 = 89;
    let device = ctx.device()?;
    if driver::device_attribute(device.as_raw(), CONCURRENT_MANAGED_ACCESS)? == 0 {
        return Err(Error::with_detail(
            call,
            ErrorCode::NotSupported,
            "this device has no concurrent managed access (CONCURRENT_MANAGED_ACCESS is 0): the host may not touch managed memory while any work runs on the device, which the crate cannot see; use DeviceBuffer and PinnedBuffer",
        ));
    }
    Ok(())
}

impl<'ctx, T: DeviceCopy> ManagedBuffer<'ctx, T> {
    /// Allocates `len` elements of managed memory set to zero bytes (written by the host,
    /// so the pages start on the host). Made with the setup guard of
    /// [`with_phases`](crate::with_phases), it is freed only by the teardown.
    pub fn zeroed<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        len: usize,
    ) -> Result<Self> {
        let bytes = checked_byte_len::<T>("ManagedBuffer::zeroed", len)?;
        concurrent_access("ManagedBuffer::zeroed", ctx.unphased())?;
        let ptr = if bytes == 0 {
            empty_address::<T>()
        } else {
            ctx.with_current(|| driver::mem_alloc_managed(bytes))?
        };
        let deferred = P::DEFERS_FREES && bytes != 0;
        let buf = ManagedBuffer {
            ptr,
            len,
            ctx: ctx.as_non_null(),
            deferred,
            _brand: PhantomData,
            _elem: PhantomData,
        };
        if deferred {
            // on failure the memory is freed there and `buf` (marked deferred) frees nothing
            crate::context::deferred::defer_free(
                ctx.as_non_null().as_ptr(),
                ptr as usize,
                crate::context::deferred::FreeBy::Plain,
            )?;
        }
        // (dropped on refusal, `buf` gives the memory back, or leaves it to the teardown)
        if ptr as usize % std::mem::align_of::<T>() != 0 {
            return Err(Error::invalid_input(
                "ManagedBuffer::zeroed",
                Invalid::Misaligned {
                    what: "the driver's managed memory",
                    value: ptr,
                    align: std::mem::align_of::<T>(),
                },
            ));
        }
        if bytes != 0 {
            // SAFETY: `bytes` bytes of managed memory at `ptr`, host-accessible (concurrent
            // managed access, checked above), used by nothing else yet.
            unsafe { std::ptr::write_bytes(ptr as usize as *mut u8, 0, bytes) };
        }
        Ok(buf)
    }

    /// Allocates managed memory holding a copy of `src`.
    pub fn from_slice<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        src: &[T],
    ) -> Result<Self> {
        let mut buf = Self::zeroed(ctx, src.len())?;
        buf.copy_from_slice(src);
        Ok(buf)
    }

    /// Adopts `len` elements of managed memory at `ptr` that another library allocated in
    /// the context of `ctx` (`cuMemAllocManaged`, `cudaMallocManaged`), or that
    /// [`into_raw_parts`](ManagedBuffer::into_raw_parts) gave: the buffer owns it from here
    /// on, and frees it with `cuMemFree` when dropped or [closed](ManagedBuffer::close).
    /// The CUDA runtime allocates in the device's primary context: adopt its memory with a
    /// guard of [`with_primary_context`](crate::with_primary_context).
    ///
    /// **What the crate checks** before it accepts (an `Err` naming `ptr`, `len` or `ctx`
    /// otherwise, before anything is taken over):
    /// * that `len` elements of `T` do not overflow `usize`; with zero bytes nothing is
    ///   taken over and nothing else checked (the memory at `ptr`, if any, stays the
    ///   caller's);
    /// * that `ptr` is not null, is aligned for `T`, and the range does not wrap;
    /// * that the device has concurrent managed access, as [`ManagedBuffer::zeroed`] does
    ///   (`CUDA_ERROR_NOT_SUPPORTED` otherwise);
    /// * through the driver (`cuPointerGetAttributes`, which makes no driver error of an
    ///   unknown address): that `ptr` is managed memory allocated in `ctx`'s own context;
    ///   that it is the start of the allocation the driver reports
    ///   (`CU_POINTER_ATTRIBUTE_RANGE_START_ADDR`): the buffer frees it with `cuMemFree`,
    ///   which frees nothing else, so a buffer of an address inside an allocation would fail
    ///   its free and leak it (memory the driver reports no range for is refused, its start
    ///   unconfirmed); and that `len` elements from it end inside that allocation
    ///   (`CU_POINTER_ATTRIBUTE_RANGE_SIZE`). A part from the start is accepted: its free
    ///   frees the whole allocation.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::ManagedBuffer;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let data = ManagedBuffer::from_slice(ctx, &[3i32, -4])?;
    ///     // SAFETY: taken back below, unused meanwhile.
    ///     let (ptr, len) = unsafe { data.into_raw_parts() };
    ///     // SAFETY: `into_raw_parts` of this context gave `ptr` and `len`: initialised,
    ///     // freed by nothing else, used by no kernel.
    ///     let back = unsafe { ManagedBuffer::<i32>::from_raw_parts(ctx, ptr, len) }?;
    ///     assert_eq!(&back[..], [3, -4]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// The buffer lends `&mut [T]` of the memory to the host and device views to GPU work,
    /// and frees it. The caller gives the memory over and promises:
    /// * `ptr` is the address an allocation call (`cuMemAllocManaged`, `cudaMallocManaged`)
    ///   returned, or `into_raw_parts` gave: that it starts the range the driver reports,
    ///   and that `len` elements fit, is checked; which call made the memory is not (a
    ///   module's `__managed__` variable is managed memory of the context too, and its
    ///   module, not `cuMemFree`, releases it);
    /// * the `len` elements are initialised (written by the host, a copy or a kernel; as
    ///   for [`std::slice::from_raw_parts`], every bit pattern of a `DeviceCopy` type is a
    ///   value, but bytes never written are none);
    /// * nothing else frees it, reads it or writes it after this call but through the
    ///   buffer, and no work queued before it still does (each stream that used it has been
    ///   synchronized since).
    ///
    /// The brand gives the rest: the memory was allocated in `ctx`'s context (checked), so
    /// it lives as long as the context, which outlives the buffer.
    pub unsafe fn from_raw_parts(
        ctx: ContextGuard<'ctx>,
        ptr: CUdeviceptr,
        len: usize,
    ) -> Result<Self> {
        const CALL: &str = "ManagedBuffer::from_raw_parts";
        let ptr = match super::adopt::check_parts::<T>(CALL, ptr, len)? {
            None => empty_address::<T>(),
            Some(bytes) => {
                concurrent_access(CALL, ctx)?;
                ctx.with_current(|| super::adopt::check_managed(CALL, ctx, ptr, len, bytes))?;
                ptr
            }
        };
        Ok(ManagedBuffer {
            ptr,
            len,
            ctx: ctx.as_non_null(),
            deferred: false,
            _brand: PhantomData,
            _elem: PhantomData,
        })
    }

    /// The memory as a device view, for reading GPU work (`&data` style arguments).
    pub fn as_device(&self) -> &DeviceSlice<'ctx, T> {
        // SAFETY: managed memory of this context, owned by `self` and borrowed from it; the
        // host cannot write it while the view lives (`&self`).
        unsafe { DeviceSlice::from_raw_parts(self.ptr, self.len) }
    }

    /// The memory as a device view for writing GPU work; the host cannot touch the buffer
    /// while the view (and so any scope holding it) lives.
    pub fn as_device_mut(&mut self) -> &mut DeviceSlice<'ctx, T> {
        // SAFETY: as above, borrowed exclusively.
        unsafe { DeviceSlice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Gives the driver advice about how the memory will be used (`cuMemAdvise`).
    ///
    /// A partition's managed buffer takes advice on the partition's thread only: on another
    /// thread this is [`ErrorCode::NotPermitted`]
    /// ([`crate::partition`]).
    pub fn advise(&self, advice: Advice) -> Result<()> {
        let bytes = self.len * size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        // the green context's memory, reached without making a context current: on the
        // partition's thread only (`context::confined`; one atomic load while none lives)
        crate::context::confined::refuse_foreign_call("ManagedBuffer::advise", self.ctx.as_ptr())?;
        let (code, location) = match advice {
            Advice::ReadMostly => (1, MemoryLocation::Host),
            Advice::NotReadMostly => (2, MemoryLocation::Host),
            Advice::PreferredLocation(l) => (3, l),
            Advice::NoPreferredLocation => (4, MemoryLocation::Host),
            Advice::AccessedBy(l) => (5, l),
            Advice::NotAccessedBy(l) => (6, l),
        };
        // SAFETY: the buffer's managed memory.
        unsafe { driver::mem_advise(self.ptr, bytes, code, location.raw()) }
    }
}

impl<T: DeviceCopy> Deref for ManagedBuffer<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements at `ptr`, host-accessible (concurrent managed
        // access), and no GPU work writes them while `self` is borrowed shared (GPU work
        // reaches the memory only through views borrowed from `self`).
        unsafe { std::slice::from_raw_parts(self.ptr as usize as *const T, self.len) }
    }
}

impl<T: DeviceCopy> DerefMut for ManagedBuffer<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, borrowed exclusively: no queued work uses the memory.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as usize as *mut T, self.len) }
    }
}

impl<T: DeviceCopy> ManagedBuffer<'_, T> {
    /// Whether the buffer is memory of a setup phase, which its context's teardown frees
    /// (the owning layer refuses to take such a buffer over).
    #[inline]
    pub(crate) fn of_setup_phase(&self) -> bool {
        self.deferred
    }

    /// The memory's address and length, without freeing: it leaves the crate, after the
    /// crate's pending synchronous operations on it (none, normally: a synchronous write
    /// of managed memory is complete when it returns, since the host may read it next;
    /// this call waits on the host for any all the same, as
    /// [`DeviceSlice::as_device_ptr`] does).
    /// [`ManagedBuffer::from_raw_parts`] takes it back in the same context; otherwise free
    /// it yourself with `cuMemFree` (`cudaFree`) in the buffer's context. Like all managed
    /// memory of a context, it is freed when the context is destroyed, at the end of its
    /// closure, if not before. A buffer of a setup phase is taken off its teardown's list.
    /// A buffer of zero bytes owns no memory: its address is a sentinel that is no
    /// allocation.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::ManagedBuffer;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let data = ManagedBuffer::from_slice(ctx, &[0.5f32; 4])?;
    ///     // SAFETY: taken back below, unused meanwhile.
    ///     let (ptr, len) = unsafe { data.into_raw_parts() };
    ///     // SAFETY: `into_raw_parts` of this context gave `ptr` and `len`: initialised,
    ///     // freed by nothing else, used by no kernel.
    ///     let back = unsafe { ManagedBuffer::<f32>::from_raw_parts(ctx, ptr, len) }?;
    ///     assert_eq!(&back[..], [0.5; 4]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// Leaking the memory is safe ([`std::mem::forget`] does it too); `unsafe` marks what
    /// the address allows behind the borrow checker's back. The caller takes the memory
    /// over and promises: it is freed at most once, with `cuMemFree` in the buffer's
    /// context, after the last work using it has finished, or left to the context's
    /// destruction; it is not used after either; and the host and work given the address
    /// read it while nothing writes it and write it while nothing else uses it, as the
    /// buffer's borrows would have made them do.
    pub unsafe fn into_raw_parts(self) -> (CUdeviceptr, usize) {
        if self.len != 0 {
            let touched = [self.as_device().span(true)];
            synchronous::before_raw_escape(Touched::Spans(&touched));
        }
        if self.deferred {
            crate::context::deferred::undefer(self.ptr as usize);
        }
        let parts = (self.ptr, self.len);
        std::mem::forget(self);
        parts
    }

    /// Frees the memory and returns the driver's error, where dropping it would only record
    /// the error for the teardown of its context to report. After an error the memory stays
    /// allocated until the context is destroyed.
    /// Memory of the setup phase of [`with_phases`](crate::with_phases) is freed by its
    /// teardown instead: `close` frees nothing and returns `Ok`.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::ManagedBuffer;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let buf = ManagedBuffer::from_slice(ctx, &[1.0f32, 2.0])?;
    ///     buf.close()
    /// })
    /// # }
    /// ```
    pub fn close(self) -> Result<()> {
        let mut this = std::mem::ManuallyDrop::new(self);
        this.release()
    }

    /// What `drop` and `close` run: gives the memory back.
    fn release(&mut self) -> Result<()> {
        if self.len == 0 || size_of::<T>() == 0 {
            return Ok(());
        }
        if self.deferred {
            // memory of a setup phase: its context's teardown frees it
            return Ok(());
        }
        let ptr = self.ptr;
        let free = move |ctx| {
            // SAFETY: the buffer owns `ptr` (from cuMemAllocManaged) in its context, which the brand
            // keeps alive (a release parked for a partition's thread runs before the
            // partition ends: `context::confined`); no queued work uses it (scopes borrow
            // the buffer until their streams are idle); the buffer is not used again
            // (dropped, or forgotten by `close`).
            unsafe { super::free_plain(ctx, ptr) }
        };
        crate::context::confined::release_in(self.ctx, "ManagedBuffer", free).unwrap_or(Ok(()))
    }
}

impl<T: DeviceCopy> Drop for ManagedBuffer<'_, T> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            // the memory stays allocated; the teardown of the context reports it
            crate::context::teardown::record_failed_release(Some(self.ctx), "ManagedBuffer", e);
        }
    }
}

impl<T: DeviceCopy + fmt::Debug> fmt::Debug for ManagedBuffer<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManagedBuffer").field(&&**self).finish()
    }
}
