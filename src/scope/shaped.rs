//! The 2D and 3D copies of a scope: pitched buffers ([`DeviceBuffer2D`],
//! [`DeviceBuffer3D`](crate::memory::DeviceBuffer3D)) to and from the host and each other,
//! queued on the scope's stream, destination first. A 3D copy's device side is all of a
//! buffer or a box of it ([`Part3D`], [`Part3DMut`]): one method per kind of copy.

use super::StreamScope;
use crate::context::StreamKind;
use crate::driver::{self, Copy3D, Side2D};
use crate::error::Result;
use crate::memory::pitched::{DeviceBuffer2D, host_pitch, host_rows};
use crate::memory::{DeviceCopy, Part3D, Part3DMut};
use crate::span::Span;

impl<'scope, 'ctx, K: StreamKind> StreamScope<'scope, '_, 'ctx, K> {
    /// Queues `copy` on the scope's stream (`cuMemcpy3DAsync`), after the waits a
    /// multi-stream scope needs for `spans`, the device memory it touches.
    ///
    /// # Safety
    /// `copy` is a plan of a `DeviceBuffer3D` (checked), and both of its sides stay
    /// borrowed for `'scope` (the one it writes exclusively).
    unsafe fn queue_3d(&'scope self, copy: &Copy3D, spans: &[Span]) -> Result<()> {
        if copy.is_empty() {
            return Ok(());
        }
        let stream = self.stream().raw();
        self.ordered(spans, None, || {
            // SAFETY: the plan checked both sides; they stay borrowed (host memory unmodified)
            // until the scope synchronizes the stream, which is alive (borrowed); `ordered`
            // orders the scope's other streams around it.
            unsafe { driver::memcpy_3d_async(copy, stream) }
        })
    }

    /// Queues a 3D copy of a host volume from `src`, rows `row_len` elements and slices
    /// `slice_rows` rows apart (from `src[0]`), into `dst` (`cuMemcpy3DAsync`): all of a
    /// buffer (`&mut buffer`) or a box of it (`buffer.region_mut(r)`), whose extent the
    /// volume has.
    ///
    /// # Errors
    /// If the region is not inside its buffer, or `src` does not hold the volume (before
    /// any driver call).
    pub fn copy_3d_from_host<T: DeviceCopy>(
        &'scope self,
        dst: impl Into<Part3DMut<'scope, 'ctx, T>>,
        src: &'scope [T],
        row_len: usize,
        slice_rows: usize,
    ) -> Result<()> {
        let dst = dst.into();
        let copy = dst.plan_from_host("copy_3d_from_host", src, row_len, slice_rows)?;
        // SAFETY: `dst`'s plan; `dst`'s buffer is borrowed exclusively and `src` shared for
        // 'scope.
        unsafe { self.queue_3d(&copy, &[dst.span()]) }
    }

    /// Queues a 3D copy of `src`, all of a buffer (`&buffer`) or a box of it
    /// (`buffer.region(r)`), into `dst` (from `dst[0]`), rows `row_len` elements and slices
    /// `slice_rows` rows apart (`cuMemcpy3DAsync`); `dst` is complete once the scope has
    /// returned.
    ///
    /// # Errors
    /// If the region is not inside its buffer, or `dst` cannot hold the volume (before any
    /// driver call).
    pub fn copy_3d_to_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut [T],
        row_len: usize,
        slice_rows: usize,
        src: impl Into<Part3D<'scope, 'ctx, T>>,
    ) -> Result<()> {
        let src = src.into();
        let copy = src.plan_to_host("copy_3d_to_host", dst, row_len, slice_rows)?;
        // SAFETY: `src`'s plan; `dst` is borrowed exclusively (any bytes are a valid `T`)
        // and `src`'s buffer shared for 'scope.
        unsafe { self.queue_3d(&copy, &[src.span()]) }
    }

    /// Queues a 3D copy of `src` into `dst` (`cuMemcpy3DAsync`), each all of a buffer
    /// (`&mut buffer`, `&buffer`) or a box of it (`buffer.region_mut(r)`,
    /// `buffer.region(r)`), of one extent. The source takes only the shared forms, so a
    /// swapped call does not compile.
    ///
    /// # Errors
    /// If a region is not inside its buffer, or the extents differ (before any driver
    /// call).
    pub fn copy_3d_from_device<T: DeviceCopy>(
        &'scope self,
        dst: impl Into<Part3DMut<'scope, 'ctx, T>>,
        src: impl Into<Part3D<'scope, 'ctx, T>>,
    ) -> Result<()> {
        let (dst, src) = (dst.into(), src.into());
        let copy = dst.plan_from_device("copy_3d_from_device", &src)?;
        // SAFETY: `dst`'s plan; `dst`'s buffer is borrowed exclusively and `src`'s shared
        // for 'scope (two distinct allocations).
        unsafe { self.queue_3d(&copy, &[dst.span(), src.span()]) }
    }
}

impl<'scope, 'env, 'ctx, K: StreamKind> StreamScope<'scope, 'env, 'ctx, K> {
    /// Queues a 2D copy of `dst.height()` rows of `dst.width()` elements from `src`, rows
    /// `row_len` elements apart, into `dst` (`cuMemcpy2DAsync`).
    ///
    /// # Errors
    /// [`Invalid::OutOfBounds`](crate::Invalid::OutOfBounds) if `src` does not hold the rows
    /// (before any driver call), [`Invalid::Argument`](crate::Invalid::Argument) if
    /// `row_len` is less than the width.
    pub fn copy_2d_from_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut DeviceBuffer2D<'ctx, T>,
        src: &'scope [T],
        row_len: usize,
    ) -> Result<()> {
        host_rows(
            "copy_2d_from_host",
            src.len(),
            dst.width(),
            row_len,
            dst.height(),
        )?;
        let (w, h) = dst.extent();
        if w == 0 || h == 0 {
            return Ok(());
        }
        let host = Side2D::Host(
            src.as_ptr().cast(),
            host_pitch::<T>("copy_2d_from_host", row_len)?,
        );
        self.ordered(&[dst.span(true)], None, || {
            // SAFETY: both sides hold `h` rows of `w` bytes at their pitch (checked), stay
            // borrowed (the host side unmodified) until the scope synchronizes.
            unsafe { driver::memcpy_2d_async(dst.side(), host, w, h, self.stream.raw()) }
        })
    }

    /// Queues a 2D copy of `src` into `dst`, rows `row_len` elements apart
    /// (`cuMemcpy2DAsync`); `dst` is complete once the scope has returned.
    ///
    /// # Errors
    /// [`Invalid::OutOfBounds`](crate::Invalid::OutOfBounds) if `dst` cannot hold the rows
    /// (before any driver call), [`Invalid::Argument`](crate::Invalid::Argument) if
    /// `row_len` is less than the width.
    pub fn copy_2d_to_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut [T],
        row_len: usize,
        src: &'scope DeviceBuffer2D<'ctx, T>,
    ) -> Result<()> {
        host_rows(
            "copy_2d_to_host",
            dst.len(),
            src.width(),
            row_len,
            src.height(),
        )?;
        let (w, h) = src.extent();
        if w == 0 || h == 0 {
            return Ok(());
        }
        let host = Side2D::HostMut(
            dst.as_mut_ptr().cast(),
            host_pitch::<T>("copy_2d_to_host", row_len)?,
        );
        self.ordered(&[src.span(false)], None, || {
            // SAFETY: as above; `dst` is borrowed exclusively until the scope synchronizes,
            // and any bytes are a valid `T`.
            unsafe { driver::memcpy_2d_async(host, src.side(), w, h, self.stream.raw()) }
        })
    }
}
