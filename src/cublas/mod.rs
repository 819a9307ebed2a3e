//! cuBLAS (feature `cublas`): dense linear algebra on the GPU, GEMM for `f32`, `f64`,
//! [`F16`] and [`Bf16`] (`cublasGemmEx`, with compute types and math modes), strided-batched
//! GEMM, GEMV, AXPY, DOT, NRM2 and SCAL, with the brand of the handle's context and every
//! extent checked before cuBLAS is called.
//!
//! The element types are sealed: [`GemmType`] is implemented for `f32`, `f64`, [`F16`] and
//! [`Bf16`] only (each names the `cudaDataType` cuBLAS reads), [`Real`] for `f32` and `f64`
//! (GEMV and the level-1 operations), so no user type decides how many bytes cuBLAS reads.
//!
//! cuBLAS is loaded at run time, like the driver: the file `CUDA_BRAND_CUBLAS_LIBRARY`
//! names, else the first of `libcublas.so.13`, `libcublas.so.12`, `libcublas.so` that loads
//! from the loader's search path, `$CUDA_HOME/lib64` or `/usr/local/cuda/lib64` (cuBLAS
//! loads its `libcublasLt` itself). Building needs nothing. PyTorch's CUDA wheels ship
//! cuBLAS in `<site-packages>/nvidia/cublas/lib/`. Without it, every call is an error with
//! [`ErrorCode::CublasNotFound`](crate::ErrorCode::CublasNotFound) naming what was tried and
//! the variable.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::cublas::{Blas, Gemm, Op};
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let blas = Blas::new(ctx)?;
//!     let (m, n, k) = (64, 32, 16);
//!     let a = ctx.from_slice(&vec![1.0f32; k * m])?; // stored k × m: used transposed
//!     let b = ctx.from_slice(&vec![2.0f32; k * n])?;
//!     let mut c = ctx.zeroed::<f32>(m * n)?;
//!     let mut norm = ctx.zeroed::<f32>(1)?;
//!     ctx.new_stream()?.scope(|s| {
//!         let g = Gemm::new(m, n, k).ops(Op::T, Op::N).alpha(0.5);
//!         let cv = s.bind_mut(&mut c); // C, for two operations of the scope
//!         blas.gemm(s, &g, &a, &b, cv)?; // C = 0.5 Aᵀ B: every element 16
//!         blas.nrm2(s, cv.into_ref(), &mut norm) // in stream order, after the GEMM
//!     })?;
//!     assert_eq!(c.to_vec()?[0], 16.0);
//!     assert_eq!(norm.to_vec()?[0], 16.0 * ((m * n) as f32).sqrt());
//!     Ok(())
//! })
//! # }
//! ```
//!
//! # What the brand and the checks add
//!
//! cuBLAS's C API takes a handle, raw device pointers, dimensions and a stream, and trusts
//! all of them. Here:
//!
//! 1. **A handle lives inside its context.** [`Blas<'ctx>`](Blas) carries its context's
//!    brand: it cannot leave the `with_context` closure, nor queue work on another
//!    context's stream (compile errors, the `compile_fail` tests of [`Blas`]).
//! 2. **Work runs in stream scopes.** Every operation takes a
//!    [`StreamScope`](crate::StreamScope) of the handle's context first, inputs as
//!    [`IntoDeviceRef`](crate::scope::IntoDeviceRef) (shared borrows), outputs as
//!    [`IntoDeviceMut`](crate::scope::IntoDeviceMut) (exclusive): the buffers and the
//!    handle stay borrowed until the scope has synchronized, and in a multi-stream scope the
//!    operation is ordered with the other streams' work on the same memory. The handle's
//!    stream is set to the scope's on every call (`cublasSetStream_v2`).
//! 3. **Every extent is checked before the call** (`ErrorCode::InvalidInput` with an [`Invalid`](crate::Invalid), naming the
//!    operation, then the argument in the detail): `m`, `n`, `k`, leading dimensions,
//!    batch count and strides against cuBLAS's `int` and `long long`; `lda ≥ max(1, rows
//!    of A as stored)` (likewise `ldb`, `ldc`); each buffer against what its matrix spans
//!    given the transposes, `ld × (cols - 1) + rows` elements (plus `stride × (count - 1)`
//!    for a batch), in overflow-checked arithmetic; a batch's C stride against its
//!    matrices overlapping; level-1 vectors of one length; and an output overlapping any
//!    input (two views of one bound buffer, which the borrow checker cannot see).
//! 4. **Scalars are sound.** `alpha` and `beta` are host values read before the call returns
//!    (`CUBLAS_POINTER_MODE_HOST`); DOT and NRM2 write their result to a one-element device
//!    buffer in stream order (`CUBLAS_POINTER_MODE_DEVICE`), never to host memory that
//!    cuBLAS would write later.
//! 5. **The workspace is the handle's.** Each call uses cuBLAS's default workspace pool,
//!    which belongs to the handle (`cublasSetStream_v2` resets the handle to it) and is
//!    freed by `cublasDestroy_v2` when the handle drops, after every scope that used it has
//!    synchronized (the scopes borrow the handle) and after cuBLAS's own device
//!    synchronization there. cuBLAS supports one handle on several streams at once (it
//!    picks a workspace per stream; its documentation names this only as a source of
//!    run-to-run differences, see "Results reproducibility").
//!
//! Not wrapped: user workspaces (`cublasSetWorkspace`), strided vectors (increments other
//! than 1: pass a contiguous view), complex types, and cuBLASLt.
//!
//! # Errors
//!
//! A failed cuBLAS call is an [`Error`](crate::Error) naming the entry point, with
//! [`ErrorCode::Cublas`](crate::ErrorCode::Cublas) and the status's name:
//! `cublasGemmEx failed: CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not
//! supported)`. The crate's own checks name the crate's call:
//! `Blas::gemm failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw
//! it): lda is 3, less than
//! max(1, rows of A) = 4: A is stored with 4 rows`.

// The rooms: `sys.rs` (the library), `handle.rs` (the handle), `types.rs` (element types,
// transposes, descriptions), `half.rs` (16-bit floats), `check.rs` (every extent, before
// cuBLAS), `ops.rs` (the operations).
mod check;
mod half;
mod handle;
mod ops;
mod sys;
mod types;

pub use half::{Bf16, F16};
pub use handle::Blas;
pub use ops::Real;
pub use types::{Batch, Compute, Gemm, GemmType, Gemv, MathMode, Op, Scalar};

use crate::error::Result;

/// The environment variable that names the cuBLAS library to load (a path, or any name the
/// platform's loader resolves).
pub const CUBLAS_LIBRARY_VAR: &str = sys::CUBLAS_LIBRARY_VAR;

/// The cuBLAS library's version, `(major, minor, patch)` (`cublasGetProperty`), loading
/// the library if it is not yet loaded. Needs no GPU.
///
/// ```no_run
/// let (major, _, _) = cuda_brand::cublas::version()?;
/// assert!(major >= 12);
/// # Ok::<(), cuda_brand::Error>(())
/// ```
pub fn version() -> Result<(i32, i32, i32)> {
    sys::version()
}

// The thread rules, as the docs state them.
mod facts {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(Blas<'static>: Send);
    assert_not_impl_any!(Blas<'static>: Sync);
    assert_impl_all!(F16: Send, Sync, Copy);
    assert_impl_all!(Bf16: Send, Sync, Copy);
}
