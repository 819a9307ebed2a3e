//! Streams ([`Stream`]) and their scopes ([`StreamScope`]), where all asynchronous work
//! happens.
//!
//! # The rule for asynchronous work
//!
//! Every asynchronous operation (copies, fills, stream-ordered allocation, kernel launches)
//! is queued through a [`StreamScope`], which [`Stream::scope`] hands to a closure. The
//! scope borrows every buffer and host slice an operation touches for the whole scope
//! (`'scope`), and `Stream::scope` synchronizes the stream before it returns, also when the
//! closure panics. So, checked by the borrow checker:
//!
//! * device memory cannot be freed while queued work still uses it (dropping it needs the
//!   borrow to end, which is after the synchronization);
//! * host memory, pageable or page-locked ([`PinnedBuffer`](crate::PinnedBuffer), or a
//!   plain `Vec` that some other code registered with `cuMemHostRegister`), cannot be
//!   freed, read or written by the host while a copy engine still reads or writes it;
//! * the same buffer cannot be written by two streams' scopes at once.
//!
//! The synchronization happens in `Stream::scope` itself, not in a destructor, so
//! `mem::forget` cannot skip it (the pattern of [`std::thread::scope`]). Because of this
//! rule a plain `&[T]` is a sound source for an asynchronous copy even when it happens to
//! be page-locked, with no run-time check.
//!
//! A scope's handle, and the [`DeviceRef`]/[`DeviceMut`] views bound to it, cannot leave
//! the closure or be used by another scope: the scope's lifetime is invariant and
//! higher-ranked, like a context's brand.

use std::cell::RefCell;
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::{Deref, RangeBounds};
use std::ptr::NonNull;

use cuda_driver_sys::CUstream_st;

use crate::context::{Brand, ContextGuard};
use crate::driver::{self, CUdeviceptr, CUstream, Pattern};
use crate::error::{Error, ErrorCode, Result};
use crate::event::Event;
use crate::memory::{DeviceBuffer, DeviceCopy, DeviceSlice, Memset, check_lengths};
use crate::module::{Kernel, KernelArgs, KernelParams, LaunchConfig, launch_raw};

/// How a stream relates to the legacy default stream (`CU_STREAM_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StreamFlags {
    /// Work on the stream waits for, and is waited for by, the legacy default stream.
    #[default]
    Default,
    /// No implicit synchronization with the legacy default stream (`CU_STREAM_NON_BLOCKING`).
    NonBlocking,
}

impl StreamFlags {
    fn bits(self) -> u32 {
        match self {
            StreamFlags::Default => 0,
            StreamFlags::NonBlocking => 1,
        }
    }
}

/// A stream of the context branded `'ctx`: an ordered queue of GPU work. One pointer wide,
/// `Send` and `Sync` (the driver's stream calls are thread-safe and need no current
/// context), destroyed when dropped (work still queued finishes first, in the driver).
pub struct Stream<'ctx> {
    raw: NonNull<CUstream_st>,
    _brand: Brand<'ctx>,
}

// SAFETY: a stream handle may be used from any thread; the driver serialises its queue.
unsafe impl Send for Stream<'_> {}
// SAFETY: every method takes `&self` and is a thread-safe driver call on the handle; the
// mutable state of a scope lives in `StreamScope`, which is not `Sync`.
unsafe impl Sync for Stream<'_> {}

impl<'ctx> Stream<'ctx> {
    /// Creates a stream with the lowest priority.
    pub fn new(ctx: ContextGuard<'ctx>, flags: StreamFlags) -> Result<Self> {
        Self::create(ctx, flags, 0)
    }

    /// Creates a stream with `priority`, which must lie in the context's
    /// [`stream_priority_range`](ContextGuard::stream_priority_range) (lower numbers run
    /// first). The driver would silently clamp an out-of-range priority; this is an error
    /// instead, before the stream is created.
    pub fn with_priority(
        ctx: ContextGuard<'ctx>,
        flags: StreamFlags,
        priority: i32,
    ) -> Result<Self> {
        let range = ctx.stream_priority_range()?;
        if !range.contains(priority) {
            return Err(Error::with_detail(
                "Stream::with_priority",
                ErrorCode::InvalidValue,
                format!(
                    "priority {priority} is outside the context's range {} (highest) to {} (lowest)",
                    range.greatest, range.least
                ),
            ));
        }
        Self::create(ctx, flags, priority)
    }

    fn create(ctx: ContextGuard<'ctx>, flags: StreamFlags, priority: i32) -> Result<Self> {
        // The stream belongs to the current context: make it `ctx`'s.
        let raw = ctx.with_current(|| driver::stream_create(flags.bits(), priority))?;
        let raw = driver::non_null("cuStreamCreateWithPriority", raw)?;
        Ok(Stream {
            raw,
            _brand: PhantomData,
        })
    }

    /// The driver's handle.
    #[inline]
    pub fn as_raw(&self) -> CUstream {
        self.raw.as_ptr()
    }

    /// Waits until all work queued on the stream has finished (`cuStreamSynchronize`).
    #[inline]
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the brand keeps the stream's context, and `self` the stream, alive.
        unsafe { driver::stream_synchronize(self.as_raw()) }
    }

    /// Whether all queued work has finished (`cuStreamQuery`): `true` idle, `false` busy.
    pub fn is_idle(&self) -> Result<bool> {
        // SAFETY: as in `synchronize`.
        unsafe { driver::stream_query(self.as_raw()) }
    }

    /// Makes work queued on this stream after this call wait until `event` has completed
    /// (`cuStreamWaitEvent`). The event must be of the same context.
    pub fn wait_event(&self, event: &Event<'ctx>) -> Result<()> {
        // SAFETY: both handles are alive and branded with the same context.
        unsafe { driver::stream_wait_event(self.as_raw(), event.as_raw()) }
    }

    /// The stream's priority.
    pub fn priority(&self) -> Result<i32> {
        // SAFETY: as in `synchronize`.
        unsafe { driver::stream_priority(self.as_raw()) }
    }

    /// The stream's flags.
    pub fn flags(&self) -> Result<StreamFlags> {
        // SAFETY: as in `synchronize`.
        let bits = unsafe { driver::stream_flags(self.as_raw()) }?;
        Ok(if bits & 1 != 0 {
            StreamFlags::NonBlocking
        } else {
            StreamFlags::Default
        })
    }

    /// Opens a scope for asynchronous work on this stream, runs `f` with it, then
    /// synchronizes the stream (also if `f` panics, while the panic unwinds) before returning. See the
    /// [module documentation](crate::stream) for why this makes asynchronous work sound.
    ///
    /// A failure of the final synchronization (for example an illegal address in a kernel)
    /// becomes `E::from(error)` when `f` returned `Ok`.
    ///
    /// ```no_run
    /// use cuda_brand::{with_context, ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags};
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
    ///     let host = PinnedBuffer::from_slice(ctx, &[1.0f32; 1024])?;
    ///     let mut device_copy = DeviceBuffer::zeroed(ctx, 1024)?;
    ///     let mut back = vec![0.0f32; 1024];
    ///     stream.scope(|s| {
    ///         let d = s.bind_mut(&mut device_copy);
    ///         s.copy_to_device(d, &host)?;
    ///         s.copy_to_host(&mut back, d)?;
    ///         Ok(())
    ///     })?; // synchronized here: `back` is complete, `host` and `device_copy` free again
    ///     assert_eq!(back, vec![1.0; 1024]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope<'env, R, E, F>(&'env self, f: F) -> Result<R, E>
    where
        F: for<'scope> FnOnce(&'scope StreamScope<'scope, 'env, 'ctx>) -> Result<R, E>,
        E: From<Error>,
    {
        let scope = StreamScope::open(self);
        let on_unwind = FinishOnUnwind(&[&scope]);
        let outcome = f(&scope);
        std::mem::forget(on_unwind);
        finish_scopes(outcome, &[&scope])
    }

    /// Like [`Stream::scope`] over two streams at once: the two scopes share one lifetime,
    /// so a buffer bound in one can be used by operations on the other, and both streams
    /// are synchronized before this returns. The streams run concurrently: where one
    /// stream's work needs the other's results, order them with an [`Event`] (record on
    /// one, [`wait_event`](Stream::wait_event) on the other).
    ///
    /// ```no_run
    /// use cuda_brand::{with_context, ContextFlags, Device, DeviceBuffer, Event, EventFlags, Stream, StreamFlags};
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let (a, b) = (Stream::new(ctx, StreamFlags::NonBlocking)?, Stream::new(ctx, StreamFlags::NonBlocking)?);
    ///     let done = Event::new(ctx, EventFlags::new().disable_timing(true))?;
    ///     let mut buf = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
    ///     let mut host = vec![0u32; 1 << 20];
    ///     a.scope_with(&b, |sa, sb| {
    ///         let d = sa.bind_mut(&mut buf);
    ///         sa.fill(d, 7)?;
    ///         done.record(&a)?;
    ///         sb.wait_event(&done)?; // b's copy starts after a's fill
    ///         sb.copy_to_host(&mut host, d)?;
    ///         Ok(())
    ///     })?;
    ///     assert!(host.iter().all(|&x| x == 7));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_with<'env, R, E, F>(&'env self, other: &'env Stream<'ctx>, f: F) -> Result<R, E>
    where
        F: for<'scope> FnOnce(
            &'scope StreamScope<'scope, 'env, 'ctx>,
            &'scope StreamScope<'scope, 'env, 'ctx>,
        ) -> Result<R, E>,
        E: From<Error>,
    {
        let (first, second) = (StreamScope::open(self), StreamScope::open(other));
        let on_unwind = FinishOnUnwind(&[&first, &second]);
        let outcome = f(&first, &second);
        std::mem::forget(on_unwind);
        finish_scopes(outcome, &[&first, &second])
    }
}

/// Ends scopes whose closure returned `outcome`: see [`end_scopes`]. Returns the closure's
/// result, or the first error of the ending if the closure returned `Ok`.
#[inline]
fn finish_scopes<R, E: From<Error>>(
    outcome: Result<R, E>,
    scopes: &[&StreamScope<'_, '_, '_>],
) -> Result<R, E> {
    let finished = end_scopes(scopes);
    match outcome {
        Ok(value) => finished.map(|()| value).map_err(E::from),
        Err(e) => Err(e),
    }
}

/// Synchronizes every scope's stream, then frees the scopes' allocations (all streams
/// first: an allocation of one scope may be used by another's stream).
fn end_scopes(scopes: &[&StreamScope<'_, '_, '_>]) -> Result<()> {
    let mut finished = Ok(());
    for scope in scopes {
        // SAFETY: the stream is alive (borrowed by the scope).
        finished = finished.and(unsafe { driver::stream_synchronize(scope.stream.as_raw()) });
    }
    for scope in scopes {
        finished = finished.and(scope.free_allocations());
    }
    finished
}

/// Ends the scopes if their closure panics: the synchronization happens while the panic
/// unwinds, after the closure's frame (and every borrow it held) is gone from the stack but
/// before anything the scope borrowed can be dropped by the caller. Local to
/// `Stream::scope`, so user code cannot `mem::forget` it; it never panics.
struct FinishOnUnwind<'a, 'scope, 'env, 'ctx>(&'a [&'a StreamScope<'scope, 'env, 'ctx>]);

impl Drop for FinishOnUnwind<'_, '_, '_, '_> {
    fn drop(&mut self) {
        let _ = end_scopes(self.0);
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        // SAFETY: the stream is ours and unused from now on (scopes borrow it, so none is
        // open). Work still queued completes before the driver releases the stream. An
        // error cannot be reported from `drop`; the context's destruction reclaims it.
        let _ = unsafe { driver::stream_destroy(self.as_raw()) };
    }
}

impl fmt::Debug for Stream<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Stream").field(&self.raw).finish()
    }
}

/// An allocation a scope made, freed when the scope ends.
enum Allocation {
    /// From the stream's memory pool (`cuMemAllocAsync`): freed in stream order.
    Pool(CUdeviceptr),
    /// From `cuMemAlloc` (devices without memory pools): freed after the synchronization.
    Plain(CUdeviceptr),
}

/// Asynchronous work on one stream, open for the length of a [`Stream::scope`] closure.
///
/// Every operation borrows what it touches for `'scope`, the whole scope; use
/// [`StreamScope::bind_mut`] to write one buffer in several operations of the scope.
/// `'env` is the borrow of the stream. Not `Send`: it stays on the thread that opened it.
pub struct StreamScope<'scope, 'env: 'scope, 'ctx> {
    stream: &'env Stream<'ctx>,
    allocations: RefCell<Vec<Allocation>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'ctx> Deref for StreamScope<'_, '_, 'ctx> {
    type Target = Stream<'ctx>;

    /// The scope's stream: its queries, events and priority are available in the scope.
    fn deref(&self) -> &Stream<'ctx> {
        self.stream
    }
}

impl fmt::Debug for StreamScope<'_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamScope")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

/// Read access to device memory for the length of a scope: a `Copy` handle that a scope's
/// operations accept wherever they read device memory. Made from `&DeviceSlice`,
/// `&DeviceBuffer` or a [`DeviceMut`] of the same scope.
pub struct DeviceRef<'scope, 'ctx, T> {
    ptr: CUdeviceptr,
    len: usize,
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
    _brand: Brand<'ctx>,
    _elem: PhantomData<*const T>,
}

/// Write access to device memory for the length of a scope: a `Copy` handle, so one
/// buffer can be written by several operations of the same stream (which run in order).
/// Made by [`StreamScope::bind_mut`], [`StreamScope::alloc_zeroed`], or from a
/// `&mut DeviceSlice` / `&mut DeviceBuffer` for a single use.
pub struct DeviceMut<'scope, 'ctx, T> {
    ptr: CUdeviceptr,
    len: usize,
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
    _brand: Brand<'ctx>,
    _elem: PhantomData<*mut T>,
}

macro_rules! scoped_view {
    ($name:ident) => {
        impl<T> Clone for $name<'_, '_, T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<'_, '_, T> {}

        impl<T> $name<'_, '_, T> {
            /// The number of elements.
            #[inline]
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether there are no elements.
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The device address.
            #[inline]
            pub fn as_device_ptr(&self) -> CUdeviceptr {
                self.ptr
            }

            #[inline]
            fn bytes(&self) -> usize {
                self.len * size_of::<T>()
            }

            /// The elements in `range`, as a handle of the same kind.
            ///
            /// # Panics
            /// If the range is out of bounds.
            #[track_caller]
            pub fn slice(self, range: impl RangeBounds<usize>) -> Self {
                let Some((start, end)) = crate::memory::bounds(&range, self.len) else {
                    panic!(
                        "{}::slice: range out of bounds for {} elements",
                        stringify!($name),
                        self.len
                    )
                };
                Self::new(
                    self.ptr + (start * size_of::<T>()) as CUdeviceptr,
                    end - start,
                )
            }
        }

        impl<T> fmt::Debug for $name<'_, '_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    "{}({:#x}, len {})",
                    stringify!($name),
                    self.ptr,
                    self.len
                )
            }
        }
    };
}
scoped_view!(DeviceRef);
scoped_view!(DeviceMut);

impl<'scope, 'ctx, T> DeviceRef<'scope, 'ctx, T> {
    #[inline]
    fn new(ptr: CUdeviceptr, len: usize) -> Self {
        DeviceRef {
            ptr,
            len,
            _scope: PhantomData,
            _brand: PhantomData,
            _elem: PhantomData,
        }
    }
}

impl<'scope, 'ctx, T> DeviceMut<'scope, 'ctx, T> {
    #[inline]
    fn new(ptr: CUdeviceptr, len: usize) -> Self {
        DeviceMut {
            ptr,
            len,
            _scope: PhantomData,
            _brand: PhantomData,
            _elem: PhantomData,
        }
    }

    /// The same memory, for reading.
    #[inline]
    pub fn as_ref(self) -> DeviceRef<'scope, 'ctx, T> {
        DeviceRef::new(self.ptr, self.len)
    }
}

impl<'scope, 'ctx, T> From<&'scope DeviceSlice<'ctx, T>> for DeviceRef<'scope, 'ctx, T> {
    #[inline]
    fn from(s: &'scope DeviceSlice<'ctx, T>) -> Self {
        DeviceRef::new(s.as_device_ptr(), s.len())
    }
}

impl<'scope, 'ctx, T: DeviceCopy> From<&'scope DeviceBuffer<'ctx, T>>
    for DeviceRef<'scope, 'ctx, T>
{
    #[inline]
    fn from(b: &'scope DeviceBuffer<'ctx, T>) -> Self {
        DeviceRef::new(b.as_device_ptr(), b.len())
    }
}

impl<'scope, 'ctx, T> From<DeviceMut<'scope, 'ctx, T>> for DeviceRef<'scope, 'ctx, T> {
    #[inline]
    fn from(m: DeviceMut<'scope, 'ctx, T>) -> Self {
        m.as_ref()
    }
}

impl<'scope, 'ctx, T> From<&'scope mut DeviceSlice<'ctx, T>> for DeviceMut<'scope, 'ctx, T> {
    #[inline]
    fn from(s: &'scope mut DeviceSlice<'ctx, T>) -> Self {
        DeviceMut::new(s.as_device_ptr(), s.len())
    }
}

impl<'scope, 'ctx, T: DeviceCopy> From<&'scope mut DeviceBuffer<'ctx, T>>
    for DeviceMut<'scope, 'ctx, T>
{
    #[inline]
    fn from(b: &'scope mut DeviceBuffer<'ctx, T>) -> Self {
        DeviceMut::new(b.as_device_ptr(), b.len())
    }
}

impl<'scope, 'env, 'ctx> StreamScope<'scope, 'env, 'ctx> {
    /// The scope's stream.
    #[inline]
    pub fn stream(&self) -> &'env Stream<'ctx> {
        self.stream
    }

    /// Binds `slice` to the scope for writing: the returned handle is `Copy`, so several
    /// operations of this scope (which run in order on its stream) can write the same
    /// memory, while the host cannot touch it until the scope has synchronized.
    #[inline]
    pub fn bind_mut<T>(
        &'scope self,
        slice: &'scope mut DeviceSlice<'ctx, T>,
    ) -> DeviceMut<'scope, 'ctx, T> {
        DeviceMut::from(slice)
    }

    /// Queues a copy of `src` from the host into `dst` (`cuMemcpyHtoDAsync`).
    ///
    /// `src` may be any slice: pageable memory, a [`PinnedBuffer`](crate::PinnedBuffer),
    /// or memory registered elsewhere; it stays borrowed until the scope has synchronized.
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    #[inline]
    pub fn copy_to_device<T: DeviceCopy>(
        &'scope self,
        dst: impl Into<DeviceMut<'scope, 'ctx, T>>,
        src: &'scope [T],
    ) -> Result<()> {
        let dst = dst.into();
        check_lengths("copy_to_device", dst.len(), src.len());
        if dst.bytes() == 0 {
            return Ok(());
        }
        // SAFETY: same lengths; both ranges stay borrowed, and the host range unmodified,
        // until the scope synchronizes the stream; the stream is alive (borrowed).
        unsafe {
            driver::memcpy_htod_async(
                dst.ptr,
                src.as_ptr().cast::<c_void>(),
                dst.bytes(),
                self.stream.as_raw(),
            )
        }
    }

    /// Queues a copy of `src` into `dst` on the host (`cuMemcpyDtoHAsync`). `dst` is
    /// complete once the scope has returned.
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    #[inline]
    pub fn copy_to_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut [T],
        src: impl Into<DeviceRef<'scope, 'ctx, T>>,
    ) -> Result<()> {
        let src = src.into();
        check_lengths("copy_to_host", dst.len(), src.len());
        if src.bytes() == 0 {
            return Ok(());
        }
        // SAFETY: same lengths; `dst` is borrowed exclusively until the scope synchronizes,
        // and any bytes are a valid `T` (`DeviceCopy`).
        unsafe {
            driver::memcpy_dtoh_async(
                dst.as_mut_ptr().cast::<c_void>(),
                src.ptr,
                src.bytes(),
                self.stream.as_raw(),
            )
        }
    }

    /// Queues a device-to-device copy (`cuMemcpyDtoDAsync`).
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    pub fn copy<T: DeviceCopy>(
        &'scope self,
        dst: impl Into<DeviceMut<'scope, 'ctx, T>>,
        src: impl Into<DeviceRef<'scope, 'ctx, T>>,
    ) -> Result<()> {
        let (dst, src) = (dst.into(), src.into());
        check_lengths("copy", dst.len(), src.len());
        if dst.bytes() == 0 {
            return Ok(());
        }
        // SAFETY: same lengths, both device ranges borrowed until the scope synchronizes.
        unsafe { driver::memcpy_dtod_async(dst.ptr, src.ptr, dst.bytes(), self.stream.as_raw()) }
    }

    /// Queues a copy from `src`, memory of another context `'peer` (another device, usually),
    /// into `dst`, memory of this scope's context (`cuMemcpyPeerAsync`). `src_ctx` is the
    /// source's guard, so the two brands cannot be swapped; `src` stays borrowed until the
    /// scope has synchronized. Needs no peer access.
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    pub fn copy_from_peer<'peer, T: DeviceCopy>(
        &'scope self,
        dst: impl Into<DeviceMut<'scope, 'ctx, T>>,
        src: &'scope DeviceSlice<'peer, T>,
        src_ctx: ContextGuard<'peer>,
    ) -> Result<()> {
        let dst = dst.into();
        check_lengths("copy_from_peer", dst.len(), src.len());
        if dst.bytes() == 0 {
            return Ok(());
        }
        let stream = self.stream.as_raw();
        // SAFETY: the stream is alive, so is its context.
        let dst_ctx = unsafe { driver::stream_get_ctx(stream) }?;
        // SAFETY: both contexts are alive (brands), each range is memory of its context,
        // both stay borrowed until the scope synchronizes.
        unsafe {
            driver::memcpy_peer_async(
                dst.ptr,
                dst_ctx,
                src.as_device_ptr(),
                src_ctx.as_raw(),
                dst.bytes(),
                stream,
            )
        }
    }

    /// Queues setting every element of `dst` to `value` (`cuMemsetD8/16/32Async`).
    pub fn fill<T: Memset>(
        &'scope self,
        dst: impl Into<DeviceMut<'scope, 'ctx, T>>,
        value: T,
    ) -> Result<()> {
        let dst = dst.into();
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: `len` elements of the pattern's width, borrowed until the scope synchronizes.
        unsafe {
            driver::memset_async(
                dst.ptr,
                crate::memory::sealed::Sealed::pattern(value),
                dst.len,
                self.stream.as_raw(),
            )
        }
    }

    /// Queues a launch of `kernel` (`cuLaunchKernel`) with `args`, one per declared
    /// parameter: `&buffer` or a [`DeviceRef`] for an [`In<T>`](crate::In), `&mut buffer`
    /// or a [`DeviceMut`] for an [`Out<T>`](crate::Out), a number for a scalar. The kernel,
    /// the stream and every buffer share the context brand `'ctx`, and the scope keeps the
    /// kernel's module and every buffer borrowed until the kernel has run.
    ///
    /// The configuration is checked first (zero dimensions, more threads per block or
    /// more dynamic shared memory than the kernel allows): a clear error, no driver call.
    #[inline]
    pub fn launch<P: KernelParams>(
        &'scope self,
        kernel: &'scope Kernel<'_, 'ctx, P>,
        config: LaunchConfig,
        args: impl KernelArgs<'scope, 'ctx, P>,
    ) -> Result<()> {
        kernel.check(&config)?;
        let stream = self.stream.as_raw();
        // SAFETY: the stream is alive and shares the kernel's brand; every buffer argument
        // is borrowed for 'scope, so stays allocated until the scope has synchronized; the
        // parameter layout is the kernel's declared (unsafe-promised) one.
        args.with_params(|params| unsafe { launch_raw(kernel, &config, stream, params) })
    }

    /// Allocates `len` elements in stream order and queues zeroing them; freed in stream
    /// order when the scope ends. See [`StreamScope::alloc`].
    pub fn alloc_zeroed<T: DeviceCopy>(
        &'scope self,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: zeroed below, in stream order, before anything of the scope reads it.
        let buf = unsafe { self.alloc::<T>(len) }?;
        if !buf.is_empty() {
            // SAFETY: the allocation's bytes, in stream order after the allocation.
            unsafe {
                driver::memset_async(buf.ptr, Pattern::D8(0), buf.bytes(), self.stream.as_raw())
            }?;
        }
        Ok(buf)
    }

    /// Allocates `len` elements in stream order (`cuMemAllocAsync`, about 1.5 µs with the
    /// free, against about 94 µs for `cuMemAlloc` and `cuMemFree`), without initialising
    /// them. The memory lives until the scope ends, where it is freed in stream order
    /// (`cuMemFreeAsync`) before the final synchronization. On a device without memory
    /// pools (`cuMemAllocAsync` answers `CUDA_ERROR_NOT_SUPPORTED` where
    /// `MEMORY_POOLS_SUPPORTED` is 0) it comes from `cuMemAlloc` in the stream's context
    /// instead, freed after the synchronization; `CUDA_BRAND_NO_MEMORY_POOLS=1` forces that
    /// path (for tests).
    ///
    /// # Safety
    /// The contents are stale bytes until written (valid values for `DeviceCopy` types,
    /// but possibly another allocation's data).
    pub unsafe fn alloc<T: DeviceCopy>(
        &'scope self,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| {
            Error::with_detail(
                "StreamScope::alloc",
                ErrorCode::InvalidValue,
                format!("{len} elements overflow usize"),
            )
        })?;
        if bytes == 0 {
            return Ok(DeviceMut::new(256, len));
        }
        let mut allocations = self.allocations.borrow_mut();
        // room first, so a failed push cannot leak the allocation; 16 at once, so a scope
        // that allocates does not regrow its list allocation by allocation
        let room = if allocations.capacity() == 0 { 16 } else { 1 };
        allocations.reserve(room);
        // SAFETY: the stream is alive (borrowed for 'env).
        let pooled = match pools_disabled() {
            true => None,
            // SAFETY: the stream is alive (borrowed for 'env).
            false => unsafe { driver::mem_alloc_async(bytes, self.stream.as_raw()) }?,
        };
        let allocation = match pooled {
            Some(ptr) => Allocation::Pool(ptr),
            None => Allocation::Plain(self.with_stream_context(|| driver::mem_alloc(bytes))?),
        };
        let ptr = match allocation {
            Allocation::Pool(p) | Allocation::Plain(p) => p,
        };
        allocations.push(allocation);
        Ok(DeviceMut::new(ptr, len))
    }

    /// Runs `op` with the stream's context current (the fallback allocations without memory
    /// pools are made and freed in it, whatever context is current).
    fn with_stream_context<T>(&self, op: impl FnOnce() -> Result<T>) -> Result<T> {
        // SAFETY: the stream is alive, so is its context (branded).
        let ctx = unsafe { stream_context(self.stream.as_raw()) }?;
        // SAFETY: a live context, as above; `with_current` pushes and pops it if needed.
        let guard = unsafe { ContextGuard::new_unchecked(ctx) };
        guard.with_current(op)
    }

    fn open(stream: &'env Stream<'ctx>) -> Self {
        StreamScope {
            stream,
            allocations: RefCell::new(Vec::new()),
            _scope: PhantomData,
            _env: PhantomData,
        }
    }

    /// Frees the scope's allocations, once every stream of the scope is idle: pool memory
    /// in stream order (`cuMemFreeAsync`), fallback memory with `cuMemFree`. Returns the
    /// first error.
    fn free_allocations(&self) -> Result<()> {
        let stream = self.stream.as_raw();
        let mut first_error = Ok(());
        for a in self.allocations.take() {
            // SAFETY: allocated by this scope; every stream that could use it has finished,
            // and no handle to it outlives the scope.
            let freed = match a {
                // SAFETY: as above, in stream order.
                Allocation::Pool(p) => unsafe { driver::mem_free_async(p, stream) },
                // SAFETY: as above; freed in the context it was allocated in.
                Allocation::Plain(p) => self.with_stream_context(|| unsafe { driver::mem_free(p) }),
            };
            first_error = first_error.and(freed);
        }
        first_error
    }
}

/// Whether stream-ordered allocation is switched off by `CUDA_BRAND_NO_MEMORY_POOLS=1`
/// (read once): scopes then allocate as on a device without memory pools, with `cuMemAlloc`
/// freed after the scope's synchronization. For testing that path on devices that have
/// pools.
#[inline]
fn pools_disabled() -> bool {
    static DISABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DISABLED
        .get_or_init(|| std::env::var_os("CUDA_BRAND_NO_MEMORY_POOLS").is_some_and(|v| v == "1"))
}

/// The context a stream belongs to.
///
/// # Safety
/// `stream` is live.
unsafe fn stream_context(stream: CUstream) -> Result<NonNull<cuda_driver_sys::CUctx_st>> {
    // SAFETY: the caller guarantees the stream.
    let raw = unsafe { driver::stream_get_ctx(stream) }?;
    driver::non_null("cuStreamGetCtx", raw)
}
