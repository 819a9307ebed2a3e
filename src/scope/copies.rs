//! A scope's copies and fills: from and to the host (`copy_to_vec` included), between
//! buffers of its context, from a peer's memory, and prefetches of managed memory.

use std::ffi::c_void;

use super::views::{read_span, write_span};
use super::{Grown, lock, set_vec_len};
use super::{IntoDeviceMut, IntoDeviceRef, StreamScope};
use crate::context::StreamKind;
use crate::driver;
use crate::error::Result;
use crate::launch::sealed::Crate;
use crate::memory::{DeviceCopy, Memset, copy_ends_disjoint, lengths_match};
use crate::span::Span;

impl<'scope, 'env, 'ctx, K: StreamKind> StreamScope<'scope, 'env, 'ctx, K> {
    /// Queues a copy of `src` from the host into `dst` (`cuMemcpyHtoDAsync`).
    ///
    /// `src` may be any slice: pageable memory, a [`PinnedBuffer`](crate::PinnedBuffer),
    /// or memory registered elsewhere; it stays borrowed until the scope has synchronized.
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call):
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::Invalid;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let mut buf = ctx.zeroed::<u32>(4)?;
    ///     let e = ctx.new_stream()?.scope(|s| s.copy_from_host(&mut buf, &[1, 2, 3]));
    ///     assert_eq!(
    ///         e.unwrap_err().invalid(),
    ///         Some(&Invalid::LengthMismatch { expected: 4, found: 3 })
    ///     );
    ///     Ok(())
    /// })
    /// # }
    /// ```
    #[inline]
    pub fn copy_from_host<T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: &'scope [T],
    ) -> Result<()> {
        let dst = dst.into_mut(Crate(()));
        lengths_match("copy_from_host", dst.len(), src.len())?;
        if dst.bytes() == 0 {
            return Ok(());
        }
        self.ordered(&[write_span(&dst)], None, || {
            // SAFETY: same lengths; both ranges stay borrowed, and the host range
            // unmodified, until the scope synchronizes the stream; the stream is alive
            // (borrowed); other streams of the scope are ordered around it by `ordered`.
            unsafe {
                driver::memcpy_htod_async(
                    dst.ptr,
                    src.as_ptr().cast::<c_void>(),
                    dst.bytes(),
                    self.stream.raw(),
                )
            }
        })
    }

    /// Queues a copy of `src` into `dst` on the host (`cuMemcpyDtoHAsync`). `dst` is
    /// complete once the scope has returned.
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    #[inline]
    pub fn copy_to_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut [T],
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let src = src.into_ref(Crate(()));
        lengths_match("copy_to_host", dst.len(), src.len())?;
        if src.bytes() == 0 {
            return Ok(());
        }
        self.ordered(&[read_span(&src)], None, || {
            // SAFETY: same lengths; `dst` is borrowed exclusively until the scope
            // synchronizes, and any bytes are a valid `T` (`DeviceCopy`).
            unsafe {
                driver::memcpy_dtoh_async(
                    dst.as_mut_ptr().cast::<c_void>(),
                    src.ptr,
                    src.bytes(),
                    self.stream.raw(),
                )
            }
        })
    }

    /// Queues a copy of `src` to the end of `dst` (`cuMemcpyDtoHAsync` into its spare
    /// capacity): once the scope has returned, `dst` is longer by `src.len()` elements and
    /// ends with them. The fast way to bring results back into a new `Vec`: unlike
    /// [`copy_to_host`](StreamScope::copy_to_host) into `vec![0; n]`, nothing is written
    /// twice. `dst` stays borrowed (unreadable) until the scope has synchronized. Its length
    /// grows when the scope's synchronization succeeds, also when the closure returned an
    /// error after queueing the copy (the copy is complete); if synchronizing fails, `dst`
    /// keeps its old length and contents.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.new_stream()?;
    ///     let mut out = Vec::new();
    ///     stream.scope(|s| {
    ///         let d = s.alloc_zeroed::<f32>(1 << 20)?;
    ///         s.fill(d, 1.5)?;
    ///         s.copy_to_vec(&mut out, d.into_ref())
    ///     })?;
    ///     assert_eq!(out, vec![1.5; 1 << 20]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn copy_to_vec<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut Vec<T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let src = src.into_ref(Crate(()));
        if src.bytes() == 0 {
            // nothing to copy: `src` is empty, or its elements are zero-sized
            // SAFETY: all-zero bytes are a valid `T` (`DeviceCopy`: any bytes are).
            dst.resize_with(dst.len() + src.len(), || unsafe { std::mem::zeroed() });
            return Ok(());
        }
        // room in both lists before the copy is queued, so that recording it cannot fail
        dst.reserve(src.len());
        let mut allocations = lock(&self.allocations);
        allocations.grown.reserve(1);
        let old_len = dst.len();
        let spare = dst.spare_capacity_mut();
        self.ordered(&[read_span(&src)], None, || {
            // SAFETY: the spare capacity holds at least `src.len()` elements (reserved
            // above); `dst` is borrowed exclusively until the scope has synchronized, so it
            // is neither read, moved nor reallocated while the copy writes it.
            unsafe {
                driver::memcpy_dtoh_async(
                    spare.as_mut_ptr().cast::<c_void>(),
                    src.ptr,
                    src.bytes(),
                    self.stream.raw(),
                )
            }
        })?;
        allocations.grown.push(Grown {
            vec: std::ptr::from_mut(dst).cast::<()>(),
            len: old_len + src.len(),
            set_len: set_vec_len::<T>,
        });
        Ok(())
    }

    /// Queues a device-to-device copy (`cuMemcpyDtoDAsync`). The two ranges must not
    /// overlap (two views of one bound buffer can): an error before any driver call.
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_from_device<T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let (dst, src) = (dst.into_mut(Crate(())), src.into_ref(Crate(())));
        lengths_match("copy_from_device", dst.len(), src.len())?;
        if dst.bytes() == 0 {
            return Ok(());
        }
        let spans = [write_span(&dst), read_span(&src)];
        copy_ends_disjoint("StreamScope::copy_from_device", &spans[0], &spans[1])?;
        self.ordered(&spans, None, || {
            // SAFETY: same lengths, disjoint (checked above), both device ranges borrowed
            // until the scope synchronizes; other streams are ordered by `ordered`.
            unsafe { driver::memcpy_dtod_async(dst.ptr, src.ptr, dst.bytes(), self.stream.raw()) }
        })
    }

    /// Queues a copy from `src`, memory of another context `'peer` (another device,
    /// usually), into `dst`, memory of this scope's context (`cuMemcpyPeerAsync`).
    /// `src_ctx` is the source's guard, so the two brands cannot be swapped; `src`
    /// (`&buffer` or `&buffer[range]`, shared only, as every source) stays borrowed until
    /// the scope has synchronized. Needs no peer access.
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ, and
    /// [`Invalid::Overlap`](crate::Invalid::Overlap) if the two ranges overlap (two views of
    /// one buffer, with the scope's own guard as `src_ctx`), before any driver call.
    pub fn copy_from_peer<'peer, T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'peer, T>,
        src_ctx: crate::context::ContextGuard<'peer>,
    ) -> Result<()> {
        let (dst, src) = (dst.into_mut(Crate(())), src.into_ref(Crate(())));
        lengths_match("copy_from_peer", dst.len(), src.len())?;
        if dst.bytes() == 0 {
            return Ok(());
        }
        let stream = self.stream.raw();
        // SAFETY: the stream is alive, so is its context.
        let dst_ctx = unsafe { driver::stream_get_ctx(stream) }?;
        // both ends named: the source, memory of another context, may have a pending
        // synchronous write (of any sync stream) that the copy must follow
        let spans = [write_span(&dst), read_span(&src)];
        // `src_ctx` may be this scope's own guard, and a bound view is `Copy`: the two
        // ends can be two views of one buffer (addresses are unified, so memory of two
        // contexts never overlaps)
        copy_ends_disjoint("StreamScope::copy_from_peer", &spans[0], &spans[1])?;
        self.ordered(&spans, None, || {
            // SAFETY: both contexts are alive (brands); each range is memory its context
            // may access (its own, or a peer's through a `PeerAccess` view); both stay
            // borrowed until the scope synchronizes; they are disjoint (checked above), and
            // nothing else writes `src` meanwhile (borrowed shared, or a view of the scope's
            // that no other operation of this copy touches).
            unsafe {
                driver::memcpy_peer_async(
                    dst.ptr,
                    dst_ctx,
                    src.ptr,
                    src_ctx.raw(),
                    dst.bytes(),
                    stream,
                )
            }
        })
    }

    /// Queues setting every element of `dst` to `value` (`cuMemsetD8/16/32Async`).
    pub fn fill<T: Memset>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        value: T,
    ) -> Result<()> {
        let dst = dst.into_mut(Crate(()));
        if dst.bytes() == 0 {
            return Ok(());
        }
        self.ordered(&[write_span(&dst)], None, || {
            // SAFETY: `len` elements of the pattern's width, borrowed until the scope
            // synchronizes; other streams are ordered by `ordered`.
            unsafe {
                driver::memset_async(
                    dst.ptr,
                    crate::memory::sealed::Sealed::pattern(value),
                    dst.len,
                    self.stream.raw(),
                )
            }
        })
    }

    /// Queues migrating managed memory to `to` (`cuMemPrefetchAsync`): the device before a
    /// kernel reads it, the host before the host does (see
    /// [`ManagedBuffer`](crate::ManagedBuffer)). Memory that is not managed is an error from
    /// the driver.
    pub fn prefetch<T: DeviceCopy>(
        &'scope self,
        memory: impl IntoDeviceRef<'scope, 'ctx, T>,
        to: crate::memory::MemoryLocation,
    ) -> Result<()> {
        let memory = memory.into_ref(Crate(()));
        if memory.bytes() == 0 {
            return Ok(());
        }
        // a migration moves the pages: ordered like a write
        let span = Span {
            start: memory.ptr,
            bytes: memory.bytes() as u64,
            write: true,
        };
        self.ordered(&[span], None, || {
            // SAFETY: memory borrowed until the scope synchronizes; the stream is alive.
            unsafe {
                driver::mem_prefetch_async(memory.ptr, memory.bytes(), to.raw(), self.stream.raw())
            }
        })
    }
}
