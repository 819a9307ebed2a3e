//! Fast Fourier transforms with cuFFT (feature `cufft`): 1D, 2D and 3D plans,
//! complex-to-complex, real-to-complex and complex-to-real, in single and double precision,
//! batched, branded with their context and run in stream scopes.
//!
//! cuFFT is loaded at run time, like the driver: `libcufft.so.12`, then `.11`, from the
//! loader's search path, then `$CUDA_HOME/lib64` and `/usr/local/cuda/lib64`, or the file
//! `CUDA_BRAND_CUFFT_LIBRARY` names. Building needs nothing. PyTorch's CUDA wheels ship one
//! in `<site-packages>/nvidia/cufft/lib`. Without it every call is an error with
//! [`ErrorCode::CufftNotFound`](crate::ErrorCode::CufftNotFound) saying what was tried.
//!
//! # Plans and transforms
//!
//! An [`FftPlan<'ctx, I, O>`](FftPlan) transforms `I` elements into `O` elements:
//!
//! | plan | cuFFT | `exec` |
//! |---|---|---|
//! | `FftPlan<'ctx, Complex32, Complex32>` | C2C | `plan.exec(s, &mut output, &input, Direction::Forward)`, or `exec_in_place(s, &mut buf, direction)` |
//! | `FftPlan<'ctx, f32, Complex32>` | R2C (always forward) | `plan.exec(s, &mut output, &input)` |
//! | `FftPlan<'ctx, Complex32, f32>` | C2R (always inverse) | `plan.exec(s, &mut output, &mut input)`: cuFFT overwrites a C2R input, so it is borrowed exclusively |
//!
//! and the same with `Complex64` and `f64` (Z2Z, D2Z, Z2D). A plan is made once for a
//! shape (row-major, the last extent contiguous, one to three extents) and a batch count,
//! and used in any number of scopes of its context. Like cuFFT, transforms are
//! unnormalized: a forward then an inverse transform multiplies by the product of the shape.
//!
//! ```no_run
//! use cuda_brand::cufft::{Complex32, Direction, FftPlan};
//! use cuda_brand::prelude::*;
//! # fn main() -> cuda_brand::Result<()> {
//! with_context(&Device::get(0)?, ContextFlags::default(), |ctx| {
//!     let plan = FftPlan::<Complex32, Complex32>::new(ctx, &[8], 1)?;
//!     let signal: Vec<Complex32> = (0..8).map(|i| Complex32::new(i as f32, 0.0)).collect();
//!     let input = ctx.from_slice(&signal)?;
//!     let mut spectrum = ctx.zeroed::<Complex32>(8)?;
//!     ctx.new_stream()?.scope(|s| plan.exec(s, &mut spectrum, &input, Direction::Forward))?;
//!     assert_eq!(spectrum.to_vec()?[0], Complex32::new(28.0, 0.0)); // the sum
//!     Ok(())
//! })
//! # }
//! ```
//!
//! # What the brand and the checks add
//!
//! cuFFT's C API takes a plan handle, two raw pointers and a stream, and trusts them all:
//!
//! 1. **A plan lives inside its context.** `FftPlan<'ctx, ..>` carries the brand: it is
//!    destroyed before its context, and the plan, the scope's stream and both buffers of a
//!    transform share one context (compile errors, see [`FftPlan`]'s "The brand").
//! 2. **Every length is checked before cuFFT.** The input and output lengths must be the
//!    plan's exactly: `batch × n0 × n1 × n2` for complex data of a C2C plan and the real
//!    side of R2C/C2R, `batch × n0 × n1 × (n2 / 2 + 1)` (the last extent halved) for the
//!    complex side of R2C/C2R. Extents of zero, more than three extents, a batch of zero
//!    and sizes whose product overflows are refused when the plan is made. Both pointers of a
//!    transform must be aligned to the plan's complex type, as cuFFT requires, the real side
//!    of R2C/C2R too (a real view starting at an odd element is refused). Each error names
//!    the argument (`input`, `output`, `buf`, `shape`, `batch`).
//! 3. **Out of place is out of place.** `input` and `output` must not overlap (two views of
//!    one buffer); in-place transforms are their own method (`exec_in_place`, C2C only,
//!    whose layout is the same in and out of place).
//! 4. **Nothing is freed while the GPU uses it.** A scope borrows the plan (its work area,
//!    which cuFFT allocates and `Drop` frees) and both buffers until it has synchronized.
//! 5. **One work area, one order.** The plan's work area is written by every transform, so
//!    a plan used by two streams at once (nested scopes, `scope_pair`) runs its transforms
//!    one after the other on the GPU, in the order they were queued (an event recorded
//!    after each, waited for by the next on another stream). Make one plan per stream for
//!    transforms that overlap.
//! 6. **cuFFT runs in the plan's context.** Plans are made, run and destroyed with their
//!    context current, whatever context the thread has current (pushed and popped around
//!    the call).
//!
//! # Memory cuFFT keeps per context
//!
//! cuFFT 12 keeps one allocation per context from the first plan made in it until the
//! context is destroyed, after every plan has been destroyed (about 7 MB for a 2^20-point
//! plan on an H100 with CUDA 13.0's cuFFT; a second plan of the same size reuses it). It is
//! cuFFT's, not the crate's: the C program `docs/c/facts/cufft_context_memory.c`, with raw
//! calls only, shows the same (its `.out` and `.sanitizer.out`). The driver frees it with the
//! context, but compute-sanitizer's leak check reports it when the context is destroyed:
//! the crate's own cuFFT tests run under `--leak-check no` for that reason
//! (`tests/DRIVER_ERRORS`), and a program of yours that makes plans will see the same
//! report.
//!
//! # Errors
//!
//! A failed cuFFT call is an [`Error`](crate::Error) naming the entry point with
//! [`ErrorCode::Cufft`](crate::ErrorCode::Cufft): `cufftMakePlanMany64 failed:
//! CUFFT_INVALID_SIZE (an invalid transform size)`. The crate's own checks name the crate's
//! call and the argument: `FftPlan::exec failed: CUDA_BRAND_INVALID_INPUT (invalid input,
//! refused before the driver saw it): output has 7 elements, but the plan writes 8 (batch 1 of shape [8])`.

// The rooms: `sys.rs` (the library), `layout.rs` (the checks, before any call), `plan.rs`.
mod layout;
mod plan;
mod sys;

pub use plan::FftPlan;

use std::ffi::c_int;

use crate::error::Result;
use crate::memory::DeviceCopy;

/// The cuFFT library's version (`cufftGetVersion`, e.g. 11300), loading the library if it
/// is not yet loaded. Needs no GPU.
pub fn version() -> Result<i32> {
    sys::version()
}

/// A single-precision complex number, laid out as cuFFT's `cufftComplex` (CUDA's
/// `float2`: the real part first, 8-byte aligned).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Complex32 {
    /// The real part.
    pub re: f32,
    /// The imaginary part.
    pub im: f32,
}

/// A double-precision complex number, laid out as cuFFT's `cufftDoubleComplex` (CUDA's
/// `double2`: the real part first, 16-byte aligned).
#[repr(C, align(16))]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Complex64 {
    /// The real part.
    pub re: f64,
    /// The imaginary part.
    pub im: f64,
}

macro_rules! complex {
    ($c:ident, $r:ty) => {
        impl $c {
            /// The number `re + i·im`.
            pub const fn new(re: $r, im: $r) -> $c {
                $c { re, im }
            }

            /// The modulus `|z|`.
            pub fn norm(self) -> $r {
                self.re.hypot(self.im)
            }
        }

        // SAFETY: two numbers of one type, no padding (size twice the number's, checked
        // below), every bit pattern a value; owns nothing.
        unsafe impl DeviceCopy for $c {
            const __PADDING_FREE: bool = true;
        }

        const _: () = assert!(std::mem::size_of::<$c>() == 2 * std::mem::size_of::<$r>());
    };
}
complex!(Complex32, f32);
complex!(Complex64, f64);

/// The sign of a complex-to-complex transform's exponent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `CUFFT_FORWARD` (-1): `X[k] = Σ x[n]·e^(-2πi·kn/N)`.
    Forward,
    /// `CUFFT_INVERSE` (+1): `x[n] = Σ X[k]·e^(+2πi·kn/N)`, unnormalized.
    Inverse,
}

impl Direction {
    /// The `CUFFT_FORWARD` / `CUFFT_INVERSE` value.
    pub const fn raw(self) -> c_int {
        match self {
            Direction::Forward => -1,
            Direction::Inverse => 1,
        }
    }
}

/// The element types of a plan, `(input, output)`: `(Complex32, Complex32)` (C2C),
/// `(f32, Complex32)` (R2C), `(Complex32, f32)` (C2R), and the same in double precision.
/// Sealed: the pair decides how many bytes cuFFT reads and writes.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a pair of cuFFT element types",
    label = "not (input, output) of a cuFFT transform",
    note = "the pairs are (Complex32, Complex32), (f32, Complex32), (Complex32, f32) and the same with Complex64 and f64",
    note = "see `cuda_brand::cufft`"
)]
pub trait FftTypes: sealed::Sealed {}

pub(crate) mod sealed {
    use super::layout::Sides;

    /// What a pair of element types is to cuFFT.
    pub trait Sealed {
        /// The `cufftType`.
        const KIND: std::ffi::c_int;
        /// Which side of the transform is complex and halved, if any.
        const SIDES: Sides;
    }
}

macro_rules! fft_types {
    ($($i:ty, $o:ty => $kind:literal, $sides:ident;)*) => { $(
        impl sealed::Sealed for ($i, $o) {
            const KIND: c_int = $kind;
            const SIDES: layout::Sides = layout::Sides::$sides;
        }
        impl FftTypes for ($i, $o) {}
    )* };
}
fft_types! {
    Complex32, Complex32 => 0x29, C2C;
    f32, Complex32 => 0x2a, R2C;
    Complex32, f32 => 0x2c, C2R;
    Complex64, Complex64 => 0x69, C2C;
    f64, Complex64 => 0x6a, R2C;
    Complex64, f64 => 0x6c, C2R;
}

// The thread rules, as the docs state them.
mod facts {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(FftPlan<'static, Complex32, Complex32>: Send);
    assert_not_impl_any!(FftPlan<'static, Complex32, Complex32>: Sync);
    assert_impl_all!(Complex32: Send, Sync, DeviceCopy);
}
