//! What may live in GPU memory: [`DeviceCopy`] (plain data) and [`Memset`] (what the
//! driver can fill), with the crate's implementations for numbers, arrays and tuples.

use std::mem::size_of;

use super::sealed;
use crate::driver::Pattern;

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
/// pinned memory) are checked where the host dereferences the memory
/// ([`PinnedBuffer`](super::PinnedBuffer) refuses them).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The derive's expansion names `::cuda_brand`, which `extern crate self as cuda_brand`
    /// makes work inside the crate too.
    #[cfg(feature = "derive")]
    #[test]
    fn the_derive_works_inside_the_crate() {
        #[derive(Clone, Copy, cuda_brand_derive::DeviceCopy)]
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
}
