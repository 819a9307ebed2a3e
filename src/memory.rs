//! Device memory ([`DeviceBuffer`], [`DeviceSlice`]), page-locked host memory
//! ([`PinnedBuffer`]) and the [`DeviceCopy`] rule for what may live there.
//!
//! `DeviceBuffer<'ctx, T>` owns an allocation of the context branded `'ctx`;
//! `DeviceSlice<'ctx, T>` is a borrowed view of one, exactly as `Vec<T>` and `[T]`:
//! `&buf[2..10]`, `split_at_mut`, `chunks`, and the borrow checker's usual rules about
//! `&` and `&mut` apply to device memory too.
//!
//! The synchronous operations here (copies, fills) are complete when they return. The
//! asynchronous ones live on a stream's scope ([`Stream::scope`](crate::Stream::scope)),
//! which borrows every buffer it touches until it has synchronized, so no buffer can be
//! freed or touched by the host while queued work still uses it.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{self, size_of};
use std::ops::{Bound, Deref, DerefMut, Index, IndexMut, RangeBounds};
use std::ptr::NonNull;

use crate::context::{self, Brand, ContextGuard};
use crate::context::{Allocating, Phase};
use crate::driver::{self, CUdeviceptr, Pattern};
use crate::error::{Error, ErrorCode, Result};
use crate::staging;

/// Types that may be copied to and from the GPU as plain bytes.
///
/// # Safety
///
/// Every bit pattern of the type's size must be a valid value (the GPU may write any
/// bytes), and the type must own nothing (no references, pointers the host would follow,
/// heap memory or `Drop`). That is why `bool`, `char`, references and `NonZero*` are not
/// `DeviceCopy`.
///
/// # Your own types: `#[derive(DeviceCopy)]`
///
/// Derive it (feature `derive`, on by default) on a `#[repr(C)]` struct, so that a kernel
/// sees the same layout as CUDA C's `struct`, together with `Clone` and `Copy`. The derive
/// checks the contract at compile time, with an error on the offending attribute or field:
/// `#[repr(C)]` (or `#[repr(transparent)]`) is there, every field is `DeviceCopy` (fields
/// of type `bool`, `char`, `NonZero*`, references and raw pointers are named), and there is
/// no padding: between fields, at the end, or inside a field's type (a tuple with padding,
/// a type implemented by hand). Enums, unions and generic structs are refused. See
/// [the derive](derive@crate::DeviceCopy), and the cases in `ui-tests/fail/7_derive/`.
/// Derived structs nest, and arrays of them are `DeviceCopy`. The derive's expansion is the
/// crate's own `unsafe impl`, allowed under `#![deny(unsafe_code)]` (not under `forbid`,
/// which no code may lift).
///
/// Writing `unsafe impl DeviceCopy for MyType {}` by hand is still possible, for what the
/// derive refuses (a generic struct, at each type you use); it is then your promise, with
/// no check. Tuples and arrays of `DeviceCopy` types are `DeviceCopy`, but a tuple's field
/// order in memory is Rust's choice: use them for data a kernel treats as bytes, or a
/// `#[repr(C)]` struct when a kernel reads fields.
///
/// Padding bytes of a type (a tuple `(u8, u32)` has three) are copied to the GPU as they
/// are: whatever host memory held there goes along. That is no undefined behaviour, but
/// it can leak host data into device memory; prefer types without padding (the derive
/// refuses them). Alignments above the driver's (256 bytes for device memory, a page for
/// pinned memory) are checked where the host dereferences the memory ([`PinnedBuffer`]
/// refuses them).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot live in GPU memory: it is not `DeviceCopy`",
    label = "not plain data the GPU may read and write",
    note = "the GPU may write any bytes, so only types for which every bit pattern is a value may live there: numbers, arrays and tuples of them, and `#[repr(C)]` structs of them with `#[derive(DeviceCopy)]`",
    note = "`bool`, `char`, references, pointers and `NonZero*` are not: store a `u8` for a flag, a `u32` for a character",
    note = "see the guide, chapter 8 (`cuda_brand::guide`)"
)]
pub unsafe trait DeviceCopy: Copy + 'static {
    /// Whether every byte of the type belongs to a value, recursively: true for the
    /// numbers, for arrays of such types, for tuples of them whose size is the sum of their
    /// fields', and for `#[derive(DeviceCopy)]` structs (the derive checks its fields with
    /// it); false, as a default, for types implemented by hand. Not part of the API.
    #[doc(hidden)]
    const __PADDING_FREE: bool = false;
}

macro_rules! device_copy {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number: every bit pattern is a value, it owns nothing.
        unsafe impl DeviceCopy for $t {
            const __PADDING_FREE: bool = true;
        }
    )* };
}
device_copy!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64
);

// SAFETY: an array of plain-data elements is plain data.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {
    // elements follow each other without gaps (an element's size is its stride)
    const __PADDING_FREE: bool = T::__PADDING_FREE;
}

macro_rules! device_copy_tuple {
    ($($name:ident),+) => {
        // SAFETY: a tuple of plain-data fields is plain data (padding bytes are never read
        // as values).
        unsafe impl<$($name: DeviceCopy),+> DeviceCopy for ($($name,)+) {
            // fields that do not overlap and add up to the size leave no byte over
            const __PADDING_FREE: bool = size_of::<Self>() == 0 $(+ size_of::<$name>())+
                $(&& $name::__PADDING_FREE)+;
        }
    };
}
device_copy_tuple!(A);
device_copy_tuple!(A, B);
device_copy_tuple!(A, B, C);
device_copy_tuple!(A, B, C, D);
device_copy_tuple!(A, B, C, D, E);
device_copy_tuple!(A, B, C, D, E, F);

/// Element types that the driver can fill with a repeated value (`cuMemsetD8/16/32`):
/// the 8-, 16- and 32-bit numbers. Sealed: the pattern reaches the driver.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be filled by the driver's memset",
    label = "`fill` needs an 8-, 16- or 32-bit number",
    note = "the driver fills with 1-, 2- or 4-byte patterns: `u8`, `i8`, `u16`, `i16`, `u32`, `i32`, `f32`; for other types copy a host slice of the value instead",
    note = "see the guide, chapter 5 (`cuda_brand::guide`)"
)]
pub trait Memset: DeviceCopy + sealed::Sealed {}

pub(crate) mod sealed {
    /// The memory one argument touches: `bytes` at `start`, written or only read. Scalars
    /// touch none (`bytes == 0`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Span {
        pub(crate) start: u64,
        pub(crate) bytes: u64,
        pub(crate) write: bool,
    }

    impl Span {
        pub(crate) const NONE: Span = Span {
            start: 0,
            bytes: 0,
            write: false,
        };

        #[inline(always)]
        pub(crate) fn overlaps(&self, other: &Span) -> bool {
            self.bytes != 0
                && other.bytes != 0
                && self.start < other.start.wrapping_add(other.bytes)
                && other.start < self.start.wrapping_add(self.bytes)
        }
    }

    /// The driver's fill pattern of a `Memset` type; private, so no other type can be one.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `Memset`: the trait is sealed",
        note = "the driver fills with 1-, 2- or 4-byte patterns, and only the crate's 8-, 16- and 32-bit numbers provide one",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait Sealed {
        fn pattern(self) -> crate::driver::Pattern;
    }
}

macro_rules! memset_impl {
    ($($t:ty => $variant:ident as $bits:ty),*) => { $(
        impl sealed::Sealed for $t {
            #[inline]
            fn pattern(self) -> Pattern {
                Pattern::$variant(<$bits>::from_ne_bytes(self.to_ne_bytes()))
            }
        }
        impl Memset for $t {}
    )* };
}
memset_impl!(u8 => D8 as u8, i8 => D8 as u8, u16 => D16 as u16, i16 => D16 as u16, u32 => D32 as u32, i32 => D32 as u32, f32 => D32 as u32);

pub(crate) use sealed::Span;

/// The first pair of spans `(i, j)`, `i < j`, where at least one is written and the two
/// share memory.
#[inline]
pub(crate) fn first_overlap(spans: &[Span]) -> Option<(usize, usize)> {
    for i in 0..spans.len() {
        for j in i + 1..spans.len() {
            if (spans[i].write || spans[j].write) && spans[i].overlaps(&spans[j]) {
                return Some((i, j));
            }
        }
    }
    None
}

#[cold]
#[inline(never)]
pub(crate) fn overlap_error(call: &'static str, names: [&str; 2], a: &Span, b: &Span) -> Error {
    Error::with_detail(
        call,
        ErrorCode::InvalidValue,
        format!(
            "{} ({} bytes at {:#x}) and {} ({} bytes at {:#x}) overlap: memory that a GPU operation writes must not also be another of its arguments",
            names[0], a.bytes, a.start, names[1], b.bytes, b.start
        ),
    )
}

/// A zero-sized, align-1 element, so that a `&DeviceSlice` is a fat pointer (device address,
/// element count) that claims no host-dereferenceable bytes.
#[repr(transparent)]
struct Slot(());

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
#[repr(C)]
pub struct DeviceSlice<'ctx, T> {
    _brand: Brand<'ctx>,
    _elem: PhantomData<T>,
    slots: [Slot],
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
        let fat = std::ptr::slice_from_raw_parts(ptr as usize as *const Slot, len) as *const Self;
        // SAFETY: `Self` has size zero and alignment one, so any non-null address is a
        // valid reference to it; the caller guarantees the device memory behind it.
        unsafe { &*fat }
    }

    /// # Safety
    /// As [`DeviceSlice::from_raw_parts`], and no other view exists during `'a`.
    #[inline]
    pub(crate) unsafe fn from_raw_parts_mut<'a>(ptr: CUdeviceptr, len: usize) -> &'a mut Self {
        let fat = std::ptr::slice_from_raw_parts_mut(ptr as usize as *mut Slot, len) as *mut Self;
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

    /// The device address of the first element (`CUdeviceptr`). For an empty view this is
    /// an address nothing is allocated at.
    ///
    /// # Safety
    ///
    /// Taking the address does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back, since a number outlives no borrow. The caller promises, for every
    /// use of the address (a kernel parameter, a driver call): it is not used after the
    /// memory is freed (the buffer dropped, or the scope that allocated it ended); and work given it reads the memory only while nothing
    /// writes it and writes it only while nothing else uses it, until that work has
    /// finished, as the borrow of this slice would make the crate's copies and launches do.
    #[inline]
    pub unsafe fn as_device_ptr(&self) -> CUdeviceptr {
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
    /// [`try_split_at`](DeviceSlice::try_split_at) returns the error instead.
    #[track_caller]
    pub fn split_at(&self, mid: usize) -> (&Self, &Self) {
        if let Err(e) = split_point("DeviceSlice::split_at", mid, self.len()) {
            fail(e)
        }
        (&self[..mid], &self[mid..])
    }

    /// [`split_at`](DeviceSlice::split_at), or an error if `mid > len`.
    ///
    /// ```
    /// # fn f(buf: &cuda_brand::DeviceSlice<'_, u32>) -> cuda_brand::Result<()> {
    /// // with a view of 4 elements
    /// let e = buf.try_split_at(5).unwrap_err();
    /// assert_eq!(e.detail(), Some("mid 5 > len 4"));
    /// # Ok(()) }
    /// ```
    pub fn try_split_at(&self, mid: usize) -> Result<(&Self, &Self)> {
        split_point("DeviceSlice::split_at", mid, self.len())?;
        Ok(self.split_at(mid))
    }

    /// Two disjoint mutable views, `[0, mid)` and `[mid, len)`.
    ///
    /// # Panics
    /// If `mid > len`.
    /// [`try_split_at_mut`](DeviceSlice::try_split_at_mut) returns the error instead.
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

    /// [`split_at_mut`](DeviceSlice::split_at_mut), or an error if `mid > len`.
    pub fn try_split_at_mut(&mut self, mid: usize) -> Result<(&mut Self, &mut Self)> {
        split_point("DeviceSlice::split_at_mut", mid, self.len())?;
        Ok(self.split_at_mut(mid))
    }

    /// Views of `size` elements each (the last may be shorter), like `[T]::chunks`.
    ///
    /// # Panics
    /// If `size` is 0.
    /// [`try_chunks`](DeviceSlice::try_chunks) returns the error instead.
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
    /// [`try_chunks_mut`](DeviceSlice::try_chunks_mut) returns the error instead.
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

impl<'ctx, T> DeviceSlice<'ctx, T> {
    /// [`chunks`](DeviceSlice::chunks), or an error if `size` is 0.
    pub fn try_chunks(
        &self,
        size: usize,
    ) -> Result<impl DoubleEndedIterator<Item = &Self> + ExactSizeIterator> {
        chunk_size("DeviceSlice::chunks", size)?;
        Ok(self.chunks(size))
    }

    /// [`chunks_mut`](DeviceSlice::chunks_mut), or an error if `size` is 0.
    pub fn try_chunks_mut(
        &mut self,
        size: usize,
    ) -> Result<impl DoubleEndedIterator<Item = &mut Self> + ExactSizeIterator> {
        chunk_size("DeviceSlice::chunks_mut", size)?;
        Ok(self.chunks_mut(size))
    }
}

impl<'ctx, T: DeviceCopy> DeviceSlice<'ctx, T> {
    /// [`copy_from_host`](DeviceSlice::copy_from_host), with differing lengths an error
    /// (before any driver call) instead of a panic.
    ///
    /// ```
    /// # fn f(buf: &mut cuda_brand::DeviceSlice<'_, u32>) {
    /// // with a view of 4 elements
    /// let e = buf.try_copy_from_host(&[1, 2, 3]).unwrap_err();
    /// assert_eq!(e.code(), cuda_brand::ErrorCode::InvalidValue);
    /// assert_eq!(e.detail(), Some("destination has 4 elements but source has 3"));
    /// # }
    /// ```
    pub fn try_copy_from_host(&mut self, src: &[T]) -> Result<()> {
        lengths_match("copy_from_host", self.len(), src.len())?;
        self.copy_from_host(src)
    }

    /// [`copy_to_host`](DeviceSlice::copy_to_host), with differing lengths an error (before
    /// any driver call) instead of a panic.
    pub fn try_copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        lengths_match("copy_to_host", dst.len(), self.len())?;
        self.copy_to_host(dst)
    }

    /// [`copy_from_device`](DeviceSlice::copy_from_device), with differing lengths an error
    /// (before any driver call) instead of a panic.
    pub fn try_copy_from_device(&mut self, src: &DeviceSlice<'ctx, T>) -> Result<()> {
        lengths_match("copy_from_device", self.len(), src.len())?;
        self.copy_from_device(src)
    }

    /// Copies `src` from the host into this view (`cuMemcpyHtoD`); done when it returns.
    /// From 16 MiB, pageable memory is staged: see
    /// [`DeviceBuffer`'s documentation](DeviceBuffer#bulk-copies-to-and-from-pageable-memory).
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    /// [`try_copy_from_host`](DeviceSlice::try_copy_from_host) returns the error instead.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        check_lengths("copy_from_host", self.len(), src.len());
        let bytes = self.size_in_bytes();
        if bytes == 0 {
            return Ok(());
        }
        let staged = staging::wanted(staging::Kind::FromHost, bytes);
        in_memory_context_with(self.device_ptr(), |ctx| {
            if let (true, Some(ctx)) = (staged, ctx) {
                // SAFETY: `ctx` is current and alive (`in_memory_context_with`); both
                // ranges have `bytes` bytes; `self` is exclusively borrowed device memory
                // and `src` a shared borrow nobody writes during the call.
                if unsafe {
                    staging::host_to_device(ctx, self.device_ptr(), src.as_ptr().cast(), bytes)
                }? {
                    return Ok(());
                }
            }
            // SAFETY: both ranges have `bytes` bytes; `self` is exclusively borrowed device
            // memory of a live context and `src` a live host slice.
            unsafe { driver::memcpy_htod(self.device_ptr(), src.as_ptr().cast(), bytes) }
        })
    }

    /// Copies this view into `dst` on the host (`cuMemcpyDtoH`); done when it returns.
    /// From 16 MiB, pageable memory is staged: see
    /// [`DeviceBuffer`'s documentation](DeviceBuffer#bulk-copies-to-and-from-pageable-memory).
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    /// [`try_copy_to_host`](DeviceSlice::try_copy_to_host) returns the error instead.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        check_lengths("copy_to_host", dst.len(), self.len());
        let bytes = self.size_in_bytes();
        if bytes == 0 {
            return Ok(());
        }
        let staged = staging::wanted(staging::Kind::ToHost, bytes);
        in_memory_context_with(self.device_ptr(), |ctx| {
            if let (true, Some(ctx)) = (staged, ctx) {
                // SAFETY: `ctx` is current and alive; both ranges have `bytes` bytes; `dst`
                // is exclusively borrowed, and any bytes are a valid `T` (`DeviceCopy`).
                if unsafe {
                    staging::device_to_host(
                        ctx,
                        dst.as_mut_ptr().cast(),
                        self.device_ptr(),
                        bytes,
                        false,
                    )
                }? {
                    return Ok(());
                }
            }
            // SAFETY: both ranges have `bytes` bytes; `dst` is exclusively borrowed, and
            // any bytes are a valid `T` (`DeviceCopy`).
            unsafe { driver::memcpy_dtoh(dst.as_mut_ptr().cast(), self.device_ptr(), bytes) }
        })
    }

    /// Copies another view of the same context into this one (`cuMemcpyDtoD`); complete
    /// when it returns.
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    /// [`try_copy_from_device`](DeviceSlice::try_copy_from_device) returns the error instead.
    pub fn copy_from_device(&mut self, src: &DeviceSlice<'ctx, T>) -> Result<()> {
        check_lengths("copy_from_device", self.len(), src.len());
        if self.size_in_bytes() == 0 {
            return Ok(());
        }
        let (dst_span, src_span) = (self.span(true), src.span(false));
        if dst_span.overlaps(&src_span) {
            // unreachable through the borrow rules (`self` is borrowed exclusively, `src`
            // shared); checked anyway, it costs two compares
            return Err(overlap_error(
                "DeviceSlice::copy_from_device",
                ["the destination", "the source"],
                &dst_span,
                &src_span,
            ));
        }
        // SAFETY: both device ranges have `size_in_bytes` bytes, are memory of this context
        // (one brand) and do not overlap (checked above).
        in_memory_context(self.device_ptr(), || unsafe {
            driver::memcpy_dtod(self.device_ptr(), src.device_ptr(), self.size_in_bytes())
        })
    }

    /// The contents, copied into a new `Vec`; complete when it returns.
    ///
    /// A large copy (16 MiB and up) is staged through page-locked memory the context keeps
    /// and written into the `Vec` by several threads, many times faster than the driver
    /// writes a new `Vec`: see
    /// [`DeviceBuffer`'s documentation](DeviceBuffer#bulk-copies-to-and-from-pageable-memory).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = Vec::with_capacity(self.len());
        let dst = v.spare_capacity_mut();
        let bytes = self.size_in_bytes();
        if bytes != 0 {
            let staged = staging::wanted(staging::Kind::ToNewHost, bytes);
            in_memory_context_with(self.device_ptr(), |ctx| {
                if let (true, Some(ctx)) = (staged, ctx) {
                    // SAFETY: `ctx` is current and alive; `dst` is the new `Vec`'s spare
                    // room for `len` elements (`bytes` bytes), which nothing else uses;
                    // any bytes are a valid `T`.
                    if unsafe {
                        staging::device_to_host(
                            ctx,
                            dst.as_mut_ptr().cast(),
                            self.device_ptr(),
                            bytes,
                            true,
                        )
                    }? {
                        return Ok(());
                    }
                }
                // SAFETY: `dst` has room for `len` elements; any bytes are a valid `T`.
                unsafe { driver::memcpy_dtoh(dst.as_mut_ptr().cast(), self.device_ptr(), bytes) }
            })?;
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
        // SAFETY: `len` elements of the pattern's width are the view's bytes.
        in_memory_context(self.device_ptr(), || unsafe {
            driver::memset(
                self.device_ptr(),
                sealed::Sealed::pattern(value),
                self.len(),
            )
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

/// Panics with the checks' error (before any driver call): `"{call}: {detail}"`, the
/// message of the panicking forms, whose `try_` forms return the error instead.
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn fail(e: Error) -> ! {
    panic!(
        "{}: {}",
        e.call(),
        e.detail().unwrap_or_else(|| e.code().description())
    )
}

/// The lengths check of a copy: `Err` naming `what` and both lengths if they differ.
#[inline]
pub(crate) fn lengths_match(what: &'static str, dst: usize, src: usize) -> Result<()> {
    if dst == src {
        return Ok(());
    }
    Err(Error::with_detail(
        what,
        ErrorCode::InvalidValue,
        format!("destination has {dst} elements but source has {src}"),
    ))
}

/// [`lengths_match`], panicking (the copies that document `# Panics`).
#[inline]
#[track_caller]
pub(crate) fn check_lengths(what: &'static str, dst: usize, src: usize) {
    if let Err(e) = lengths_match(what, dst, src) {
        fail(e)
    }
}

/// The check of `split_at(mid)` on a view of `len` elements.
#[inline]
fn split_point(what: &'static str, mid: usize, len: usize) -> Result<()> {
    if mid <= len {
        return Ok(());
    }
    Err(Error::with_detail(
        what,
        ErrorCode::InvalidValue,
        format!("mid {mid} > len {len}"),
    ))
}

/// The check of `chunks(size)`.
#[inline]
fn chunk_size(what: &'static str, size: usize) -> Result<()> {
    if size != 0 {
        return Ok(());
    }
    Err(Error::with_detail(
        what,
        ErrorCode::InvalidValue,
        "chunk size must be non-zero",
    ))
}

pub(crate) fn bounds(range: &impl RangeBounds<usize>, len: usize) -> Option<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    (start <= end && end <= len).then_some((start, end))
}

/// Runs a synchronous memory operation on the memory at `ptr` with the memory's own
/// context current (`CU_POINTER_ATTRIBUTE_CONTEXT`), whatever is current on the calling
/// thread: a nested context of another device, or none (a scoped worker that did not
/// `enter`). The driver queues a "synchronous" fill or device copy on the current
/// context's legacy stream, and the crate waits for that stream: running in the memory's
/// own context makes that wait the right one by construction. Memory the driver ties to no
/// context (a module's global variable) runs in the current context, which must exist.
fn in_memory_context<T>(ptr: CUdeviceptr, op: impl FnOnce() -> Result<T>) -> Result<T> {
    in_memory_context_with(ptr, |_| op())
}

/// As [`in_memory_context`], telling `op` which context it runs in: the memory's own, or
/// the calling thread's current one (alive while `op` runs: a brand covers the memory's
/// context, and a current context stays current), or `None` where the device's primary
/// context is retained for `op` alone (no staging is kept for it).
#[inline]
fn in_memory_context_with<T>(
    ptr: CUdeviceptr,
    op: impl FnOnce(Option<NonNull<cuda_driver_sys::CUctx_st>>) -> Result<T>,
) -> Result<T> {
    let info = driver::pointer_info(ptr)?;
    if let Some(ctx) = std::ptr::NonNull::new(info.context) {
        // SAFETY: the memory's context is alive while the memory is (the brand).
        return unsafe { context::in_context(ctx, || op(Some(ctx))) };
    }
    // Memory of a pool (the device's, not a context's) or a module global.
    let current = driver::ctx_get_current()?;
    if !current.is_null() && (!info.known || driver::ctx_get_device()? == info.device) {
        return op(NonNull::new(current));
    }
    if !info.known {
        return Err(Error::with_detail(
            "DeviceSlice",
            ErrorCode::InvalidContext,
            "this memory belongs to no context the driver names (a module global): make its context current first (SharedContext::enter)",
        ));
    }
    // No context of the memory's device is current: use the device's primary context.
    let device = info.device;
    let primary = driver::primary_ctx_retain(device)?;
    let primary = driver::non_null("cuDevicePrimaryCtxRetain", primary);
    // SAFETY: just retained, released below.
    let result = primary.and_then(|ctx| unsafe { context::in_context(ctx, || op(None)) });
    // SAFETY: balances the retain above; nothing of the primary context is kept.
    let released = unsafe { driver::primary_ctx_release(device) };
    crate::context::teardown::keep_both(result, released)
}

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
        // SAFETY: the caller gives up `ptr`.
        unsafe { driver::mem_free(ptr) }
    };
    // SAFETY: the caller guarantees the context.
    unsafe { context::in_context(ctx, free) }
}

/// Frees the memory of a device buffer made in `ctx`: `cuMemFree` for `plain` memory
/// ([`free_plain`]), else `cuMemFreeAsync` on the legacy stream, with `ctx` current.
///
/// # Safety
/// `ptr` is such an allocation of the live context `ctx`, given up by its owner, and no
/// queued work uses it.
pub(crate) unsafe fn free_buffer_memory(
    ctx: NonNull<cuda_driver_sys::CUctx_st>,
    ptr: CUdeviceptr,
    plain: bool,
) -> Result<()> {
    if plain {
        // SAFETY: the caller's promise, memory from `cuMemAlloc`.
        return unsafe { free_plain(ctx, ptr) };
    }
    let free = || {
        // SAFETY: the caller gives up `ptr`, pool memory with no work pending on it.
        unsafe { driver::mem_free_async(ptr, std::ptr::null_mut()) }
    };
    // SAFETY: the caller guarantees the context.
    unsafe { context::in_context(ctx, free) }
}

/// The size in bytes of `len` elements of `T`, for a length that already describes memory
/// (so it cannot overflow).
#[inline(always)]
pub(crate) fn byte_len<T>(len: usize) -> usize {
    len * size_of::<T>()
}

/// The size in bytes of `len` elements of `T`, or an error naming `call` if it overflows.
#[inline]
pub(crate) fn checked_byte_len<T>(call: &'static str, len: usize) -> Result<usize> {
    len.checked_mul(size_of::<T>())
        .ok_or_else(|| too_large(call, len, size_of::<T>()))
}

/// The device address of every buffer and view of zero bytes (no elements, or zero-sized
/// ones): never allocated, never reaching the driver, aligned for `T`.
pub(crate) const fn empty_address<T>() -> CUdeviceptr {
    let align = std::mem::align_of::<T>() as CUdeviceptr;
    if align > 256 { align } else { 256 }
}

/// Owned device memory of the context branded `'ctx`: the `Vec<T>` of [`DeviceSlice`].
///
/// It comes from a memory pool, stream-ordered (`cuMemAllocFromPoolAsync`, by default from
/// the crate's pool of the device, see [`pool`](crate::pool)), and goes back to it when
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
/// # Bulk copies to and from pageable memory
///
/// The driver copies between the device and pageable host memory (a `Vec`, any slice it
/// has not page-locked) itself, on one thread. Measured on an H100 (driver 580): 1.0–1.4
/// GB/s into a new `Vec` (what a plain `to_vec` gets), 9–14 GB/s into a reused one, 6–8
/// GB/s from a `Vec`, while the copy engine moves 55 GB/s from and into page-locked
/// memory. So the crate stages large synchronous copies through page-locked memory it
/// keeps per context:
///
/// * [`to_vec`](DeviceSlice::to_vec), [`copy_to_host`](DeviceSlice::copy_to_host),
///   [`from_slice`](DeviceBuffer::from_slice),
///   [`from_slice_in`](DeviceBuffer::from_slice_in) and
///   [`copy_from_host`](DeviceSlice::copy_from_host), each from 16 MiB (below that,
///   starting the copy threads costs more than staging saves: `BENCHMARKS.md`, "Bulk
///   copies");
/// * the calling thread runs the DMA of one chunk (up to 2 MiB) after another between the
///   device and a slot of the staging, while up to 8 threads (one fewer than the cores,
///   spawned for the copy and joined before it returns) copy chunks between the slots and
///   the host memory: the copy engine and the threads work at once, and the driver never
///   handles the pageable memory;
/// * a new `Vec` of 4 MiB or more is advised to the kernel as huge-page memory
///   (`madvise(MADV_HUGEPAGE)`, on Linux), so that its first touch maps 2 MiB at a time.
///
/// Nothing else changes: the copies are synchronous, complete when they return, on the
/// current context's legacy stream as before. Smaller copies, and host memory the driver
/// already knows (a [`PinnedBuffer`]'s contents), go straight to the driver.
///
/// **What the crate keeps.** Per context, a staging of 20 MiB of host memory, page-locked
/// for that context (`cuMemHostRegister`), made at the context's first staged copy; a
/// second one only while two threads copy at once (so at most 40 MiB per context; a third
/// copy waits for one to be free). No threads are kept. The stagings are unregistered and
/// freed at the end of [`with_context`](crate::with_context) (before the context is
/// destroyed) and at the end of every [`with_raw_context`](crate::with_raw_context); a
/// primary context ([`with_primary_context`](crate::with_primary_context)) may be held
/// by others, so it keeps them while it stays active and they are freed after the release
/// that ends it. If memory cannot be page-locked, the copies take the driver's path.
/// Measurements: `BENCHMARKS.md`, "Bulk copies".
pub struct DeviceBuffer<'ctx, T: DeviceCopy> {
    ptr: CUdeviceptr,
    len: usize,
    owner: Owner,
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
            None => crate::pool::crate_pool(driver::ctx_get_device()?)?,
        };
        match pool {
            // SAFETY: a live pool of the context's device; the legacy stream of the current
            // context (null) orders the allocation. No block of a pool the crate
            // allocates from has work pending on it (see the `pool` module), so the memory
            // is valid for every stream as soon as the call returns.
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
    /// device (see [`pool`](crate::pool)).
    ///
    /// # Safety
    /// The contents are whatever the memory held. Reading them before writing is not
    /// undefined behaviour for `DeviceCopy` types (every bit pattern is valid), but it is
    /// a read of stale data, possibly another allocation's: hence `unsafe`.
    pub unsafe fn uninitialized<P: Allocating>(
        ctx: ContextGuard<'ctx, P>,
        len: usize,
    ) -> Result<Self> {
        Self::allocate_in_phase(ctx, None, len)
    }

    /// As [`DeviceBuffer::uninitialized`], from `pool` (a pool of this context: the brand
    /// says so). The guard is the phase's: in the setup phase of
    /// [`with_phases`](crate::with_phases) the buffer is freed only by the teardown, like
    /// every setup buffer, and a run-phase guard does not compile here.
    ///
    /// # Safety
    /// As for [`DeviceBuffer::uninitialized`].
    pub unsafe fn uninitialized_in<P: Allocating>(
        ctx: ContextGuard<'ctx, P>,
        pool: &crate::MemoryPool<'ctx>,
        len: usize,
    ) -> Result<Self> {
        Self::allocate_in_phase(ctx, Some(pool.raw()), len)
    }

    /// Allocates `len` elements from `pool` (`None`: the crate's pool) with a guard of
    /// phase `P`; memory of a setup phase goes on its teardown's list.
    fn allocate_in_phase<P: Allocating>(
        ctx: ContextGuard<'ctx, P>,
        pool: Option<driver::CUmemoryPool>,
        len: usize,
    ) -> Result<Self> {
        let buf = Self::allocate(ctx.unphased(), pool, len, P::DEFERS_FREES)?;
        if P::DEFERS_FREES && buf.size_in_bytes() != 0 {
            // on failure the memory is freed there and `buf` (marked deferred) frees nothing
            let kind = match buf.owner.is_plain() {
                true => crate::context::deferred::Kind::Plain,
                false => crate::context::deferred::Kind::Pool,
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
    pub fn zeroed<P: Allocating>(ctx: ContextGuard<'ctx, P>, len: usize) -> Result<Self> {
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
    pub fn zeroed_in<P: Allocating>(
        ctx: ContextGuard<'ctx, P>,
        pool: &crate::MemoryPool<'ctx>,
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
        let zero = || {
            // SAFETY: the buffer's own bytes, just allocated.
            unsafe { driver::memset(self.ptr, Pattern::D8(0), self.size_in_bytes()) }
        };
        // SAFETY: the brand keeps the buffer's context alive.
        unsafe { context::in_context(self.owner.context(), zero) }
    }

    /// Allocates a buffer holding a copy of `src`; complete when it returns. From 16 MiB,
    /// pageable memory is staged: see
    /// [the type's documentation](DeviceBuffer#bulk-copies-to-and-from-pageable-memory).
    pub fn from_slice<P: Allocating>(ctx: ContextGuard<'ctx, P>, src: &[T]) -> Result<Self> {
        // SAFETY: every element is written by the copy below before anyone can read it.
        let buf = unsafe { Self::uninitialized(ctx, src.len()) }?;
        buf.fill_from(src)?;
        Ok(buf)
    }

    /// As [`DeviceBuffer::from_slice`], from `pool` (see
    /// [`DeviceBuffer::uninitialized_in`]).
    pub fn from_slice_in<P: Allocating>(
        ctx: ContextGuard<'ctx, P>,
        pool: &crate::MemoryPool<'ctx>,
        src: &[T],
    ) -> Result<Self> {
        // SAFETY: every element is written by the copy below before anyone can read it.
        let buf = unsafe { Self::uninitialized_in(ctx, pool, src.len()) }?;
        buf.fill_from(src)?;
        Ok(buf)
    }

    fn fill_from(&self, src: &[T]) -> Result<()> {
        let bytes = self.size_in_bytes();
        if bytes == 0 {
            return Ok(());
        }
        let ctx = self.owner.context();
        let staged = staging::wanted(staging::Kind::FromHost, bytes);
        let copy = || {
            if staged {
                // SAFETY: `ctx` is current (`in_context`) and alive (the brand); same
                // length; the buffer was just allocated; `src` is a shared borrow.
                if unsafe { staging::host_to_device(ctx, self.ptr, src.as_ptr().cast(), bytes) }? {
                    return Ok(());
                }
            }
            // SAFETY: same length; the buffer was just allocated.
            unsafe { driver::memcpy_htod(self.ptr, src.as_ptr().cast(), bytes) }
        };
        // SAFETY: the brand keeps the buffer's context alive.
        unsafe { context::in_context(ctx, copy) }
    }

    /// The raw device pointer and length, without freeing. Free it with `cuMemFreeAsync`
    /// (or `cuMemFree`) in the buffer's context; memory of a pool is not reclaimed when the
    /// context is destroyed (the pool is the device's), it stays allocated until the process
    /// ends. (A buffer of a setup phase is taken off its teardown's list.)
    ///
    /// # Safety
    ///
    /// Leaking the memory is safe ([`mem::forget`] does it too); `unsafe` marks what the
    /// address allows behind the borrow checker's back. The caller takes the memory over
    /// and promises: it is freed at most once, after the last work using it has finished;
    /// and the address is used as [`DeviceSlice::as_device_ptr`] requires (not after the
    /// free; read while nothing writes it, written while nothing else uses it).
    pub unsafe fn into_raw_parts(self) -> (CUdeviceptr, usize) {
        if self.owner.is_deferred() {
            crate::context::deferred::undefer(self.ptr as usize);
        }
        let parts = (self.ptr, self.len);
        mem::forget(self);
        parts
    }
}

#[cold]
fn too_large(call: &'static str, len: usize, size: usize) -> Error {
    Error::with_detail(
        call,
        ErrorCode::InvalidValue,
        format!("{len} elements of {size} bytes overflow usize"),
    )
}

impl<'ctx, T: DeviceCopy> Deref for DeviceBuffer<'ctx, T> {
    type Target = DeviceSlice<'ctx, T>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        // SAFETY: the buffer owns `len` elements at `ptr` for as long as it is borrowed.
        unsafe { DeviceSlice::from_raw_parts(self.ptr, self.len) }
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
        // SAFETY: the buffer owns `ptr` (from `cuMemAlloc` in its own context where it is
        // plain, else from a pool), and no queued work can still use it: asynchronous work
        // only runs inside a stream scope, which borrows the buffer until its stream has
        // finished, so a pool gets back a block with nothing pending on it. The brand keeps
        // the context alive; the buffer is not used again (dropped, or forgotten by
        // `close`).
        unsafe { free_buffer_memory(self.owner.context(), ptr, self.owner.is_plain()) }
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
///     ctx.stream()?.scope(|s| s.copy_from_host(&mut dev, &host))?; // truly asynchronous
///     assert_eq!(dev.to_vec()?[17], 3);
///     Ok(())
/// })
/// # }
/// ```
pub struct PinnedBuffer<'ctx, T: DeviceCopy> {
    ptr: NonNull<T>,
    len: usize,
    ctx: NonNull<cuda_driver_sys::CUctx_st>,
    _brand: Brand<'ctx>,
}

// SAFETY: page-locked memory is ordinary host memory to every thread; freeing it pushes
// the owning context explicitly, so the dropping thread needs no current context.
unsafe impl<T: DeviceCopy + Send> Send for PinnedBuffer<'_, T> {}
// SAFETY: `&PinnedBuffer` only gives `&[T]`.
unsafe impl<T: DeviceCopy + Sync> Sync for PinnedBuffer<'_, T> {}

impl<'ctx, T: DeviceCopy> PinnedBuffer<'ctx, T> {
    /// Allocates `len` elements of page-locked host memory set to zero bytes.
    pub fn zeroed<P: Allocating>(ctx: ContextGuard<'ctx, P>, len: usize) -> Result<Self> {
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
                let refused = Error::with_detail(
                    "PinnedBuffer::zeroed",
                    ErrorCode::InvalidValue,
                    format!(
                        "the driver's page-locked memory at {:p} is not aligned for `{}` (alignment {})",
                        p.as_ptr(),
                        std::any::type_name::<T>(),
                        std::mem::align_of::<T>()
                    ),
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
                crate::context::deferred::Kind::Pinned,
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
    pub fn from_slice<P: Allocating>(ctx: ContextGuard<'ctx, P>, src: &[T]) -> Result<Self> {
        let mut buf = Self::zeroed(ctx, src.len())?;
        buf.copy_from_slice(src);
        Ok(buf)
    }
}

// The bounds are on the methods, not on the impl: a run-phase guard then finds the method
// and fails the bound with `Allocating`'s own message (a bound on the impl would hide the
// method, and rustc would only say that the method's trait bounds were not satisfied).
impl<'ctx, P: Phase> ContextGuard<'ctx, P> {
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
        pool: &crate::MemoryPool<'ctx>,
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
        pool: &crate::MemoryPool<'ctx>,
        src: &[T],
    ) -> Result<DeviceBuffer<'ctx, T>>
    where
        P: Allocating,
    {
        DeviceBuffer::from_slice_in(self, pool, src)
    }

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
        let p = self.ptr.as_ptr().cast::<c_void>();
        let free = || {
            // SAFETY: `p` came from cuMemHostAlloc in `ctx`, which the brand keeps alive; no
            // copy can still use it (they only run inside a scope that borrows the buffer),
            // and the buffer is not used again (dropped, or forgotten by `close`).
            unsafe { driver::mem_free_host(p) }
        };
        // SAFETY: the brand keeps the context alive.
        unsafe { context::in_context(self.ctx, free) }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The derive's expansion names `::cuda_brand`, which `extern crate self as cuda_brand`
    /// makes work inside the crate too.
    #[cfg(feature = "derive")]
    #[test]
    fn the_derive_works_inside_the_crate() {
        #[derive(Clone, Copy, crate::DeviceCopy)]
        #[repr(C)]
        struct Inside {
            a: u32,
            b: [u16; 2],
            c: (u8, u8, u8, u8),
        }
        fn size_if_device_copy<T: DeviceCopy>() -> usize {
            size_of::<T>()
        }
        assert_eq!(size_if_device_copy::<Inside>(), 12);
    }

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
    fn the_try_forms_refuse_bad_input_before_the_driver() {
        // SAFETY: a view that is never dereferenced: every call below that could reach the
        // driver fails its check first.
        let dst = unsafe { DeviceSlice::<'static, u32>::from_raw_parts_mut(0x1000, 4) };
        // SAFETY: as above, disjoint from `dst`.
        let src = unsafe { DeviceSlice::<'static, u32>::from_raw_parts(0x2000, 3) };
        let e = dst.try_copy_from_host(&[1, 2, 3]).unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("copy_from_host", ErrorCode::InvalidValue)
        );
        assert_eq!(
            e.to_string(),
            "copy_from_host failed: CUDA_ERROR_INVALID_VALUE (invalid argument): destination has 4 elements but source has 3"
        );
        let e = dst.try_copy_to_host(&mut [0; 5]).unwrap_err();
        assert_eq!(
            e.detail(),
            Some("destination has 5 elements but source has 4")
        );
        let e = dst.try_copy_from_device(src).unwrap_err();
        assert_eq!(
            (e.call(), e.detail()),
            (
                "copy_from_device",
                Some("destination has 4 elements but source has 3")
            )
        );
        let e = src.try_split_at(4).unwrap_err();
        assert_eq!(
            (e.call(), e.detail()),
            ("DeviceSlice::split_at", Some("mid 4 > len 3"))
        );
        let (left, right) = src.try_split_at(3).unwrap();
        assert_eq!((left.len(), right.len()), (3, 0));
        let e = dst.try_split_at_mut(5).unwrap_err();
        assert_eq!(e.detail(), Some("mid 5 > len 4"));
        assert!(dst.try_split_at_mut(2).is_ok());
        let e = src.try_chunks(0).err().unwrap();
        assert_eq!(
            (e.call(), e.detail()),
            ("DeviceSlice::chunks", Some("chunk size must be non-zero"))
        );
        assert_eq!(src.try_chunks(2).unwrap().len(), 2);
        assert!(dst.try_chunks_mut(0).is_err());
        // the panicking forms panic with the same text
        let panicked = std::panic::catch_unwind(|| {
            // SAFETY: as above.
            let v = unsafe { DeviceSlice::<'static, u32>::from_raw_parts(0x2000, 3) };
            let _ = v.split_at(4);
        })
        .unwrap_err();
        assert_eq!(
            panicked.downcast_ref::<String>().map(String::as_str),
            Some("DeviceSlice::split_at: mid 4 > len 3")
        );
        let panicked =
            std::panic::catch_unwind(|| check_lengths("copy_to_host", 5, 4)).unwrap_err();
        assert_eq!(
            panicked.downcast_ref::<String>().map(String::as_str),
            Some("copy_to_host: destination has 5 elements but source has 4")
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
