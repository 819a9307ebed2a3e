//! The parameter kinds of a kernel's declared list ([`In`], [`Out`], [`InPtr`], [`OutPtr`],
//! [`ByValue`] and the numbers), the sealed traits that lay its arguments out for the
//! driver, and the check that an [`Out`] or [`OutPtr`] argument overlaps no other.
//!
//! | kind | C parameters | the kernel | pass |
//! |---|---|---|---|
//! | [`In<T>`] | `const T *p, size_t p_len` | reads `p[0..p_len]` | `&buffer`, `&buffer[range]`, a [`DeviceRef`](crate::DeviceRef), a [`DeviceMut`](crate::DeviceMut) |
//! | [`Out<T>`] | `T *p, size_t p_len` | reads and writes `p[0..p_len]` | `&mut buffer`, `&mut buffer[range]`, a [`DeviceMut`](crate::DeviceMut) |
//! | [`InPtr<T>`] | `const T *p` | reads inside the memory passed; how far is the declaration's promise | as for `In<T>`, and `&` a pitched buffer ([`DeviceBuffer2D`], [`DeviceBuffer3D`]) |
//! | [`OutPtr<T>`] | `T *p` | reads and writes inside the memory passed; how far is the declaration's promise | as for `Out<T>`, and `&mut` a pitched buffer |
//! | `u8` ... `f64`, [`ByValue<T>`] | the value | gets a copy | a value of exactly the type |
//!
//! A pointer kind is borrowed, checked for overlap and ordered exactly as the slice kind
//! beside it: the memory it touches is the whole slice (or pitched allocation, `pitch ×
//! rows` bytes) passed. Only the length does not reach the kernel, so what keeps its
//! accesses inside that memory is the declaration's promise
//! ([`Module::kernel`](crate::Module::kernel), "Pointer parameters"), which covers the scalar
//! arguments and configurations of every launch the program makes.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::size_of;

use super::sealed;
#[cfg(doc)]
use super::{Kernel, KernelMut, ScopedKernel};
use crate::error::Error;
use crate::memory::{
    DeviceBuffer, DeviceBuffer2D, DeviceBuffer3D, DeviceCopy, DeviceSlice, overlap_error,
};
use crate::span::Span;

/// A slice parameter the kernel reads: `const T *p, size_t p_len` in C. Pass `&buffer`,
/// `&buffer[range]`, a [`DeviceRef`](crate::DeviceRef) or a [`DeviceMut`](crate::DeviceMut).
pub struct In<T>(PhantomData<T>);

/// A slice parameter the kernel writes: `T *p, size_t p_len` in C. Pass `&mut buffer`,
/// `&mut buffer[range]` or a [`DeviceMut`](crate::DeviceMut). Its memory must not overlap any other slice
/// argument of the launch.
pub struct Out<T>(PhantomData<T>);

/// A pointer parameter the kernel reads: `const T *p` in C, one parameter, no length. Pass
/// what [`In<T>`] takes (`&buffer`, `&buffer[range]`, a [`DeviceRef`](crate::DeviceRef), a
/// [`DeviceMut`](crate::DeviceMut)), or `&` a pitched buffer ([`DeviceBuffer2D`],
/// [`DeviceBuffer3D`]: its first row; its pitch is
/// [`pitch_bytes`](DeviceBuffer2D::pitch_bytes)). The crate borrows, orders and checks it
/// as an `In<T>` of the same memory; that the kernel reads only inside it is the
/// declaration's promise ([`Module::kernel`](crate::Module::kernel), "Pointer parameters").
pub struct InPtr<T>(PhantomData<T>);

/// A pointer parameter the kernel may write: `T *p` in C, one parameter, no length. Pass
/// what [`Out<T>`] takes (`&mut buffer`, `&mut buffer[range]`, a
/// [`DeviceMut`](crate::DeviceMut)), or `&mut` a pitched buffer ([`DeviceBuffer2D`],
/// [`DeviceBuffer3D`]). The crate borrows, orders and checks it as an `Out<T>` of the same
/// memory (it must not overlap any other pointer or slice argument of the launch); that the
/// kernel reads and writes only inside it is the declaration's promise
/// ([`Module::kernel`](crate::Module::kernel), "Pointer parameters"). A shared borrow
/// (`&buffer`, a [`DeviceRef`](crate::DeviceRef)) does not compile for it
/// (`ui-tests/fail/5_kernels/kernel_out_ptr_given_a_shared_borrow.rs`).
pub struct OutPtr<T>(PhantomData<T>);

/// A by-value parameter of a user `DeviceCopy` type (a `#[repr(C)]` struct the kernel
/// takes by value). The primitive numbers are parameters as they are.
pub struct ByValue<T>(PhantomData<T>);

/// One parameter of a kernel's declared list: [`In<T>`], [`Out<T>`], [`InPtr<T>`],
/// [`OutPtr<T>`], [`ByValue<T>`], or a primitive number (`u8` ... `u64`, `i8` ... `i64`,
/// `usize`, `isize`, `f32`, `f64`). Sealed: no other type can be a parameter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel parameter",
    label = "not a kernel parameter",
    note = "a parameter is `In<T>` (a slice the kernel reads), `Out<T>` (a slice it writes), `InPtr<T>` or `OutPtr<T>` (a bare pointer, `const T *` or `T *`), a primitive number, or `ByValue<T>` for a `#[repr(C)]` struct that is `DeviceCopy`",
    note = "see the guide, chapter 6 (`cuda_brand::guide`)"
)]
pub trait KernelParam: sealed::Param {}

/// A kernel's whole parameter list: a tuple of [`KernelParam`]s, 1 to 12 of them. Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a kernel parameter list",
    label = "not a parameter list",
    note = "declare the parameters as a tuple of `In<T>`, `Out<T>`, `InPtr<T>`, `OutPtr<T>`, numbers and `ByValue<T>`, 1 to 12 of them; a single parameter is `(In<f32>,)`",
    note = "see the guide, chapter 6 (`cuda_brand::guide`)"
)]
pub trait KernelParams: sealed::Params {}

/// An argument that may be passed for the parameter `P` in a scope `'scope` of the context
/// `'ctx`. Sealed: the crate lays out every argument the driver sees.
///
/// The layout stays the crate's: a bound `A: KernelArg<..>` brings the hidden supertrait's
/// method into scope in any crate, but the method takes a value only the crate can make,
/// so code outside it cannot call it to learn an argument's device address (an escape the
/// [safety profile](crate#safety-profile) refuses):
///
/// ```compile_fail,E0061
/// #![deny(unsafe_code)]
/// use cuda_brand::{In, KernelArg};
///
/// fn address_of<'s, 'c, A: KernelArg<'s, 'c, In<f32>>>(arg: A) -> [u64; 2] {
///     arg.lower().0 // error: the method takes the crate's own token
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter declared as `{P}`",
    label = "the kernel's declaration says `{P}` here",
    note = "`In<T>` and `InPtr<T>` take `&buffer`, `&buffer[range]`, a `DeviceRef` or a `DeviceMut`; `Out<T>` and `OutPtr<T>` take `&mut buffer`, `&mut buffer[range]` or a `DeviceMut` (the pointer kinds also `&` and `&mut` a pitched buffer); a scalar parameter takes a value of exactly its type",
    note = "see the guide, chapter 6 (`cuda_brand::guide`)"
)]
pub trait KernelArg<'scope, 'ctx, P: KernelParam>: sealed::Arg<'scope, 'ctx, P> {}

/// Arguments for the parameter list `P`: a tuple with one [`KernelArg`] per parameter.
/// Sealed: the crate builds the `void**` array the driver reads.
#[diagnostic::on_unimplemented(
    message = "these arguments do not match the kernel's declared parameters `{P}`",
    note = "pass a tuple with one argument per declared parameter, in order (a one-parameter kernel takes `(arg,)`)",
    note = "see the guide, chapter 6 (`cuda_brand::guide`)"
)]
pub trait KernelArgs<'scope, 'ctx, P: KernelParams>: sealed::Args<'scope, 'ctx, P> {}

/// What [`StreamScope::launch`](crate::StreamScope::launch) can launch in a scope `'scope`:
/// `&kernel` for a [`Kernel`], `&mut kernel` for a [`KernelMut`] (once per scope), or a
/// [`ScopedKernel`] (any number of times). Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be launched in this scope",
    label = "not a kernel of this scope",
    note = "launch `&kernel` for a `Kernel`; a `KernelMut` (a kernel that writes its module's globals) is launched as `&mut kernel`, or bound once with `s.bind_kernel(&mut kernel)` and then launched any number of times",
    note = "see the guide, chapter 8 (`cuda_brand::guide`)"
)]
pub trait Launch<'scope, 'ctx, P: KernelParams>: sealed::Launch<'scope, 'ctx, P> {}

impl<T: DeviceCopy> sealed::Param for In<T> {
    const COUNT: usize = 2;
    const KIND: &'static str = "In";
    type Raw = [u64; 2];
    #[inline(always)]
    fn pointers(raw: &mut [u64; 2], out: &mut [*mut c_void]) {
        out[0] = (&mut raw[0] as *mut u64).cast();
        out[1] = (&mut raw[1] as *mut u64).cast();
    }
    fn slots(index: usize, out: &mut Vec<sealed::CParam>) {
        slice_slots("In", std::any::type_name::<T>(), index, out);
    }
}
impl<T: DeviceCopy> KernelParam for In<T> {}

impl<T: DeviceCopy> sealed::Param for Out<T> {
    const COUNT: usize = 2;
    const KIND: &'static str = "Out";
    type Raw = [u64; 2];
    #[inline(always)]
    fn pointers(raw: &mut [u64; 2], out: &mut [*mut c_void]) {
        <In<T> as sealed::Param>::pointers(raw, out)
    }
    fn slots(index: usize, out: &mut Vec<sealed::CParam>) {
        slice_slots("Out", std::any::type_name::<T>(), index, out);
    }
}
impl<T: DeviceCopy> KernelParam for Out<T> {}

impl<T: DeviceCopy> sealed::Param for InPtr<T> {
    const COUNT: usize = 1;
    const KIND: &'static str = "InPtr";
    type Raw = u64;
    #[inline(always)]
    fn pointers(raw: &mut u64, out: &mut [*mut c_void]) {
        out[0] = (raw as *mut u64).cast();
    }
    fn slots(index: usize, out: &mut Vec<sealed::CParam>) {
        pointer_slot("InPtr", std::any::type_name::<T>(), index, out);
    }
}
impl<T: DeviceCopy> KernelParam for InPtr<T> {}

impl<T: DeviceCopy> sealed::Param for OutPtr<T> {
    const COUNT: usize = 1;
    const KIND: &'static str = "OutPtr";
    type Raw = u64;
    #[inline(always)]
    fn pointers(raw: &mut u64, out: &mut [*mut c_void]) {
        <InPtr<T> as sealed::Param>::pointers(raw, out)
    }
    fn slots(index: usize, out: &mut Vec<sealed::CParam>) {
        pointer_slot("OutPtr", std::any::type_name::<T>(), index, out);
    }
}
impl<T: DeviceCopy> KernelParam for OutPtr<T> {}

impl<T: DeviceCopy> sealed::Param for ByValue<T> {
    const COUNT: usize = 1;
    const KIND: &'static str = "ByValue";
    type Raw = T;
    #[inline(always)]
    fn pointers(raw: &mut T, out: &mut [*mut c_void]) {
        out[0] = (raw as *mut T).cast();
    }
    fn slots(index: usize, out: &mut Vec<sealed::CParam>) {
        out.push(sealed::CParam {
            size: size_of::<T>(),
            align: std::mem::align_of::<T>(),
            what: format!(
                "`ByValue<{}>`, declared parameter {index}",
                std::any::type_name::<T>()
            ),
        });
    }
}
impl<T: DeviceCopy> KernelParam for ByValue<T> {}

/// The two C parameters of a slice: its device pointer and its `size_t` length.
fn slice_slots(kind: &str, element: &str, index: usize, out: &mut Vec<sealed::CParam>) {
    for part in ["pointer", "length"] {
        out.push(sealed::CParam {
            size: 8,
            align: 8,
            what: format!("the {part} of `{kind}<{element}>`, declared parameter {index}"),
        });
    }
}

/// The one C parameter of a pointer: its device address.
fn pointer_slot(kind: &str, element: &str, index: usize, out: &mut Vec<sealed::CParam>) {
    out.push(sealed::CParam {
        size: 8,
        align: 8,
        what: format!("the pointer `{kind}<{element}>`, declared parameter {index}"),
    });
}

/// A slice argument's C parameters (pointer and length) and the memory it touches.
#[inline(always)]
pub(crate) fn slice_raw(ptr: u64, len: usize, elem: usize, write: bool) -> ([u64; 2], Span) {
    (
        [ptr, len as u64],
        Span {
            start: ptr,
            bytes: (len * elem) as u64,
            write,
        },
    )
}

/// A pointer argument's C parameter (its address) and the memory it touches: the same
/// span as the slice argument of the same memory, [`slice_raw`]'s, so that a pointer is
/// checked for overlap and ordered exactly as a slice is.
#[inline(always)]
pub(crate) fn pointer_raw(ptr: u64, len: usize, elem: usize, write: bool) -> (u64, Span) {
    let ([ptr, _], span) = slice_raw(ptr, len, elem, write);
    (ptr, span)
}

/// `KernelArg` for the argument types of a slice or pointer parameter, lowered by `$lower`
/// ([`slice_raw`] or [`pointer_raw`]); the scope's views get theirs in `scope/views.rs`.
macro_rules! slice_args {
    ($param:ident, $write:literal, $lower:ident: $($arg:ty),*) => { $(
        impl<'scope, 'ctx, T: DeviceCopy> sealed::Arg<'scope, 'ctx, $param<T>> for $arg {
            #[inline(always)]
            fn lower(self, _: sealed::Crate) -> (<$param<T> as sealed::Param>::Raw, Span) {
                $lower(self.device_ptr(), self.len(), size_of::<T>(), $write)
            }
        }
        impl<'scope, 'ctx, T: DeviceCopy> KernelArg<'scope, 'ctx, $param<T>> for $arg {}
    )* };
}
slice_args!(In, false, slice_raw: &'scope DeviceSlice<'ctx, T>, &'scope DeviceBuffer<'ctx, T>);
slice_args!(Out, true, slice_raw: &'scope mut DeviceSlice<'ctx, T>, &'scope mut DeviceBuffer<'ctx, T>);
slice_args!(InPtr, false, pointer_raw: &'scope DeviceSlice<'ctx, T>, &'scope DeviceBuffer<'ctx, T>);
slice_args!(OutPtr, true, pointer_raw: &'scope mut DeviceSlice<'ctx, T>, &'scope mut DeviceBuffer<'ctx, T>);

/// `KernelArg` for pitched buffers, whole: a pointer to the first row, touching the whole
/// allocation (`pitch_bytes() * rows` bytes, padding included), as the scope's 2D and 3D
/// copies of them do.
macro_rules! pitched_args {
    ($param:ident, $write:literal: $($arg:ty),*) => { $(
        impl<'scope, 'ctx, T: DeviceCopy> sealed::Arg<'scope, 'ctx, $param<T>> for $arg {
            #[inline(always)]
            fn lower(self, _: sealed::Crate) -> (u64, Span) {
                (self.device_ptr(), self.span($write))
            }
        }
        impl<'scope, 'ctx, T: DeviceCopy> KernelArg<'scope, 'ctx, $param<T>> for $arg {}
    )* };
}
pitched_args!(InPtr, false: &'scope DeviceBuffer2D<'ctx, T>, &'scope DeviceBuffer3D<'ctx, T>);
pitched_args!(OutPtr, true: &'scope mut DeviceBuffer2D<'ctx, T>, &'scope mut DeviceBuffer3D<'ctx, T>);

impl<'scope, 'ctx, T: DeviceCopy> sealed::Arg<'scope, 'ctx, ByValue<T>> for T {
    #[inline(always)]
    fn lower(self, _: sealed::Crate) -> (T, Span) {
        (self, Span::NONE)
    }
}
impl<'scope, 'ctx, T: DeviceCopy> KernelArg<'scope, 'ctx, ByValue<T>> for T {}

macro_rules! scalar_params {
    ($($t:ty),*) => { $(
        impl sealed::Param for $t {
            const COUNT: usize = 1;
            const KIND: &'static str = stringify!($t);
            type Raw = $t;
            #[inline(always)]
            fn pointers(raw: &mut $t, out: &mut [*mut c_void]) {
                out[0] = (raw as *mut $t).cast();
            }
            fn slots(index: usize, out: &mut Vec<sealed::CParam>) {
                out.push(sealed::CParam {
                    size: size_of::<$t>(),
                    align: std::mem::align_of::<$t>(),
                    what: format!("`{}`, declared parameter {index}", stringify!($t)),
                });
            }
        }
        impl KernelParam for $t {}
        impl<'scope, 'ctx> sealed::Arg<'scope, 'ctx, $t> for $t {
            #[inline(always)]
            fn lower(self, _: sealed::Crate) -> ($t, Span) {
                (self, Span::NONE)
            }
        }
        impl<'scope, 'ctx> KernelArg<'scope, 'ctx, $t> for $t {}
    )* };
}
scalar_params!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);

macro_rules! kernel_params {
    ($max:literal; $n:literal; $($p:ident $a:ident $i:tt),+) => {
        impl<$($p: KernelParam),+> sealed::Params for ($($p,)+) {
            const C_PARAMS: usize = 0 $(+ <$p as sealed::Param>::COUNT)+;
            const KINDS: &'static [&'static str] = &[$(<$p as sealed::Param>::KIND),+];
            fn slots(out: &mut Vec<sealed::CParam>) {
                $(<$p as sealed::Param>::slots($i, out);)+
            }
        }
        impl<$($p: KernelParam),+> KernelParams for ($($p,)+) {}

        impl<'scope, 'ctx, $($p: KernelParam, $a: KernelArg<'scope, 'ctx, $p>),+>
            sealed::Args<'scope, 'ctx, ($($p,)+)> for ($($a,)+)
        {
            #[inline(always)]
            fn with_params<R>(
                self,
                by: sealed::Crate,
                launch: impl FnOnce(&[Span], *mut *mut c_void) -> R,
            ) -> R {
                let lowered = ($(sealed::Arg::<'scope, 'ctx, $p>::lower(self.$i, by),)+);
                let spans: [Span; $n] = [$(lowered.$i.1),+];
                let mut raw = ($(lowered.$i.0,)+);
                let mut pointers = [std::ptr::null_mut::<c_void>(); $max];
                let mut at = 0;
                $(
                    <$p as sealed::Param>::pointers(&mut raw.$i, &mut pointers[at..]);
                    at += <$p as sealed::Param>::COUNT;
                )+
                let _ = at;
                launch(&spans, pointers.as_mut_ptr())
            }
        }
        impl<'scope, 'ctx, $($p: KernelParam, $a: KernelArg<'scope, 'ctx, $p>),+>
            KernelArgs<'scope, 'ctx, ($($p,)+)> for ($($a,)+) {}
    };
}
kernel_params!(2; 1; P0 A0 0);
kernel_params!(4; 2; P0 A0 0, P1 A1 1);
kernel_params!(6; 3; P0 A0 0, P1 A1 1, P2 A2 2);
kernel_params!(8; 4; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3);
kernel_params!(10; 5; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4);
kernel_params!(12; 6; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5);
kernel_params!(14; 7; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6);
kernel_params!(16; 8; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7);
kernel_params!(18; 9; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8);
kernel_params!(20; 10; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9);
kernel_params!(22; 11; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10);
kernel_params!(24; 12; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10, P11 A11 11);

#[cold]
#[inline(never)]
pub(crate) fn launch_overlap(spans: &[Span], kinds: &[&str], i: usize, j: usize) -> Error {
    let name = |k: usize| format!("`{}` argument {k}", kinds[k]);
    overlap_error(
        "StreamScope::launch",
        [name(i), name(j)],
        &spans[i],
        &spans[j],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracker::first_overlap;
    fn span(start: u64, bytes: u64, write: bool) -> Span {
        Span {
            start,
            bytes,
            write,
        }
    }

    #[test]
    fn overlapping_writes_are_found_and_reads_may_share() {
        // two reads of the same memory are fine
        assert_eq!(
            first_overlap(&[span(0x1000, 400, false), span(0x1000, 400, false)]),
            None
        );
        // d[1..] read, d[..n-1] written: the vector_add aliasing case
        assert_eq!(
            first_overlap(&[span(0x1004, 396, false), span(0x1000, 396, true)]),
            Some((0, 1))
        );
        // adjacent, not overlapping
        assert_eq!(
            first_overlap(&[span(0x1000, 16, true), span(0x1010, 16, true)]),
            None
        );
        // empty slices and scalars never overlap
        assert_eq!(
            first_overlap(&[span(0x1000, 0, true), span(0x1000, 16, true), Span::NONE]),
            None
        );
        // the first offending pair is reported
        assert_eq!(
            first_overlap(&[
                span(0x0, 8, false),
                span(0x100, 8, false),
                span(0x2000, 8, true),
                span(0x104, 8, true)
            ]),
            Some((1, 3))
        );
    }
}
