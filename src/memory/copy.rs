//! What may live in GPU memory: [`DeviceCopy`] (plain data without padding) and
//! [`Memset`] (what the driver can fill), with the crate's implementations for numbers and
//! arrays.

use super::sealed;
use crate::driver::Pattern;

/// Types that may be copied to and from the GPU as plain bytes: plain data without
/// padding.
///
/// # Safety
///
/// Three promises, the same for every implementation (the crate's, the derive's and a
/// hand-written one):
///
/// * every bit pattern of the type's size is a valid value (the GPU may write any bytes);
/// * the type owns nothing (no references, pointers the host would follow, heap memory or
///   `Drop`);
/// * it has no padding: every byte of every value belongs to a field (recursively), so
///   every byte is initialised and the crate may move values as bytes of their own.
///
/// That is why `bool`, `char`, references and `NonZero*` are not `DeviceCopy`, and neither
/// are tuples.
///
/// # One rule: no padding, so no tuples
///
/// Padding bytes are whatever host memory held there, and a copy carries them to the GPU
/// (and code that reads them as values, a SIMD load of a slice's bytes for one, has
/// undefined behaviour). So no `DeviceCopy` type has any: the numbers have none, nor do
/// the library types (`cublas::F16`, `cufft::Complex32`, ...), an array `[T; N]` of a
/// `DeviceCopy` `T` has none (elements follow each other without gaps, an element's size
/// being its stride), and the derive refuses a struct with any.
///
/// Tuples are not `DeviceCopy`, not even those without padding (`(u32, u32)`): Rust has
/// no trait for "padding-free", so an impl for tuples could only be checked by an assertion
/// evaluated when a function that moves bytes is instantiated, an error that `cargo check`
/// does not report (only `cargo build` does) and that every such function would have to
/// repeat. A tuple's field order is Rust's choice anyway, so no kernel could read its
/// fields. Use a `#[repr(C)]` struct with `#[derive(DeviceCopy)]` instead (the derive
/// checks it at its definition, reliably), or an array `[T; N]` for fields of one type
/// (`(u32, u32)` becomes `[u32; 2]`). Kernel parameter lists are tuples of another trait
/// ([`KernelParams`](crate::KernelParams)), which this rule does not touch.
///
/// # Your own types: `#[derive(DeviceCopy)]`
///
/// Derive it (feature `derive`, on by default) on a `#[repr(C)]` struct, so that a kernel
/// sees the same layout as CUDA C's `struct`, together with `Clone` and `Copy`. The derive
/// checks the contract at compile time, with an error on the offending attribute or field:
/// `#[repr(C)]` (or `#[repr(transparent)]`) is there, every field is `DeviceCopy` (fields
/// of type `bool`, `char`, `NonZero*`, references and raw pointers are named), and there is
/// no padding: between fields, at the end, or inside a field's type (a type implemented by
/// hand, whose absence of padding no compiler has checked). Enums, unions and generic
/// structs are refused. See [the derive](derive@crate::DeviceCopy), and the cases in
/// `ui-tests/fail/7_derive/`. Derived structs nest, and arrays of them are `DeviceCopy`.
/// The derive's expansion is the crate's own `unsafe impl`, allowed under
/// `#![deny(unsafe_code)]` (not under `forbid`, which no code may lift).
///
/// Writing `unsafe impl DeviceCopy for MyType {}` by hand is still possible, for what the
/// derive refuses (a generic struct, at each type you use); it is then your promise of all
/// three points above, with no check. Alignments above the driver's (256 bytes for device
/// memory, a page for pinned memory) are checked where the host dereferences the memory
/// ([`PinnedBuffer`](super::PinnedBuffer) refuses them).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot live in GPU memory: it is not `DeviceCopy`",
    label = "not plain data the GPU may read and write",
    note = "the GPU may write any bytes, so only types for which every bit pattern is a value, without padding, may live there: numbers, arrays of them, and `#[repr(C)]` structs of them with `#[derive(DeviceCopy)]` (not tuples, which may have padding: such a struct, or an array for fields of one type)",
    note = "`bool`, `char`, references, pointers and `NonZero*` are not: store a `u8` for a flag, a `u32` for a character",
    note = "see the guide, chapter 8 (`cuda_brand::guide`)"
)]
pub unsafe trait DeviceCopy: Copy + 'static {
    /// Whether the type's absence of padding was checked by a compiler or by this crate:
    /// true for the numbers, for arrays of such types, for the crate's library types and
    /// for `#[derive(DeviceCopy)]` structs (the derive checks its fields with it); false,
    /// as a default, for types implemented by hand, which the derive therefore refuses as
    /// fields. Not part of the API.
    #[doc(hidden)]
    const __PADDING_FREE: bool = false;
}

macro_rules! device_copy {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number: every bit pattern is a value, no padding, it owns
        // nothing.
        unsafe impl DeviceCopy for $t {
            const __PADDING_FREE: bool = true;
        }
    )* };
}
device_copy!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64
);

// SAFETY: an array of plain-data elements without padding is plain data without padding:
// the elements follow each other without gaps (an element's size is its stride).
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {
    const __PADDING_FREE: bool = T::__PADDING_FREE;
}

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
    use std::mem::size_of;

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
            c: [u8; 4],
        }
        fn size_if_device_copy<T: DeviceCopy>() -> usize {
            size_of::<T>()
        }
        assert_eq!(size_if_device_copy::<Inside>(), 12);
    }
}
