//! Pitched two-dimensional device memory ([`DeviceBuffer2D`]): rows padded to the device's
//! preferred pitch (`cuMemAllocPitch`), and 2D copies between it and host memory or
//! another 2D buffer (`cuMemcpy2D`), every extent checked against both sides before the
//! driver call.
//!
//! A host image is a slice of `rows * row_len` elements (or more) read `width` elements per
//! row, `row_len` apart: a copy checks `row_len >= width` and that the last row ends inside
//! the slice, and panics with both numbers otherwise (like a length mismatch of the 1D
//! copies), before anything reaches the driver; the `try_` forms of the copies return that
//! error instead.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::DeviceBuffer2D;
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     // a 3 x 2 window of a 5-wide host image
//!     let image: Vec<u16> = (0..10).collect();
//!     let mut tile = DeviceBuffer2D::<u16>::zeroed(ctx, 3, 2)?;
//!     tile.copy_from_host(&image, 5)?;
//!     assert!(tile.pitch_bytes() >= 3 * 2);
//!     assert_eq!(tile.to_vec()?, [0, 1, 2, 5, 6, 7]);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! Three-dimensional pitched memory, with copies of whole volumes and of boxes inside them,
//! is [`DeviceBuffer3D`](crate::DeviceBuffer3D) (module [`pitched3d`](crate::memory::pitched3d)).

use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use super::{DeviceCopy, checked_byte_len, empty_address};
use crate::context::{self, Allocating, Brand, ContextGuard, Part};
use crate::driver::{self, CUdeviceptr, CUstream, Pattern, Side2D};
use crate::error::{Error, Invalid, Result};
use crate::span::Span;
use crate::span::Touched;
use crate::synchronous::{self, Access};

/// `height` rows of `width` elements of `T` in device memory of the context branded
/// `'ctx`, each row `pitch_bytes()` apart (`cuMemAllocPitch`). Freed when dropped.
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: 2D buffers of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::DeviceBuffer2D;
///
/// /// Takes two 2D buffers of one context.
/// fn one_context<'ctx>(_: &DeviceBuffer2D<'ctx, u32>, _: &DeviceBuffer2D<'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = DeviceBuffer2D::<u32>::zeroed(a, 4, 4)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = DeviceBuffer2D::<u32>::zeroed(b, 4, 4)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct DeviceBuffer2D<'ctx, T: DeviceCopy> {
    ptr: CUdeviceptr,
    pitch: usize,
    width: usize,
    height: usize,
    ctx: NonNull<CUctx_st>,
    /// Memory of a setup phase: its context's teardown frees it (see [`crate::phase`]).
    deferred: bool,
    /// Invariant in `'ctx` (the crate's `Brand`). Were it covariant, two owned 2D buffers
    /// of two contexts could be shortened to one brand
    /// (`let mut dst: DeviceBuffer2D<'x, T> = of_a;`), and `dst.copy_from_device(&of_b)`
    /// would copy between contexts.
    _brand: Brand<'ctx>,
    _elem: PhantomData<T>,
}

// SAFETY: owned device memory, used from any thread through the driver in its own context
// (pushed explicitly), and `T: DeviceCopy` owns nothing on the host.
unsafe impl<T: DeviceCopy> Send for DeviceBuffer2D<'_, T> {}
// SAFETY: `&DeviceBuffer2D` only reads the device memory.
unsafe impl<T: DeviceCopy> Sync for DeviceBuffer2D<'_, T> {}

/// Checks that a host slice of `len` elements holds `height` rows of `width` elements,
/// `row_len` apart; an error naming the numbers otherwise.
pub(crate) fn host_rows(
    what: &'static str,
    len: usize,
    width: usize,
    row_len: usize,
    height: usize,
) -> Result<()> {
    if row_len < width {
        return Err(Error::invalid_input(
            what,
            Invalid::argument(format!(
                "a host row of {row_len} elements is shorter than the buffer's width {width}"
            )),
        ));
    }
    let Some(needed) = host_elements([width, height, 1], row_len, height) else {
        return Err(Error::invalid_input(
            what,
            Invalid::TooLarge {
                what: "the host elements the rows reach",
                value: (height as u128 - 1) * row_len as u128 + width as u128,
                max: usize::MAX as u128,
            },
        ));
    };
    if len < needed {
        return Err(Error::invalid_input(
            what,
            Invalid::OutOfBounds {
                start: 0,
                end: needed,
                len,
            },
        ));
    }
    Ok(())
}

/// The check of a 2D device copy: both buffers have the same shape.
fn same_shape(dst: (usize, usize), src: (usize, usize)) -> Result<()> {
    if dst == src {
        return Ok(());
    }
    Err(Error::invalid_input(
        "DeviceBuffer2D::copy_from_device",
        Invalid::ShapeMismatch {
            expected: [dst.0, dst.1, 1],
            found: [src.0, src.1, 1],
        },
    ))
}

/// How many elements of a host slice a copy reaches, from the first: `depth` slices,
/// `slice_rows` rows apart, of `height` rows of `width` elements, `row_len` apart (a 2D
/// image is one slice). `None` if that overflows `usize`.
pub(crate) fn host_elements(
    [width, height, depth]: [usize; 3],
    row_len: usize,
    slice_rows: usize,
) -> Option<usize> {
    if height == 0 || depth == 0 {
        return Some(0);
    }
    (depth - 1)
        .checked_mul(slice_rows)?
        .checked_add(height - 1)?
        .checked_mul(row_len)?
        .checked_add(width)
}

/// The pitch in bytes of host rows `row_len` elements of `T` apart; an error if it
/// overflows `usize` (possible only for a copy of one row, whose pitch the driver still
/// reads).
pub(crate) fn host_pitch<T>(what: &'static str, row_len: usize) -> Result<usize> {
    row_len.checked_mul(size_of::<T>()).ok_or_else(|| {
        Error::invalid_input(
            what,
            Invalid::TooLarge {
                what: "the host rows' pitch in bytes",
                value: row_len as u128 * size_of::<T>() as u128,
                max: usize::MAX as u128,
            },
        )
    })
}

impl<'ctx, T: DeviceCopy> DeviceBuffer2D<'ctx, T> {
    /// Allocates `height` rows of `width` elements, every byte (padding included) zero;
    /// complete when it returns. Made with the setup guard of
    /// [`with_phases`](crate::with_phases), it is freed only by the teardown.
    pub fn zeroed<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        width: usize,
        height: usize,
    ) -> Result<Self> {
        Self::zeroed_for("DeviceBuffer2D::zeroed", ctx, width, height)
    }

    /// [`DeviceBuffer2D::zeroed`], its errors naming `call`.
    pub(crate) fn zeroed_for<P: Allocating, S: Part>(
        call: &'static str,
        ctx: ContextGuard<'ctx, P, S>,
        width: usize,
        height: usize,
    ) -> Result<Self> {
        let row_bytes = checked_byte_len::<T>(call, width)?;
        checked_byte_len::<T>(call, width.saturating_mul(height))?;
        let element = match size_of::<T>() {
            16.. => 16,
            8..=15 => 8,
            _ => 4,
        };
        let (ptr, pitch) = if row_bytes == 0 || height == 0 {
            (empty_address::<T>(), row_bytes)
        } else {
            ctx.with_current(|| driver::mem_alloc_pitch(row_bytes, height, element))?
        };
        let deferred = P::DEFERS_FREES && pitch != 0 && height != 0;
        let buf = DeviceBuffer2D {
            ptr,
            pitch,
            width,
            height,
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
        if buf.bytes() != 0 {
            let ctx = buf.ctx;
            let zero = || {
                // SAFETY: `ctx` is current (`in_context`) and alive (the brand); the
                // allocation's `pitch * height` bytes, device memory owned by `buf` and
                // ordered before every later user by the sync stream's record.
                let op = |s| {
                    // SAFETY: the ranges as stated above, on the stream `run` gives.
                    unsafe { driver::memset_async(buf.ptr, Pattern::D8(0), buf.bytes(), s) }
                };
                // SAFETY: as stated above.
                unsafe {
                    synchronous::run(
                        Some(ctx),
                        synchronous::Completion::Record,
                        Access::Device,
                        Touched::Anything,
                        op,
                    )
                }
            };
            // SAFETY: the brand keeps the context alive.
            unsafe { context::in_context(ctx, zero) }?;
        }
        Ok(buf)
    }

    /// A buffer of `width` elements per row and no rows, at no allocation and of no
    /// context: every copy of it returns before the driver, so tests of the checks that
    /// come first run without a device, and one that got past them would reach nothing.
    #[cfg(test)]
    pub(crate) fn unallocated(width: usize) -> Self {
        DeviceBuffer2D {
            ptr: empty_address::<T>(),
            pitch: width * size_of::<T>(),
            width,
            height: 0,
            ctx: NonNull::dangling(),
            deferred: false,
            _brand: PhantomData,
            _elem: PhantomData,
        }
    }

    /// Elements per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Bytes from one row to the next (at least `width * size_of::<T>()`).
    pub fn pitch_bytes(&self) -> usize {
        self.pitch
    }

    /// The device address of the first row, for the crate's own calls.
    #[inline]
    pub(crate) fn device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The device address of the first row (`CUdeviceptr`); rows are
    /// [`pitch_bytes`](Self::pitch_bytes) apart. Returned once the crate's pending
    /// synchronous operations on the buffer are done: as
    /// [`DeviceSlice::as_device_ptr`](crate::DeviceSlice::as_device_ptr), this call waits on
    /// the host for them first (a synchronous 2D copy into device memory may still run on
    /// the GPU when it returns; the crate orders its own later users after it, not work it
    /// cannot see), so that work given the address afterwards, on any stream, finds them
    /// done. One atomic load while nothing is pending anywhere. Only what is pending when
    /// the call is made: after a later synchronous write, take the address again.
    ///
    /// # Safety
    ///
    /// Taking the address does nothing the caller must check; `unsafe` marks what it allows
    /// behind the borrow checker's back, since a number outlives no borrow. The caller
    /// promises, for every use of the address (a kernel parameter, a driver call): it is
    /// not used after the memory is freed (this buffer dropped); and work given it reads
    /// the memory only while nothing writes it and writes it only while nothing else uses
    /// it, until that work has finished, as the borrow of this buffer would make the
    /// crate's copies and launches do. Where the wait cannot run or fails, the address is
    /// returned all the same, as [`DeviceSlice::as_device_ptr`](crate::DeviceSlice::as_device_ptr)
    /// says.
    #[inline]
    pub unsafe fn as_device_ptr(&self) -> CUdeviceptr {
        if self.bytes() != 0 {
            crate::synchronous::before_raw_escape(Touched::Spans(&[self.span(true)]));
        }
        self.device_ptr()
    }

    /// The allocation's bytes: `pitch * height`.
    fn bytes(&self) -> usize {
        self.pitch * self.height
    }

    fn row_bytes(&self) -> usize {
        self.width * size_of::<T>()
    }

    pub(crate) fn span(&self, write: bool) -> Span {
        Span {
            start: self.ptr,
            bytes: self.bytes() as u64,
            write,
        }
    }

    pub(crate) fn side(&self) -> Side2D {
        Side2D::Device(self.ptr, self.pitch)
    }

    pub(crate) fn extent(&self) -> (usize, usize) {
        (self.row_bytes(), self.height)
    }

    /// Runs `op`, a synchronous copy queued on the stream it is given, in the buffer's
    /// context, completed as `access` says (`synchronous::run`). Nothing for a buffer of
    /// no bytes.
    pub(crate) fn run(
        &self,
        access: Access,
        op: impl FnOnce(CUstream) -> Result<()>,
    ) -> Result<()> {
        if self.row_bytes() == 0 || self.height == 0 {
            return Ok(());
        }
        let ctx = self.ctx;
        // SAFETY: `ctx` is current (`in_context`) and alive (the brand); pitched memory is
        // device memory (`cuMemAllocPitch`), which the host cannot read; `op`'s ranges are
        // its caller's borrows (host memory until `run` returns, device memory ordered by
        // the sync stream's record).
        let ordered = || unsafe {
            synchronous::run(
                Some(ctx),
                synchronous::Completion::Record,
                access,
                Touched::Anything,
                op,
            )
        };
        // SAFETY: the brand keeps the context alive.
        unsafe { context::in_context(ctx, ordered) }
    }

    /// Copies `height` rows of `width` elements from `src`, rows `row_len` elements apart,
    /// into the buffer; complete when it returns.
    ///
    /// # Errors
    /// [`Invalid::OutOfBounds`] if `src` does not hold the rows
    /// (before any driver call), [`Invalid::Argument`] if
    /// `row_len` is less than the width.
    pub fn copy_from_host(&mut self, src: &[T], row_len: usize) -> Result<()> {
        host_rows(
            "DeviceBuffer2D::copy_from_host",
            src.len(),
            self.width,
            row_len,
            self.height,
        )?;
        let (w, h) = self.extent();
        let pitch = host_pitch::<T>("DeviceBuffer2D::copy_from_host", row_len)?;
        let src = Side2D::Host(src.as_ptr().cast(), pitch);
        self.run(Access::Host, |stream| {
            // SAFETY: both sides hold `h` rows of `w` bytes at their pitch (checked); the
            // copy is complete when `run` returns (`Access::Host`).
            unsafe { driver::memcpy_2d_async(self.side(), src, w, h, stream) }
        })
    }

    /// Copies the buffer into `dst`, rows `row_len` elements apart; complete when it
    /// returns.
    ///
    /// # Errors
    /// [`Invalid::OutOfBounds`] if `dst` cannot hold the rows
    /// (before any driver call), [`Invalid::Argument`] if
    /// `row_len` is less than the width.
    pub fn copy_to_host(&self, dst: &mut [T], row_len: usize) -> Result<()> {
        host_rows(
            "DeviceBuffer2D::copy_to_host",
            dst.len(),
            self.width,
            row_len,
            self.height,
        )?;
        let (w, h) = self.extent();
        let pitch = host_pitch::<T>("DeviceBuffer2D::copy_to_host", row_len)?;
        let dst = Side2D::HostMut(dst.as_mut_ptr().cast(), pitch);
        self.run(Access::Host, |stream| {
            // SAFETY: both sides hold `h` rows of `w` bytes at their pitch (checked); any
            // bytes are a valid `T`; the copy is complete when `run` returns.
            unsafe { driver::memcpy_2d_async(dst, self.side(), w, h, stream) }
        })
    }

    /// Copies another 2D buffer of the same width and height into this one; complete when
    /// it returns.
    ///
    /// # Errors
    /// [`Invalid::ShapeMismatch`] if the shapes differ
    /// (before any driver call).
    pub fn copy_from_device(&mut self, src: &DeviceBuffer2D<'ctx, T>) -> Result<()> {
        same_shape((self.width, self.height), (src.width, src.height))?;
        let (w, h) = self.extent();
        self.run(Access::Device, |stream| {
            // SAFETY: two distinct allocations (one borrowed exclusively) of the same
            // shape, both device memory ordered before every later user by the sync
            // stream's record.
            unsafe { driver::memcpy_2d_async(self.side(), src.side(), w, h, stream) }
        })
    }

    /// The rows, packed (`width * height` elements), in a new `Vec`; an error where that
    /// count does not fit a `usize` (zero-sized elements only: other shapes fit in memory).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let Some(n) = self.width.checked_mul(self.height) else {
            return Err(Error::invalid_input(
                "DeviceBuffer2D::to_vec",
                Invalid::TooLarge {
                    what: "the element count",
                    value: self.width as u128 * self.height as u128,
                    max: usize::MAX as u128,
                },
            ));
        };
        let mut v = Vec::with_capacity(n);
        if self.row_bytes() != 0 && self.height != 0 {
            let (w, h) = self.extent();
            let dst = Side2D::HostMut(v.spare_capacity_mut().as_mut_ptr().cast(), w);
            self.run(Access::Host, |stream| {
                // SAFETY: the vector has room for `h` packed rows of `w` bytes; the copy is
                // complete when `run` returns.
                unsafe { driver::memcpy_2d_async(dst, self.side(), w, h, stream) }
            })?;
        }
        // SAFETY: the copy initialised all `n` elements (any bytes are a valid `T`).
        unsafe { v.set_len(n) };
        Ok(v)
    }
}

impl<T: DeviceCopy> DeviceBuffer2D<'_, T> {
    /// Frees the memory and returns the driver's error, where dropping it would only record
    /// the error for the teardown of its context to report. After an error the memory stays
    /// allocated until the context is destroyed.
    /// Memory of the setup phase of [`with_phases`](crate::with_phases) is freed by its
    /// teardown instead: `close` frees nothing and returns `Ok`.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::DeviceBuffer2D;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let buf = DeviceBuffer2D::<f32>::zeroed(ctx, 64, 8)?;
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
        if self.bytes() == 0 {
            return Ok(());
        }
        if self.deferred {
            // memory of a setup phase: its context's teardown frees it
            return Ok(());
        }
        let ptr = self.ptr;
        let free = move |ctx| {
            // SAFETY: the buffer owns `ptr` (from cuMemAllocPitch) in its context, which the brand
            // keeps alive (a release parked for a partition's thread runs before the
            // partition ends: `context::confined`); no queued work uses it (scopes borrow
            // the buffer until their streams are idle); the buffer is not used again
            // (dropped, or forgotten by `close`).
            unsafe { super::free_plain(ctx, ptr) }
        };
        crate::context::confined::release_in(self.ctx, "DeviceBuffer2D", free).unwrap_or(Ok(()))
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer2D<'_, T> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            // the memory stays allocated; the teardown of the context reports it
            crate::context::teardown::record_failed_release(Some(self.ctx), "DeviceBuffer2D", e);
        }
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceBuffer2D<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer2D<{}>({:#x}, {} x {}, pitch {})",
            std::any::type_name::<T>(),
            self.ptr,
            self.width,
            self.height,
            self.pitch
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{host_rows, same_shape};
    use crate::error::{ErrorCode, Invalid};

    #[test]
    fn the_checks_give_typed_errors() {
        assert_eq!(host_rows("t", 8, 3, 5, 2), Ok(()));
        let e = host_rows("DeviceBuffer2D::copy_to_host", 7, 3, 5, 2).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(
            e.invalid(),
            Some(&Invalid::OutOfBounds {
                start: 0,
                end: 8,
                len: 7
            })
        );
        let e = same_shape((3, 2), (2, 3)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "DeviceBuffer2D::copy_from_device failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): the shapes differ: [3, 2, 1] expected, [2, 3, 1] found"
        );
    }

    #[test]
    fn host_rows_are_checked_before_the_driver() {
        assert!(host_rows("t", 10, 3, 5, 2).is_ok()); // rows at 0..3 and 5..8
        assert!(host_rows("t", 8, 3, 5, 2).is_ok()); // exactly enough
        assert!(host_rows("t", 0, 3, 5, 0).is_ok()); // no rows
        let narrow = host_rows("t", 100, 6, 5, 2).unwrap_err();
        assert!(
            matches!(narrow.invalid(), Some(Invalid::Argument { reason }) if reason.contains("shorter than the buffer's width 6"))
        );
        let huge = host_rows("t", 100, 1, usize::MAX, 3).unwrap_err();
        assert!(
            matches!(huge.invalid(), Some(Invalid::TooLarge { .. })),
            "overflow is a refusal, not a wrap-around"
        );
    }
}
