//! [`DeviceSlice`], the borrowed view of device memory, and its synchronous operations.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut, RangeBounds};
use std::ptr::NonNull;

#[cfg(doc)]
use super::DeviceBuffer;
use super::extent::{
    bounds, byte_len, chunk_size, copy_ends_disjoint, fail, lengths_match, split_point,
};
use super::{DeviceCopy, Memset, sealed, staging};
use crate::context::{self, Brand};
use crate::driver::{self, CUdeviceptr};
use crate::error::{Error, ErrorCode, Result};
use crate::span::{Span, Touched};
use crate::synchronous::{self, Access, Completion};

/// A zero-sized, align-1 element, so that a `&DeviceSlice` is a fat pointer (device address,
/// element count) that claims no host-dereferenceable bytes.
#[repr(transparent)]
struct NoHostBytes(());

/// A borrowed view of device memory of the context branded `'ctx`: the `[T]` of
/// [`DeviceBuffer`].
///
/// Always behind a reference: `&DeviceSlice` reads, `&mut DeviceSlice` writes, and they
/// follow the borrow rules of `&[T]` and `&mut [T]`. The reference's address is the device
/// address (it is never dereferenced on the host; the view occupies zero host bytes), and
/// its length is the element count.
///
/// ```no_run
/// use cuda_brand::{with_context, ContextFlags, Device, DeviceBuffer};
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let mut buf = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3, 4, 5, 6])?;
///     let (left, right) = buf.split_at_mut(3);
///     left.copy_from_device(right)?;
///     buf[4..].fill(9)?;
///     assert_eq!(buf.to_vec()?, [4, 5, 6, 4, 9, 9]);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: views of memory of two contexts never have one type, and
/// a function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
///
/// /// Takes two views of memory of one context.
/// fn one_context<'ctx>(_: &DeviceSlice<'ctx, u32>, _: &DeviceSlice<'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = a.zeroed::<u32>(4)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = b.zeroed::<u32>(4)?;
///         one_context(&on_a[1..], &on_b[1..]); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
#[repr(C)]
pub struct DeviceSlice<'ctx, T> {
    /// Invariant in `'ctx` (the crate's `Brand`). Where the crate takes a view it mostly
    /// also takes something invariant that fixes the context (a scope, a capture, the
    /// `&mut` destination of a copy), which would refuse a covariant view on its own; but a
    /// program's helper that takes two views "of one context"
    /// (`fn f<'ctx>(x: &DeviceSlice<'ctx, T>, y: &DeviceSlice<'ctx, T>)`) means it only
    /// because this brand cannot be shortened to one common to two contexts.
    _brand: Brand<'ctx>,
    _elem: PhantomData<T>,
    slots: [NoHostBytes],
}

impl<'ctx, T> DeviceSlice<'ctx, T> {
    /// # Safety
    /// `[ptr, ptr + len * size_of::<T>())` is device memory that the context `'ctx` may
    /// access (its own, or a peer's through a [`PeerAccess`](crate::PeerAccess) token),
    /// that stays allocated for `'a` and is not accessed through other views during `'a`
    /// (other than as `&` for `&`). For a view of zero bytes, `ptr` may be any non-zero
    /// address; it never reaches the driver.
    #[inline]
    pub(crate) unsafe fn from_raw_parts<'a>(ptr: CUdeviceptr, len: usize) -> &'a Self {
        let fat =
            std::ptr::slice_from_raw_parts(ptr as usize as *const NoHostBytes, len) as *const Self;
        // SAFETY: `Self` has size zero and alignment one, so any non-null address is a
        // valid reference to it; the caller guarantees the device memory behind it.
        unsafe { &*fat }
    }

    /// # Safety
    /// As [`DeviceSlice::from_raw_parts`], and no other view exists during `'a`.
    #[inline]
    pub(crate) unsafe fn from_raw_parts_mut<'a>(ptr: CUdeviceptr, len: usize) -> &'a mut Self {
        let fat =
            std::ptr::slice_from_raw_parts_mut(ptr as usize as *mut NoHostBytes, len) as *mut Self;
        // SAFETY: as above.
        unsafe { &mut *fat }
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the view has no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The size in bytes.
    #[inline]
    pub fn size_in_bytes(&self) -> usize {
        byte_len::<T>(self.len())
    }

    /// The device address of the first element, for the crate's own calls.
    #[inline]
    pub(crate) fn device_ptr(&self) -> CUdeviceptr {
        self.slots.as_ptr() as usize as CUdeviceptr
    }

    /// The device address of the first element (`CUdeviceptr`), once the crate's pending
    /// synchronous operations on this memory are done. For an empty view this is an
    /// address nothing is allocated at.
    ///
    /// A synchronous write of device memory (a `fill`, a device-to-device copy, an upload
    /// of up to 256 KiB) may still run on the GPU when it returns: the crate orders its own
    /// later users of the memory after it (`docs/design/ordering.md`), but not work it
    /// cannot see. So this call first waits on the host for the pending synchronous
    /// operations that touch these bytes (or memory the crate cannot place, which may be
    /// any): work given the address afterwards, on any stream or context, finds them done.
    /// One atomic load while nothing is pending anywhere; while only other memory's
    /// writes are pending, a look at the book of them (a lock) and no wait. Only what is
    /// pending when the call is made: after a later synchronous write of the memory, take
    /// the address again before raw work uses it.
    ///
    /// # Safety
    ///
    /// Taking the address does nothing the caller must check; `unsafe` marks what it allows
    /// behind the borrow checker's back, since a number outlives no borrow. The caller
    /// promises, for every use of the address (a kernel parameter, a driver call): it is
    /// not used after the memory is freed (the buffer dropped, or the scope that allocated
    /// it ended); and work given it reads the memory only while nothing writes it and
    /// writes it only while nothing else uses it, until that work has finished, as the
    /// borrow of this slice would make the crate's copies and launches do.
    ///
    /// Where the wait cannot run or fails, the address is returned all the same (the
    /// signature has no room for an error): inside a host function, where the crate makes
    /// no driver call, work given the address waits for the crate's writes itself
    /// ([`ContextGuard::synchronize`](crate::ContextGuard::synchronize) once the host
    /// function has returned); after a sticky error (a fault of earlier work), every later
    /// call in that context fails, raw ones included, and the next call of the crate
    /// reports it.
    #[inline]
    pub unsafe fn as_device_ptr(&self) -> CUdeviceptr {
        if !self.is_empty() {
            crate::synchronous::before_raw_escape(Touched::Spans(&[self.span(true)]));
        }
        self.device_ptr()
    }

    #[inline]
    pub(crate) fn span(&self, write: bool) -> Span {
        Span {
            start: self.device_ptr(),
            bytes: self.size_in_bytes() as u64,
            write,
        }
    }

    #[inline]
    fn at(&self, index: usize) -> CUdeviceptr {
        self.device_ptr() + byte_len::<T>(index) as CUdeviceptr
    }

    /// A sub-view, or `None` if the range is out of bounds.
    pub fn get(&self, range: impl RangeBounds<usize>) -> Option<&Self> {
        let (start, end) = bounds(&range, self.len())?;
        // SAFETY: in bounds of `self`, borrowed from `self`.
        Some(unsafe { Self::from_raw_parts(self.at(start), end - start) })
    }

    /// A mutable sub-view, or `None` if the range is out of bounds.
    pub fn get_mut(&mut self, range: impl RangeBounds<usize>) -> Option<&mut Self> {
        let (start, end) = bounds(&range, self.len())?;
        // SAFETY: in bounds of `self`, exclusively borrowed from `self`.
        Some(unsafe { Self::from_raw_parts_mut(self.at(start), end - start) })
    }

    /// Two views, `[0, mid)` and `[mid, len)`.
    ///
    /// # Panics
    /// If `mid > len`.
    /// [`split_at_checked`](DeviceSlice::split_at_checked) returns `None` instead.
    #[track_caller]
    pub fn split_at(&self, mid: usize) -> (&Self, &Self) {
        if let Err(e) = split_point("DeviceSlice::split_at", mid, self.len()) {
            fail(e)
        }
        (&self[..mid], &self[mid..])
    }

    /// [`split_at`](DeviceSlice::split_at), or `None` if `mid > len` (as
    /// `[T]::split_at_checked`).
    ///
    /// ```
    /// # fn f(buf: &cuda_brand::DeviceSlice<'_, u32>) {
    /// // with a view of 4 elements
    /// assert!(buf.split_at_checked(5).is_none());
    /// # }
    /// ```
    pub fn split_at_checked(&self, mid: usize) -> Option<(&Self, &Self)> {
        (mid <= self.len()).then(|| self.split_at(mid))
    }

    /// Two disjoint mutable views, `[0, mid)` and `[mid, len)`.
    ///
    /// # Panics
    /// If `mid > len`.
    /// [`split_at_mut_checked`](DeviceSlice::split_at_mut_checked) returns `None` instead.
    #[track_caller]
    pub fn split_at_mut(&mut self, mid: usize) -> (&mut Self, &mut Self) {
        let len = self.len();
        if let Err(e) = split_point("DeviceSlice::split_at_mut", mid, len) {
            fail(e)
        }
        let (left, right) = (self.at(0), self.at(mid));
        // SAFETY: `[0, mid)` is within `self`, which is borrowed exclusively for as long as
        // both views live, and disjoint from the other view.
        let left = unsafe { Self::from_raw_parts_mut(left, mid) };
        // SAFETY: as above, for `[mid, len)`.
        let right = unsafe { Self::from_raw_parts_mut(right, len - mid) };
        (left, right)
    }

    /// [`split_at_mut`](DeviceSlice::split_at_mut), or `None` if `mid > len` (as
    /// `[T]::split_at_mut_checked`).
    pub fn split_at_mut_checked(&mut self, mid: usize) -> Option<(&mut Self, &mut Self)> {
        if mid > self.len() {
            return None;
        }
        Some(self.split_at_mut(mid))
    }

    /// Views of `size` elements each (the last may be shorter), like `[T]::chunks`.
    ///
    /// # Panics
    /// If `size` is 0.
    #[track_caller]
    pub fn chunks(
        &self,
        size: usize,
    ) -> impl DoubleEndedIterator<Item = &Self> + ExactSizeIterator {
        if let Err(e) = chunk_size("DeviceSlice::chunks", size) {
            fail(e)
        }
        let len = self.len();
        (0..len.div_ceil(size)).map(move |i| {
            let start = i * size; // < len: i < len / size rounded up
            &self[start..start + size.min(len - start)]
        })
    }

    /// Disjoint mutable views of `size` elements each (the last may be shorter), like
    /// `[T]::chunks_mut`.
    ///
    /// # Panics
    /// If `size` is 0.
    #[track_caller]
    pub fn chunks_mut(
        &mut self,
        size: usize,
    ) -> impl DoubleEndedIterator<Item = &mut Self> + ExactSizeIterator {
        if let Err(e) = chunk_size("DeviceSlice::chunks_mut", size) {
            fail(e)
        }
        let (base, len) = (self.at(0), self.len());
        (0..len.div_ceil(size)).map(move |i| {
            let start = i * size; // < len, as in `chunks`
            let n = size.min(len - start);
            // SAFETY: the chunks are disjoint and within `self`, which the iterator borrows
            // exclusively for as long as any chunk lives.
            unsafe { Self::from_raw_parts_mut(base + byte_len::<T>(start) as CUdeviceptr, n) }
        })
    }
}

impl<'ctx, T: DeviceCopy> DeviceSlice<'ctx, T> {
    /// Copies `src` from the host into this view (`cuMemcpyHtoD`); done when it returns.
    /// From 512 KiB, pageable memory is staged: see
    /// [`DeviceBuffer`'s documentation](DeviceBuffer#bulk-copies-to-and-from-pageable-memory).
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        lengths_match("copy_from_host", self.len(), src.len())?;
        let bytes = self.size_in_bytes();
        if bytes == 0 {
            return Ok(());
        }
        let spans = [self.span(true)];
        in_memory_context_with(self.device_ptr(), |ctx, completion, placed| {
            // SAFETY: `ctx`, where given, is current and alive (`in_memory_context_with`);
            // both ranges have `bytes` bytes; `self` is exclusively borrowed device memory,
            // all of it named, and `src` a shared borrow nobody writes during the call.
            unsafe {
                staging::upload(
                    ctx,
                    completion,
                    Touched::placed(placed, &spans),
                    self.device_ptr(),
                    src.as_ptr().cast(),
                    bytes,
                )
            }
        })
    }

    /// Copies this view into `dst` on the host (`cuMemcpyDtoH`); done when it returns.
    /// From 1 MiB, pageable memory is staged: see
    /// [`DeviceBuffer`'s documentation](DeviceBuffer#bulk-copies-to-and-from-pageable-memory).
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        lengths_match("copy_to_host", dst.len(), self.len())?;
        if self.size_in_bytes() == 0 {
            return Ok(());
        }
        // SAFETY: `dst` is exclusively borrowed and holds `len` elements (checked above),
        // and any bytes are a valid `T` (`DeviceCopy`).
        unsafe { self.download_into(staging::CopyKind::ToHost, dst.as_mut_ptr().cast()) }
    }

    /// Copies the view's `size_in_bytes` bytes (not zero) into host memory at `dst`, staged
    /// where `kind` says so (`staging::download`); complete when it returns.
    ///
    /// # Safety
    /// `dst` is valid for `size_in_bytes` bytes of writes that nothing else uses during the
    /// call, any bytes being a valid value of its type.
    unsafe fn download_into(
        &self,
        kind: staging::CopyKind,
        dst: *mut std::ffi::c_void,
    ) -> Result<()> {
        let spans = [self.span(false)];
        in_memory_context_with(self.device_ptr(), |ctx, completion, placed| {
            // SAFETY: `ctx`, where given, is current and alive; both ranges have
            // `size_in_bytes` bytes (the caller's promise for `dst`); `self` is a shared
            // borrow nobody writes during the call, all of it named.
            unsafe {
                staging::download(
                    ctx,
                    completion,
                    kind,
                    Touched::placed(placed, &spans),
                    dst,
                    self.device_ptr(),
                    self.size_in_bytes(),
                )
            }
        })
    }

    /// Copies another view of the same context into this one (`cuMemcpyDtoD`); complete
    /// when it returns.
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_from_device(&mut self, src: &DeviceSlice<'ctx, T>) -> Result<()> {
        lengths_match("copy_from_device", self.len(), src.len())?;
        if self.size_in_bytes() == 0 {
            return Ok(());
        }
        let (dst_span, src_span) = (self.span(true), src.span(false));
        // unreachable through the borrow rules (`self` is borrowed exclusively, `src`
        // shared); checked anyway, it costs two compares
        copy_ends_disjoint("DeviceSlice::copy_from_device", &dst_span, &src_span)?;
        // A source the host reads and writes directly (managed memory: `ManagedBuffer`
        // lends it as a view) has a later user the sync stream's record does not order: the
        // host, as soon as this returns. The copy is then waited for, as one touching host
        // memory (`Access::Host`); a managed destination is waited for on the host anyway
        // (`in_memory_context_with`'s `Completion::HostWait`).
        let src_info = driver::pointer_info(src.device_ptr())?;
        let access = match src_info.host_visible {
            true => Access::Host,
            false => Access::Device,
        };
        // both ends can be placed where both are memory of a pool
        let src_pooled = src_info.pooled;
        let spans = [dst_span, src_span];
        in_memory_context_with(self.device_ptr(), |ctx, completion, placed| {
            // SAFETY: both device ranges have `size_in_bytes` bytes, are memory of this
            // context (one brand), borrowed now and ordered before every later user, device
            // work by the sync stream's record (`Access::Device`; both named), the host by
            // the wait for a source it can reach (`Access::Host`), and do not overlap
            // (checked above); `ctx`, where given, is current and alive
            // (`in_memory_context_with`).
            let op = |stream| {
                // SAFETY: the ranges as stated above, on the stream `run` gives.
                unsafe {
                    driver::memcpy_dtod_async(
                        self.device_ptr(),
                        src.device_ptr(),
                        self.size_in_bytes(),
                        stream,
                    )
                }
            };
            let touched = Touched::placed(placed && src_pooled, &spans);
            // SAFETY: as stated above.
            unsafe { synchronous::run(ctx, completion, access, touched, op) }
        })
    }

    /// The contents, copied into a new `Vec`; complete when it returns.
    ///
    /// A large copy (1 MiB and up) is staged through page-locked memory the context keeps
    /// and written into the `Vec` by several threads, many times faster than the driver
    /// writes a new `Vec`: see
    /// [`DeviceBuffer`'s documentation](DeviceBuffer#bulk-copies-to-and-from-pageable-memory).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = Vec::with_capacity(self.len());
        let dst = v.spare_capacity_mut();
        if self.size_in_bytes() != 0 {
            // SAFETY: `dst` is the new `Vec`'s spare room for `len` elements, which nothing
            // else uses; any bytes are a valid `T` (`DeviceCopy`).
            unsafe { self.download_into(staging::CopyKind::ToNewHost, dst.as_mut_ptr().cast()) }?;
        }
        // SAFETY: the copy initialised all `len` elements.
        unsafe { v.set_len(self.len()) };
        Ok(v)
    }

    /// Sets every element to `value` (`cuMemsetD8/16/32`).
    pub fn fill(&mut self, value: T) -> Result<()>
    where
        T: Memset,
    {
        if self.size_in_bytes() == 0 {
            return Ok(());
        }
        let spans = [self.span(true)];
        in_memory_context_with(self.device_ptr(), |ctx, completion, placed| {
            // SAFETY: `len` elements of the pattern's width are the view's bytes, borrowed
            // now, named, and ordered before every later user by the sync stream's record;
            // `ctx`, where given, is current and alive (`in_memory_context_with`).
            let op = |stream| {
                // SAFETY: the ranges as stated above, on the stream `run` gives.
                unsafe {
                    driver::memset_async(
                        self.device_ptr(),
                        sealed::Sealed::pattern(value),
                        self.len(),
                        stream,
                    )
                }
            };
            let touched = Touched::placed(placed, &spans);
            // SAFETY: as stated above.
            unsafe { synchronous::run(ctx, completion, Access::Device, touched, op) }
        })
    }
}

impl<T> fmt::Debug for DeviceSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceSlice<{}>({:#x}, len {})",
            std::any::type_name::<T>(),
            self.device_ptr(),
            self.len()
        )
    }
}

impl<'ctx, T, R: RangeBounds<usize>> Index<R> for DeviceSlice<'ctx, T> {
    type Output = DeviceSlice<'ctx, T>;

    /// # Panics
    /// If the range is out of bounds, like slice indexing.
    fn index(&self, range: R) -> &Self::Output {
        let len = self.len();
        match self.get(range) {
            Some(view) => view,
            None => out_of_range(len),
        }
    }
}

impl<'ctx, T, R: RangeBounds<usize>> IndexMut<R> for DeviceSlice<'ctx, T> {
    fn index_mut(&mut self, range: R) -> &mut Self::Output {
        let len = self.len();
        match self.get_mut(range) {
            Some(view) => view,
            None => out_of_range(len),
        }
    }
}

#[cold]
#[track_caller]
fn out_of_range(len: usize) -> ! {
    panic!("DeviceSlice: range out of bounds for a view of {len} elements")
}

/// Runs a synchronous memory operation on the memory at `ptr` with the memory's own
/// context current (`CU_POINTER_ATTRIBUTE_CONTEXT`), whatever is current on the calling
/// thread: a nested context of another device, or none (a scoped worker that did not
/// `enter`). The driver queues a "synchronous" fill or device copy on the current
/// context's legacy stream, and the crate completes it there (`legacy`): running in the
/// memory's own context makes that the right stream by construction. Memory the driver ties
/// to no context (of a pool, or a module's global variable) runs in the current context,
/// which must exist (or the device's primary context).
///
/// `op` is told which context it runs in: the memory's own, or the calling thread's current
/// one (alive while `op` runs: a brand covers the memory's context, and a current context
/// stays current), or `None` where the device's primary context is retained for `op` alone
/// (no staging and no sync stream is kept for it); and how a write into the memory is
/// completed: a record of the memory's own context, a record of the current context only
/// where it has an event already (another library may have made it current), a wait on the
/// host where the host can read the memory directly (managed or host memory) or the context
/// is retained for `op` alone (in the current context, a staging is kept only where a scope
/// of the crate holds it: `Completion::held`); and whether the memory can be placed (memory
/// of a pool, never a module global: its accesses are then ordered by their spans, else as
/// touching anything, `span::Touched`).
#[inline]
fn in_memory_context_with<T>(
    ptr: CUdeviceptr,
    op: impl FnOnce(Option<NonNull<cuda_driver_sys::CUctx_st>>, Completion, bool) -> Result<T>,
) -> Result<T> {
    let info = driver::pointer_info(ptr)?;
    let placed = info.pooled;
    if let Some(ctx) = std::ptr::NonNull::new(info.context) {
        // the memory's own context is one the crate entered (its allocation, or memory
        // adopted in the guard's own context)
        let completion = match info.host_visible {
            true => Completion::HostWait,
            false => Completion::Record,
        };
        // while a device is partitioned (one atomic load otherwise): the driver reports the
        // device's primary context for memory a partition allocated outside its pools
        if !context::confined::none_partitioned() {
            if let Some(here) = partition_instead(ctx, info.device)? {
                return op(Some(here), completion, placed);
            }
        }
        // SAFETY: the memory's context is alive while the memory is (the brand).
        return unsafe { context::in_context(ctx, || op(Some(ctx), completion, placed)) };
    }
    // Memory of a pool (the device's, not a context's) or a module global.
    let current = driver::ctx_get_current()?;
    if !current.is_null() && (!info.known || driver::ctx_get_device()? == info.device) {
        let completion = match info.host_visible {
            true => Completion::HostWaitIfKnown,
            false => Completion::RecordIfKnown,
        };
        return op(NonNull::new(current), completion, placed);
    }
    if !info.known {
        return Err(Error::with_detail(
            "DeviceSlice",
            ErrorCode::InvalidContext,
            "this memory belongs to no context the driver names (a module global): make its context current first (SharedContext::enter)",
        ));
    }
    // No context of the memory's device is current: use the device's primary context,
    // except while the device is partitioned (a scoped thread of a partitioned closure
    // that entered no partition, holding a partition's buffer): the primary context's
    // work would run on any SM, outside every partition.
    let device = info.device;
    context::confined::refuse_partitioned(CALL_PRIMARY, device)?;
    let primary = driver::primary_ctx_retain(device)?;
    let primary = driver::non_null("cuDevicePrimaryCtxRetain", primary);
    // SAFETY: just retained, released below.
    let result = primary.and_then(|ctx| unsafe {
        context::in_context(ctx, || op(None, Completion::HostWait, placed))
    });
    // SAFETY: balances the retain above; nothing of the primary context is kept.
    let released = unsafe { driver::primary_ctx_release(device) };
    crate::context::teardown::keep_both(result, released)
}

/// Where a device is partitioned, the context a synchronous operation on memory the driver
/// says is `ctx`'s (of `device`) runs in instead of `ctx`: the partition current on this
/// thread, if it is of `device` (the driver reports a partition's own memory outside its
/// pools, `cuMemAllocManaged` or `cuMemAllocPitch`, as the primary context's, measured on
/// CUDA 13.0: `tests/partitions.rs`), else `None` (run in `ctx`) unless `device` is being
/// partitioned: its contexts but the partitions run work on any SM, so that is refused
/// (`NotPermitted`), as entering them is.
#[cold]
#[inline(never)]
fn partition_instead(
    ctx: NonNull<cuda_driver_sys::CUctx_st>,
    device: std::ffi::c_int,
) -> Result<Option<NonNull<cuda_driver_sys::CUctx_st>>> {
    let current = driver::ctx_get_current()?;
    if current == ctx.as_ptr() {
        return Ok(None);
    }
    if context::confined::is_partition(current) && driver::ctx_get_device()? == device {
        return Ok(NonNull::new(current));
    }
    context::confined::refuse_partitioned(CALL_PRIMARY, device)?;
    Ok(None)
}

/// The call named when the primary-context fallback of [`in_memory_context_with`] is
/// refused.
const CALL_PRIMARY: &str = "DeviceSlice (the device's primary context)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Invalid;
    use crate::memory::{checked_byte_len, empty_address};

    #[test]
    fn chunks_of_zero_sized_elements_work_like_slice_chunks() {
        // SAFETY: zero-sized elements: the view claims no device bytes.
        let huge = unsafe {
            DeviceSlice::<'static, ()>::from_raw_parts(empty_address::<()>(), usize::MAX)
        };
        let chunks = huge.chunks(2);
        assert_eq!(chunks.len(), usize::MAX.div_ceil(2));
        let last = huge.chunks(usize::MAX - 1).next_back().unwrap();
        assert_eq!(last.len(), 1);
        assert_eq!(huge.chunks(usize::MAX).len(), 1);
        // SAFETY: as above.
        let huge_mut = unsafe {
            DeviceSlice::<'static, ()>::from_raw_parts_mut(empty_address::<()>(), usize::MAX)
        };
        assert_eq!(huge_mut.chunks_mut(3).next_back().unwrap().len(), 3);
    }

    #[test]
    fn copies_refuse_differing_lengths_before_the_driver() {
        // SAFETY: a view that is never dereferenced: every call below that could reach the
        // driver fails its check first.
        let dst = unsafe { DeviceSlice::<'static, u32>::from_raw_parts_mut(0x1000, 4) };
        // SAFETY: as above, disjoint from `dst`.
        let src = unsafe { DeviceSlice::<'static, u32>::from_raw_parts(0x2000, 3) };
        let e = dst.copy_from_host(&[1, 2, 3]).unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("copy_from_host", ErrorCode::InvalidInput)
        );
        assert_eq!(
            e.invalid(),
            Some(&Invalid::LengthMismatch {
                expected: 4,
                found: 3
            })
        );
        assert_eq!(
            e.to_string(),
            "copy_from_host failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): the lengths differ: 4 expected, 3 found"
        );
        let e = dst.copy_to_host(&mut [0; 5]).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&Invalid::LengthMismatch {
                expected: 5,
                found: 4
            })
        );
        let e = dst.copy_from_device(src).unwrap_err();
        assert_eq!(
            (e.call(), e.invalid()),
            (
                "copy_from_device",
                Some(&Invalid::LengthMismatch {
                    expected: 4,
                    found: 3
                })
            )
        );
        assert!(src.split_at_checked(4).is_none());
        let (left, right) = src.split_at_checked(3).unwrap();
        assert_eq!((left.len(), right.len()), (3, 0));
        assert!(dst.split_at_mut_checked(5).is_none());
        assert!(dst.split_at_mut_checked(2).is_some());
        // the indexing-like forms panic, naming the call and the range
        let panicked = std::panic::catch_unwind(|| {
            // SAFETY: as above.
            let v = unsafe { DeviceSlice::<'static, u32>::from_raw_parts(0x2000, 3) };
            let _ = v.split_at(4);
        })
        .unwrap_err();
        assert_eq!(
            panicked.downcast_ref::<String>().map(String::as_str),
            Some("DeviceSlice::split_at: the range 4..4 is out of bounds for length 3")
        );
        let panicked = std::panic::catch_unwind(|| {
            // SAFETY: as above.
            let v = unsafe { DeviceSlice::<'static, u32>::from_raw_parts(0x2000, 3) };
            let _ = v.chunks(0);
        })
        .unwrap_err();
        assert_eq!(
            panicked.downcast_ref::<String>().map(String::as_str),
            Some("DeviceSlice::chunks: chunk size must be non-zero")
        );
    }

    #[test]
    fn chunks_cover_the_view_exactly() {
        // SAFETY: a view that is never dereferenced: only addresses are computed.
        let v = unsafe { DeviceSlice::<'static, u32>::from_raw_parts(0x1000, 10) };
        let parts: Vec<(CUdeviceptr, usize)> =
            v.chunks(4).map(|c| (c.device_ptr(), c.len())).collect();
        assert_eq!(parts, [(0x1000, 4), (0x1010, 4), (0x1020, 2)]);
        assert_eq!(bounds(&(2..=3), 10), Some((2, 4)));
        assert_eq!(bounds(&(..11), 10), None);
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 5..4;
        assert_eq!(bounds(&reversed, 10), None);
        assert_eq!(bounds(&(usize::MAX..), 10), None);
        assert_eq!(
            checked_byte_len::<u64>("x", usize::MAX / 4)
                .unwrap_err()
                .call(),
            "x"
        );
    }
}
