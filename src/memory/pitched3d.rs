//! Pitched three-dimensional device memory ([`DeviceBuffer3D`]): `depth` slices of `height`
//! rows of `width` elements, each row padded to the device's preferred pitch (one
//! `cuMemAllocPitch` of `height * depth` rows, slice after slice), and 3D copies
//! (`cuMemcpy3D`) of whole volumes or of boxes inside them ([`Region3D`]) between it and
//! host memory or another 3D buffer, synchronous or queued in a stream scope
//! (`cuMemcpy3DAsync`). A copy's device side is all of a buffer (`&buffer`, `&mut buffer`)
//! or a box of it ([`buffer.region(r)`](DeviceBuffer3D::region) for a source, a
//! [`Part3D`]; [`buffer.region_mut(r)`](DeviceBuffer3D::region_mut) for a destination, a
//! [`Part3DMut`]), as a 1D copy's is a buffer or `&buffer[range]`: one method per kind of
//! copy takes either.
//!
//! A host volume is a slice read (or written) as `depth` slices of `height` rows of `width`
//! elements, rows `row_len` elements apart and slices `slice_rows` rows apart; a packed
//! volume has `row_len == width` and `slice_rows == height`. Before anything reaches the
//! driver, every copy checks, and returns an [`Invalid`] error naming the
//! numbers otherwise (like a length mismatch of the 1D copies):
//!
//! * that each region lies inside its buffer on every axis (`origin + extent <= shape`,
//!   computed without overflow);
//! * that `row_len >= width` and `slice_rows >= height` of the copy, and that the last
//!   host element it reaches lies inside the slice (computed without overflow).
//!
//! The stream-scope forms are
//! [`StreamScope::copy_3d_from_host`](crate::StreamScope::copy_3d_from_host),
//! [`copy_3d_to_host`](crate::StreamScope::copy_3d_to_host),
//! [`copy_3d_from_device`](crate::StreamScope::copy_3d_from_device), destination first;
//! like every scope operation they borrow what they touch until the scope has
//! synchronized.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::{DeviceBuffer3D, Region3D};
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     // a packed 4 x 3 x 2 host volume: element (x, y, z) is at z * 12 + y * 4 + x
//!     let volume: Vec<u32> = (0..24).collect();
//!     let mut a = DeviceBuffer3D::<u32>::zeroed(ctx, 4, 3, 2)?;
//!     a.copy_from_host(&volume, 4, 3)?;
//!     assert_eq!(a.to_vec()?, volume);
//!     // the 2 x 2 x 1 box of `a` at x 1, y 1, z 1, into a buffer of that shape
//!     let mut b = DeviceBuffer3D::<u32>::zeroed(ctx, 2, 2, 1)?;
//!     b.copy_from_device(a.region(Region3D::new([1, 1, 1], [2, 2, 1])))?;
//!     assert_eq!(b.to_vec()?, [17, 18, 21, 22]);
//!     // back to the host through a stream scope
//!     let mut back = vec![0u32; 4];
//!     ctx.new_stream()?.scope(|s| s.copy_3d_to_host(&mut back, 2, 2, &b))?;
//!     assert_eq!(back, [17, 18, 21, 22]);
//!     Ok(())
//! })
//! # }
//! ```

use std::fmt;

use super::pitched::{DeviceBuffer2D, host_elements, host_pitch};
use super::{DeviceCopy, byte_len};
use crate::context::{Allocating, ContextGuard, Part};
use crate::driver::{self, CUdeviceptr, Copy3D, Side2D, Side3D};
use crate::error::{Error, Invalid, Result};
use crate::span::Span;
use crate::synchronous::Access;

/// `depth` slices of `height` rows of `width` elements of `T` in device memory of the
/// context branded `'ctx`, each row `pitch_bytes()` apart and each slice `height` rows
/// apart (`cuMemAllocPitch`). Freed when dropped. See the
/// [module documentation](crate::memory::pitched3d).
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// use cuda_brand::{DeviceBuffer3D, Region3D};
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let mut volume = DeviceBuffer3D::<f32>::zeroed(ctx, 64, 64, 8)?;
///     // one 64 x 64 slice from the host, queued into slice 3 of the volume
///     let slice = vec![1.0f32; 64 * 64];
///     ctx.new_stream()?.scope(|s| {
///         let third = Region3D::new([0, 0, 3], [64, 64, 1]);
///         s.copy_3d_from_host(volume.region_mut(third), &slice, 64, 64)
///     })?;
///     let packed = volume.to_vec()?;
///     assert_eq!(packed[3 * 64 * 64], 1.0);
///     assert_eq!(packed[2 * 64 * 64], 0.0);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// Its brand is its rows' (a [`DeviceBuffer2D`], invariant in `'ctx`): 3D buffers of two
/// contexts never have one type, and a function that takes two 3D buffers of one context
/// cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::DeviceBuffer3D;
///
/// /// Takes two 3D buffers of one context.
/// fn one_context<'ctx>(_: &DeviceBuffer3D<'ctx, u32>, _: &DeviceBuffer3D<'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = DeviceBuffer3D::<u32>::zeroed(a, 4, 4, 4)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = DeviceBuffer3D::<u32>::zeroed(b, 4, 4, 4)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct DeviceBuffer3D<'ctx, T: DeviceCopy> {
    /// The allocation: `height * depth` rows of `width` elements, slice after slice.
    /// The brand is the 2D buffer's, invariant in `'ctx` (see its `_brand`), so this type
    /// is invariant too: `copy_from_device` and the region copies take two 3D buffers of
    /// one brand, and could not if it were shortened to one common to two contexts.
    rows: DeviceBuffer2D<'ctx, T>,
    height: usize,
    depth: usize,
}

/// A box of elements of a 3D buffer: its first element `origin` and its `extent`.
///
/// ```
/// use cuda_brand::Region3D;
/// // 2 elements of 2 rows of 1 slice, from element 1 of row 1 of slice 1
/// let region = Region3D::new([1, 1, 1], [2, 2, 1]);
/// assert_eq!(Region3D::whole([4, 3, 2]), Region3D::new([0, 0, 0], [4, 3, 2]));
/// # let _ = region;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Region3D {
    /// `[x, y, z]`: the first element's place in its row, its row in the slice, its slice.
    pub origin: [usize; 3],
    /// `[width, height, depth]`: elements per row, rows per slice, slices.
    pub extent: [usize; 3],
}

impl Region3D {
    /// The box of `extent` at `origin`.
    pub const fn new(origin: [usize; 3], extent: [usize; 3]) -> Self {
        Region3D { origin, extent }
    }

    /// The box of `extent` at the first element: all of a buffer of that shape.
    pub const fn whole(extent: [usize; 3]) -> Self {
        Region3D {
            origin: [0; 3],
            extent,
        }
    }
}

/// A box of a [`DeviceBuffer3D`] that a copy reads: all of it (`&buffer`, through
/// `From`) or a region of it ([`buffer.region(r)`](DeviceBuffer3D::region)). The copy
/// checks that the region lies inside the buffer, before any driver call. A copy's source
/// takes this or `&buffer` only, never `&mut buffer`: a swapped destination and source do
/// not compile.
///
/// # The brand
///
/// Its brand is its buffer's (`'ctx`, invariant): parts of two contexts' buffers never
/// have one type, and a copy between two buffers of one context cannot be given one of
/// each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::{DeviceBuffer3D, Part3D, Region3D};
///
/// /// Takes two parts of buffers of one context.
/// fn one_context<'ctx>(_: Part3D<'_, 'ctx, u32>, _: Part3D<'_, 'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = DeviceBuffer3D::<u32>::zeroed(a, 4, 4, 4)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = DeviceBuffer3D::<u32>::zeroed(b, 4, 4, 4)?;
///         let r = Region3D::new([0, 0, 0], [2, 2, 2]);
///         one_context(on_a.region(r), on_b.region(r)); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
#[derive(Debug)]
pub struct Part3D<'a, 'ctx, T: DeviceCopy> {
    /// The buffer, borrowed shared for as long as the part lives. Its brand `'ctx` is the
    /// buffer's, invariant as the buffer is, so a part of one context's buffer never has
    /// the type of another's.
    buffer: &'a DeviceBuffer3D<'ctx, T>,
    region: Region3D,
}

impl<T: DeviceCopy> Clone for Part3D<'_, '_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: DeviceCopy> Copy for Part3D<'_, '_, T> {}

/// A box of a [`DeviceBuffer3D`] that a copy writes: all of it (`&mut buffer`, through
/// `From`) or a region of it ([`buffer.region_mut(r)`](DeviceBuffer3D::region_mut)). The
/// copy checks that the region lies inside the buffer, before any driver call.
///
/// # The brand
///
/// Its brand is its buffer's (`'ctx`, invariant), as [`Part3D`]'s:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::{DeviceBuffer3D, Part3DMut, Region3D};
///
/// /// Takes two parts of buffers of one context.
/// fn one_context<'ctx>(_: Part3DMut<'_, 'ctx, u32>, _: Part3DMut<'_, 'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let mut on_a = DeviceBuffer3D::<u32>::zeroed(a, 4, 4, 4)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let mut on_b = DeviceBuffer3D::<u32>::zeroed(b, 4, 4, 4)?;
///         let r = Region3D::new([0, 0, 0], [2, 2, 2]);
///         // two contexts: does not compile
///         one_context(on_a.region_mut(r), on_b.region_mut(r));
///         Ok(())
///     })
/// })
/// # }
/// ```
#[derive(Debug)]
pub struct Part3DMut<'a, 'ctx, T: DeviceCopy> {
    /// The buffer, borrowed exclusively for as long as the part lives. Its brand `'ctx` is
    /// the buffer's, invariant as the buffer is (and as `&mut` makes it anyway).
    buffer: &'a mut DeviceBuffer3D<'ctx, T>,
    region: Region3D,
}

impl<'a, 'ctx, T: DeviceCopy> From<&'a DeviceBuffer3D<'ctx, T>> for Part3D<'a, 'ctx, T> {
    /// All of the buffer.
    fn from(buffer: &'a DeviceBuffer3D<'ctx, T>) -> Self {
        buffer.region(buffer.whole())
    }
}

impl<'a, 'ctx, T: DeviceCopy> From<&'a mut DeviceBuffer3D<'ctx, T>> for Part3DMut<'a, 'ctx, T> {
    /// All of the buffer.
    fn from(buffer: &'a mut DeviceBuffer3D<'ctx, T>) -> Self {
        let whole = buffer.whole();
        buffer.region_mut(whole)
    }
}

impl<'a, 'ctx, T: DeviceCopy> Part3D<'a, 'ctx, T> {
    /// The box, in its buffer.
    pub fn region(&self) -> Region3D {
        self.region
    }

    /// The whole allocation of the buffer, for a scope's lane record.
    pub(crate) fn span(&self) -> Span {
        self.buffer.span(false)
    }

    /// A copy of this box into the host volume `dst`, checked (see the
    /// [module documentation](crate::memory::pitched3d)); `what` names the operation in the
    /// error.
    pub(crate) fn plan_to_host(
        &self,
        what: &'static str,
        dst: &mut [T],
        row_len: usize,
        slice_rows: usize,
    ) -> Result<Copy3D> {
        let region = self.region;
        check_region(what, "the source region", region, self.buffer.shape())?;
        let pitch = check_host_volume::<T>(what, dst.len(), region.extent, row_len, slice_rows)?;
        Ok(Copy3D {
            dst: Side3D {
                memory: Side2D::HostMut(dst.as_mut_ptr().cast(), pitch),
                slice_rows,
                at: [0; 3],
            },
            src: self.buffer.side(region.origin),
            extent: DeviceBuffer3D::<T>::extent_bytes(region.extent),
        })
    }

    /// Copies the box into `dst` (from `dst[0]`), rows `row_len` elements and slices
    /// `slice_rows` rows apart; complete when it returns. Host elements between the rows
    /// and slices are left as they were.
    ///
    /// # Errors
    /// If the region is not inside the buffer, or `dst` cannot hold the volume (before any
    /// driver call).
    pub fn copy_to_host(self, dst: &mut [T], row_len: usize, slice_rows: usize) -> Result<()> {
        self.copy_to_host_as("Part3D::copy_to_host", dst, row_len, slice_rows)
    }

    fn copy_to_host_as(
        self,
        what: &'static str,
        dst: &mut [T],
        row_len: usize,
        slice_rows: usize,
    ) -> Result<()> {
        let copy = self.plan_to_host(what, dst, row_len, slice_rows)?;
        // SAFETY: a plan of this buffer's part; `dst` is borrowed exclusively (any bytes are
        // a valid `T`), the buffer shared.
        unsafe { self.buffer.run(&copy) }
    }
}

impl<'a, 'ctx, T: DeviceCopy> Part3DMut<'a, 'ctx, T> {
    /// The box, in its buffer.
    pub fn region(&self) -> Region3D {
        self.region
    }

    /// The whole allocation of the buffer, for a scope's lane record.
    pub(crate) fn span(&self) -> Span {
        self.buffer.span(true)
    }

    /// A copy of the host volume `src` into this box, checked (see the
    /// [module documentation](crate::memory::pitched3d)); `what` names the operation in the
    /// error.
    pub(crate) fn plan_from_host(
        &self,
        what: &'static str,
        src: &[T],
        row_len: usize,
        slice_rows: usize,
    ) -> Result<Copy3D> {
        let region = self.region;
        check_region(what, "the destination region", region, self.buffer.shape())?;
        let pitch = check_host_volume::<T>(what, src.len(), region.extent, row_len, slice_rows)?;
        Ok(Copy3D {
            dst: self.buffer.side(region.origin),
            src: Side3D {
                memory: Side2D::Host(src.as_ptr().cast(), pitch),
                slice_rows,
                at: [0; 3],
            },
            extent: DeviceBuffer3D::<T>::extent_bytes(region.extent),
        })
    }

    /// A copy of the box `src` into this one, checked: both inside their buffers, and of
    /// one extent, or an [`Invalid::ShapeMismatch`] naming both (this box's `expected`,
    /// the source's `found`).
    pub(crate) fn plan_from_device(
        &self,
        what: &'static str,
        src: &Part3D<'_, 'ctx, T>,
    ) -> Result<Copy3D> {
        check_region(
            what,
            "the destination region",
            self.region,
            self.buffer.shape(),
        )?;
        check_region(what, "the source region", src.region, src.buffer.shape())?;
        if self.region.extent != src.region.extent {
            return Err(Error::invalid_input(
                what,
                Invalid::ShapeMismatch {
                    expected: self.region.extent,
                    found: src.region.extent,
                },
            ));
        }
        Ok(Copy3D {
            dst: self.buffer.side(self.region.origin),
            src: src.buffer.side(src.region.origin),
            extent: DeviceBuffer3D::<T>::extent_bytes(self.region.extent),
        })
    }

    /// Copies a host volume of the box's extent from `src` (rows `row_len` elements and
    /// slices `slice_rows` rows apart, from `src[0]`) into the box; complete when it
    /// returns.
    ///
    /// # Errors
    /// If the region is not inside the buffer, or `src` does not hold the volume (before
    /// any driver call).
    pub fn copy_from_host(self, src: &[T], row_len: usize, slice_rows: usize) -> Result<()> {
        self.copy_from_host_as("Part3DMut::copy_from_host", src, row_len, slice_rows)
    }

    fn copy_from_host_as(
        self,
        what: &'static str,
        src: &[T],
        row_len: usize,
        slice_rows: usize,
    ) -> Result<()> {
        let copy = self.plan_from_host(what, src, row_len, slice_rows)?;
        // SAFETY: a plan of this buffer's part; the buffer is borrowed exclusively, `src`
        // shared.
        unsafe { self.buffer.run(&copy) }
    }

    /// Copies `src`, a box of another 3D buffer of this extent (`other.region(r)`, or
    /// `&other` for all of it), into this box; complete when it returns.
    ///
    /// # Errors
    /// If either region is not inside its buffer, or their extents differ (before any
    /// driver call).
    pub fn copy_from_device<'s>(self, src: impl Into<Part3D<'s, 'ctx, T>>) -> Result<()>
    where
        'ctx: 's,
    {
        self.copy_from_device_as("Part3DMut::copy_from_device", src.into())
    }

    fn copy_from_device_as(self, what: &'static str, src: Part3D<'_, 'ctx, T>) -> Result<()> {
        let copy = self.plan_from_device(what, &src)?;
        // SAFETY: a plan of this buffer's part; this buffer is borrowed exclusively and
        // `src`'s shared (two distinct allocations).
        unsafe { self.buffer.run(&copy) }
    }
}

/// Checks that `region` (the `which` one of a copy) lies inside a buffer of `shape`; an
/// [`Invalid::RegionOutOfBounds`] naming both otherwise.
fn check_region(
    what: &'static str,
    which: &'static str,
    region: Region3D,
    shape: [usize; 3],
) -> Result<()> {
    let inside = (0..3).all(|axis| {
        region.origin[axis]
            .checked_add(region.extent[axis])
            .is_some_and(|end| end <= shape[axis])
    });
    if inside {
        return Ok(());
    }
    Err(Error::invalid_input(
        what,
        Invalid::RegionOutOfBounds {
            what: which,
            origin: region.origin,
            extent: region.extent,
            shape,
        },
    ))
}

/// Checks that a host slice of `len` elements holds a volume of `extent`, rows `row_len`
/// elements apart and slices `slice_rows` rows apart; returns the rows' pitch in bytes.
/// An error naming the numbers otherwise.
fn check_host_volume<T>(
    what: &'static str,
    len: usize,
    extent: [usize; 3],
    row_len: usize,
    slice_rows: usize,
) -> Result<usize> {
    let [width, height, depth] = extent;
    let refuse = |invalid| Err(Error::invalid_input(what, invalid));
    if row_len < width {
        return refuse(Invalid::argument(format!(
            "a host row of {row_len} elements is shorter than the {width} elements copied per row"
        )));
    }
    if slice_rows < height {
        return refuse(Invalid::argument(format!(
            "a host slice of {slice_rows} rows is shorter than the {height} rows copied per slice"
        )));
    }
    let Some(needed) = host_elements(extent, row_len, slice_rows) else {
        // as `host_elements`, in u128, saturating (it overflows usize, maybe u128 too)
        let value = ((depth as u128 - 1).saturating_mul(slice_rows as u128))
            .saturating_add(height as u128 - 1)
            .saturating_mul(row_len as u128)
            .saturating_add(width as u128);
        return refuse(Invalid::TooLarge {
            what: "the host elements the volume reaches",
            value,
            max: usize::MAX as u128,
        });
    };
    if len < needed {
        return refuse(Invalid::OutOfBounds {
            start: 0,
            end: needed,
            len,
        });
    }
    host_pitch::<T>(what, row_len)
}

impl<'ctx, T: DeviceCopy> DeviceBuffer3D<'ctx, T> {
    /// Allocates `depth` slices of `height` rows of `width` elements, every byte (padding
    /// included) zero; complete when it returns. A shape whose elements or bytes overflow
    /// `usize` is an error with `CUDA_ERROR_INVALID_VALUE`, before any driver call; a shape
    /// with no bytes allocates nothing. Made with the setup guard of
    /// [`with_phases`](crate::with_phases), it is freed only by the teardown.
    pub fn zeroed<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        width: usize,
        height: usize,
        depth: usize,
    ) -> Result<Self> {
        const CALL: &str = "DeviceBuffer3D::zeroed";
        let Some(rows) = height.checked_mul(depth) else {
            return Err(Error::invalid_input(
                CALL,
                Invalid::TooLarge {
                    what: "the rows of all slices",
                    value: depth as u128 * height as u128,
                    max: usize::MAX as u128,
                },
            ));
        };
        Ok(DeviceBuffer3D {
            rows: DeviceBuffer2D::zeroed_for(CALL, ctx, width, rows)?,
            height,
            depth,
        })
    }

    /// Elements per row.
    pub fn width(&self) -> usize {
        self.rows.width()
    }

    /// Rows per slice.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Slices.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// `[width, height, depth]`.
    pub fn shape(&self) -> [usize; 3] {
        [self.width(), self.height, self.depth]
    }

    /// All of the buffer, as a region: `Region3D::whole(self.shape())`.
    pub fn whole(&self) -> Region3D {
        Region3D::whole(self.shape())
    }

    /// Bytes from one row to the next (at least `width * size_of::<T>()`); slices are
    /// `height * pitch_bytes()` apart.
    pub fn pitch_bytes(&self) -> usize {
        self.rows.pitch_bytes()
    }

    /// The device address of the first row of the first slice, for the crate's own calls.
    #[inline]
    pub(crate) fn device_ptr(&self) -> CUdeviceptr {
        self.rows.device_ptr()
    }

    /// The device address of the first row of the first slice (`CUdeviceptr`), once the
    /// crate's pending synchronous operations on the buffer are done: this call waits on
    /// the host for them first, as
    /// [`DeviceBuffer2D::as_device_ptr`](crate::DeviceBuffer2D::as_device_ptr) does.
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
        // SAFETY: the caller's promise, for the same memory.
        unsafe { self.rows.as_device_ptr() }
    }

    /// The whole allocation, for a scope's lane record.
    pub(crate) fn span(&self, write: bool) -> Span {
        self.rows.span(write)
    }

    /// The buffer's side of a copy starting at `origin`.
    fn side(&self, origin: [usize; 3]) -> Side3D {
        Side3D {
            memory: self.rows.side(),
            slice_rows: self.height,
            at: [byte_len::<T>(origin[0]), origin[1], origin[2]],
        }
    }

    /// The extent of a copy in the driver's units: bytes per row, rows, slices.
    fn extent_bytes(extent: [usize; 3]) -> [usize; 3] {
        [byte_len::<T>(extent[0]), extent[1], extent[2]]
    }

    /// Runs `copy`, a plan of this buffer, in the buffer's context: with host memory
    /// complete when it returns, between device buffers completed by a record of the
    /// thread's sync stream (as every synchronous device write: `crate::synchronous`). A copy
    /// of no bytes reaches no driver.
    ///
    /// # Safety
    /// `copy` was made by a `plan_*` function of a part of this buffer, and the caller
    /// borrows both of its sides for the call (exclusively the one it writes).
    unsafe fn run(&self, copy: &Copy3D) -> Result<()> {
        if copy.is_empty() {
            return Ok(());
        }
        // a copy between two device buffers touches no host memory
        let access = match (copy.dst.memory, copy.src.memory) {
            (Side2D::Device(..), Side2D::Device(..)) => Access::Device,
            _ => Access::Host,
        };
        self.rows.run(access, |stream| {
            // SAFETY: the plan checked both sides against the copy's extent, and the caller
            // keeps them borrowed (the destination exclusively); a buffer's two sides are
            // distinct allocations (one is borrowed `&mut`, the other `&`). With host
            // memory the copy is complete when `run` returns; between device buffers it is
            // ordered before every later user by the sync stream's record.
            unsafe { driver::memcpy_3d_async(copy, stream) }
        })
    }

    /// The box `region` of the buffer, for a copy that reads it
    /// ([`Part3D::copy_to_host`], or the source of a 3D copy); `&buffer` is all of it.
    /// The copy checks that `region` lies inside the buffer, before any driver call.
    pub fn region(&self, region: Region3D) -> Part3D<'_, 'ctx, T> {
        Part3D {
            buffer: self,
            region,
        }
    }

    /// The box `region` of the buffer, for a copy that writes it
    /// ([`Part3DMut::copy_from_host`], [`Part3DMut::copy_from_device`], or the destination
    /// of a scope's 3D copy); `&mut buffer` is all of it. The copy checks that `region`
    /// lies inside the buffer, before any driver call.
    pub fn region_mut(&mut self, region: Region3D) -> Part3DMut<'_, 'ctx, T> {
        Part3DMut {
            buffer: self,
            region,
        }
    }

    /// Copies a host volume of the buffer's shape from `src`, rows `row_len` elements and
    /// slices `slice_rows` rows apart, into the buffer; complete when it returns. A region
    /// of the buffer is [`region_mut`](Self::region_mut)`(r).copy_from_host(..)`.
    ///
    /// # Errors
    /// If `src` does not hold the volume (before any driver call).
    pub fn copy_from_host(&mut self, src: &[T], row_len: usize, slice_rows: usize) -> Result<()> {
        let what = "DeviceBuffer3D::copy_from_host";
        Part3DMut::from(self).copy_from_host_as(what, src, row_len, slice_rows)
    }

    /// Copies the buffer into `dst`, rows `row_len` elements and slices `slice_rows` rows
    /// apart; complete when it returns. A region of the buffer is
    /// [`region`](Self::region)`(r).copy_to_host(..)`.
    ///
    /// # Errors
    /// If `dst` cannot hold the volume (before any driver call).
    pub fn copy_to_host(&self, dst: &mut [T], row_len: usize, slice_rows: usize) -> Result<()> {
        let what = "DeviceBuffer3D::copy_to_host";
        Part3D::from(self).copy_to_host_as(what, dst, row_len, slice_rows)
    }

    /// Copies `src`, another 3D buffer of this one's shape (`&other`) or a box of that
    /// extent of one (`other.region(r)`), into this buffer; complete when it returns.
    ///
    /// # Errors
    /// If the source region is not inside its buffer, or its extent is not this buffer's
    /// shape (before any driver call).
    pub fn copy_from_device<'s>(&mut self, src: impl Into<Part3D<'s, 'ctx, T>>) -> Result<()>
    where
        'ctx: 's,
    {
        let what = "DeviceBuffer3D::copy_from_device";
        Part3DMut::from(self).copy_from_device_as(what, src.into())
    }

    /// The volume, packed (`width * height * depth` elements, slice after slice, row after
    /// row), in a new `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        // the allocation's rows, packed, are the slices one after the other
        self.rows.to_vec()
    }
}

impl<T: DeviceCopy> fmt::Debug for DeviceBuffer3D<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer3D<{}>({:#x}, {} x {} x {}, pitch {})",
            std::any::type_name::<T>(),
            self.device_ptr(),
            self.width(),
            self.height,
            self.depth,
            self.pitch_bytes()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    /// A buffer of `shape` that allocated nothing and belongs to no context: every copy
    /// of it stops before the driver (see `DeviceBuffer2D::unallocated`).
    fn unallocated(shape: [usize; 3]) -> DeviceBuffer3D<'static, u16> {
        DeviceBuffer3D {
            rows: DeviceBuffer2D::unallocated(shape[0]),
            height: shape[1],
            depth: shape[2],
        }
    }

    /// `"{call}: {invalid}"` of the error of `r`, a refusal before the driver.
    fn refusal<R>(r: Result<R>) -> String {
        let Err(e) = r else {
            panic!("not refused before the driver")
        };
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
        format!("{}: {}", e.call(), e.invalid().unwrap())
    }

    #[test]
    fn host_volumes_are_checked_before_the_driver() {
        // 2 slices, 5 rows apart, of 3 rows of 4 elements, 7 apart: the last element is
        // at (5 + 2) * 7 + 3 = 52
        assert_eq!(check_host_volume::<u16>("t", 53, [4, 3, 2], 7, 5), Ok(14));
        assert_eq!(check_host_volume::<u16>("t", 0, [4, 3, 0], 7, 5), Ok(14));
        assert_eq!(check_host_volume::<u16>("t", 0, [4, 0, 2], 7, 5), Ok(14));
        assert_eq!(
            refusal(check_host_volume::<u16>("t", 52, [4, 3, 2], 7, 5)),
            "t: the range 0..53 is out of bounds for length 52"
        );
        assert_eq!(
            refusal(check_host_volume::<u16>("t", 100, [8, 3, 2], 7, 5)),
            "t: a host row of 7 elements is shorter than the 8 elements copied per row"
        );
        assert_eq!(
            refusal(check_host_volume::<u16>("t", 100, [4, 6, 2], 7, 5)),
            "t: a host slice of 5 rows is shorter than the 6 rows copied per slice"
        );
        // overflow is a refusal, not a wrap-around: of the slices, the rows, the pitch
        assert_eq!(
            refusal(check_host_volume::<u16>("t", 100, [1, 1, 3], 2, usize::MAX)),
            "t: the host elements the volume reaches is 73786976294838206461, larger than the \
             largest allowed, 18446744073709551615"
        );
        assert!(
            refusal(check_host_volume::<u16>("t", 100, [1, 2, 1], usize::MAX, 2))
                .starts_with("t: the host elements the volume reaches is")
        );
        assert_eq!(
            refusal(check_host_volume::<u16>("t", 1, [1, 1, 1], usize::MAX, 1)),
            "t: the host rows' pitch in bytes is 36893488147419103230, larger than the largest \
             allowed, 18446744073709551615"
        );
    }

    #[test]
    fn regions_are_checked_on_every_axis_without_overflow() {
        check_region(
            "t",
            "the source region",
            Region3D::new([1, 2, 3], [3, 1, 1]),
            [4, 3, 4],
        )
        .unwrap();
        check_region(
            "t",
            "the source region",
            Region3D::new([4, 3, 4], [0, 0, 0]),
            [4, 3, 4],
        )
        .unwrap();
        for (region, axis) in [
            (Region3D::new([2, 0, 0], [3, 1, 1]), "x"),
            (Region3D::new([0, 1, 0], [1, 3, 1]), "y"),
            (Region3D::new([0, 0, 4], [1, 1, 1]), "z"),
            (
                Region3D::new([usize::MAX, 0, 0], [2, 1, 1]),
                "x, overflowing",
            ),
        ] {
            let message = refusal(check_region("t", "the source region", region, [4, 3, 4]));
            assert_eq!(
                message,
                format!(
                    "t: the source region (origin {:?}, extent {:?}) is not inside the buffer's shape [4, 3, 4]",
                    region.origin, region.extent
                ),
                "{axis}"
            );
        }
    }

    #[test]
    fn every_copy_checks_its_bounds_before_the_driver() {
        let mut a = unallocated([4, 3, 2]);
        let b = unallocated([4, 3, 1]);
        let host = [0u16; 24];
        let mut out = [0u16; 24];
        let outside = Region3D::new([1, 0, 0], [4, 1, 1]);
        // whole-buffer copies
        assert!(refusal(a.copy_from_host(&host[..23], 4, 3)).starts_with(
            "DeviceBuffer3D::copy_from_host: the range 0..24 is out of bounds for length 23"
        ));
        assert!(
            refusal(a.copy_to_host(&mut out, 3, 3))
                .starts_with("DeviceBuffer3D::copy_to_host: a host row of 3 elements")
        );
        // the destination's shape `expected`, the source's `found`, as a length mismatch
        assert_eq!(
            refusal(a.copy_from_device(&b)),
            "DeviceBuffer3D::copy_from_device: the shapes differ: [4, 3, 2] expected, [4, 3, 1] found"
        );
        // region copies: the region, then the host volume
        assert!(
            refusal(a.region_mut(outside).copy_from_host(&host, 4, 1))
                .starts_with("Part3DMut::copy_from_host: the destination region")
        );
        assert!(
            refusal(a.region(outside).copy_to_host(&mut out, 4, 1))
                .starts_with("Part3D::copy_to_host: the source region")
        );
        let inside = Region3D::new([1, 1, 1], [3, 2, 1]);
        assert!(
            refusal(a.region_mut(inside).copy_from_host(&host[..2], 3, 2))
                .contains("the range 0..6 is out of bounds for length 2")
        );
        assert!(
            refusal(a.region(inside).copy_to_host(&mut out, 3, 1))
                .contains("a host slice of 1 rows is shorter than the 2 rows copied per slice")
        );
        assert!(
            refusal(
                a.region_mut(Region3D::new([0, 0, 0], [4, 1, 1]))
                    .copy_from_device(b.region(outside))
            )
            .starts_with("Part3DMut::copy_from_device: the source region")
        );
        // the source region fits `b`, but not at this place in `a`
        assert_eq!(
            refusal(
                a.region_mut(Region3D::new([0, 0, 2], [4, 3, 1]))
                    .copy_from_device(&b)
            ),
            "Part3DMut::copy_from_device: the destination region (origin \
             [0, 0, 2], extent [4, 3, 1]) is not inside the buffer's shape [4, 3, 2]"
        );
        // two boxes inside their buffers, of two extents
        assert_eq!(
            refusal(
                a.region_mut(inside)
                    .copy_from_device(b.region(Region3D::new([0, 0, 0], [3, 1, 1])))
            ),
            "Part3DMut::copy_from_device: the shapes differ: [3, 2, 1] expected, [3, 1, 1] found"
        );
        // the plans of the scope's copies are the same checks under the scope's names
        assert!(
            refusal(Part3DMut::from(&mut a).plan_from_host("copy_3d_from_host", &host[..1], 4, 3))
                .starts_with("copy_3d_from_host: the range 0..")
        );
        assert!(
            refusal(
                b.region(outside)
                    .plan_to_host("copy_3d_to_host", &mut out, 4, 3)
            )
            .starts_with("copy_3d_to_host: the source region")
        );
        assert!(
            refusal(Part3DMut::from(&mut a).plan_from_device("copy_3d_from_device", &(&b).into()))
                .starts_with("copy_3d_from_device: the shapes differ: [4, 3, 2]")
        );
        assert!(
            refusal(
                a.region_mut(Region3D::new([3, 0, 0], [3, 2, 1]))
                    .plan_from_device(
                        "copy_3d_from_device",
                        &b.region(Region3D::new([1, 1, 0], [3, 2, 1])),
                    )
            )
            .starts_with("copy_3d_from_device: the destination region")
        );
    }

    #[test]
    fn checked_copies_describe_the_right_boxes_to_the_driver() {
        let mut a = unallocated([4, 3, 2]);
        let b = unallocated([4, 3, 1]);
        let host = [0u16; 24];
        let copy = a
            .region_mut(Region3D::new([1, 2, 1], [3, 1, 1]))
            .plan_from_host("t", &host, 5, 4)
            .unwrap();
        assert_eq!(copy.extent, [6, 1, 1], "bytes per row, rows, slices");
        assert_eq!(copy.dst.at, [2, 2, 1], "x in bytes");
        assert_eq!(copy.dst.slice_rows, 3);
        assert_eq!((copy.src.at, copy.src.slice_rows), ([0; 3], 4));
        assert!(
            matches!(copy.src.memory, Side2D::Host(_, 10)),
            "host pitch in bytes"
        );
        let copy = a
            .region_mut(Region3D::new([0, 1, 1], [2, 2, 1]))
            .plan_from_device("t", &b.region(Region3D::new([2, 0, 0], [2, 2, 1])))
            .unwrap();
        assert_eq!(
            (copy.dst.at, copy.src.at, copy.extent),
            ([0, 1, 1], [4, 0, 0], [4, 2, 1])
        );
        // an empty box is checked too, then reaches no driver
        let empty = a
            .region_mut(Region3D::new([4, 3, 2], [0, 0, 0]))
            .plan_from_host("t", &[], 0, 0)
            .unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn a_shape_that_overflows_is_an_error_before_the_driver() {
        use std::ptr::NonNull;
        // SAFETY: a guard of no context, used only by calls that fail before the driver.
        let ctx = unsafe { ContextGuard::new_unchecked(NonNull::dangling()) };
        let e = DeviceBuffer3D::<u8>::zeroed(ctx, 1, usize::MAX, 2).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(
            e.invalid(),
            Some(&Invalid::TooLarge {
                what: "the rows of all slices",
                value: 2 * usize::MAX as u128,
                max: usize::MAX as u128
            })
        );
        let e = DeviceBuffer3D::<u64>::zeroed(ctx, usize::MAX / 4, 2, 1).unwrap_err();
        assert_eq!(e.call(), "DeviceBuffer3D::zeroed");
        assert!(matches!(e.invalid(), Some(Invalid::TooLarge { .. })), "{e}");
        let e = DeviceBuffer3D::<u64>::zeroed(ctx, 1 << 40, 1 << 12, 1 << 12).unwrap_err();
        assert_eq!(e.call(), "DeviceBuffer3D::zeroed");
    }
}
