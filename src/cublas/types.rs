//! The element and scalar types of cuBLAS operations, the transposes, compute types and
//! math modes, and the descriptions of a GEMM ([`Gemm`], with [`Batch`]) and a GEMV
//! ([`Gemv`]).

use std::ffi::c_int;

use super::half::{Bf16, F16};
use crate::error::{Error, Invalid, Result};
use crate::memory::DeviceCopy;

/// What is done to a matrix operand before the product (`cublasOperation_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Op {
    /// The matrix as stored (`CUBLAS_OP_N`).
    #[default]
    N,
    /// Its transpose (`CUBLAS_OP_T`; for real types, also what `CUBLAS_OP_C` does).
    T,
}

impl Op {
    /// The `cublasOperation_t` value.
    pub const fn raw(self) -> c_int {
        match self {
            Op::N => 0,
            Op::T => 1,
        }
    }
}

/// How a GEMM computes (`cublasComputeType_t`). The scalars' type follows from the
/// element type: `f64` for `f64` matrices (compute types `Default` and `Pedantic` only),
/// `f32` for `f32`, [`F16`] and [`Bf16`] matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compute {
    /// In the scalar type, tensor cores allowed where they keep its precision
    /// (`CUBLAS_COMPUTE_32F`, `CUBLAS_COMPUTE_64F`).
    #[default]
    Default,
    /// In the scalar type, no reduced-precision shortcut at all
    /// (`CUBLAS_COMPUTE_32F_PEDANTIC`, `CUBLAS_COMPUTE_64F_PEDANTIC`).
    Pedantic,
    /// `f32` accumulation with inputs rounded to half precision
    /// (`CUBLAS_COMPUTE_32F_FAST_16F`).
    FastF16,
    /// `f32` accumulation with inputs rounded to bfloat16 (`CUBLAS_COMPUTE_32F_FAST_16BF`).
    FastBf16,
    /// `f32` accumulation with inputs rounded to TF32 (`CUBLAS_COMPUTE_32F_FAST_TF32`).
    FastTf32,
}

/// The handle's math mode (`cublasMath_t`), set with
/// [`Blas::set_math_mode`](super::Blas::set_math_mode): whether the legacy calls (GEMV,
/// and GEMM's default compute type) may use tensor cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MathMode {
    /// `CUBLAS_DEFAULT_MATH`: tensor cores where precision is kept.
    #[default]
    Default,
    /// `CUBLAS_PEDANTIC_MATH`: the prescribed precision and standardized arithmetic only.
    Pedantic,
    /// `CUBLAS_TF32_TENSOR_OP_MATH`: single-precision work may use TF32 tensor cores.
    Tf32,
}

impl MathMode {
    /// The `cublasMath_t` value.
    pub const fn raw(self) -> c_int {
        match self {
            MathMode::Default => 0,
            MathMode::Pedantic => 2,
            MathMode::Tf32 => 3,
        }
    }
}

pub(crate) mod sealed {
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `GemmType` (nor `Scalar` or `Real`): the trait is sealed",
        note = "cuBLAS's element and scalar types are `f32`, `f64`, `F16` and `Bf16`, so that no user type decides which `cudaDataType` cuBLAS reads, and so how many bytes",
        note = "see `cuda_brand::cublas`"
    )]
    pub trait Sealed {}
}

/// The type of a GEMM's `alpha` and `beta`, passed from the host (`f32` or `f64`).
/// Sealed.
pub trait Scalar: Copy + sealed::Sealed {
    /// 1.
    const ONE: Self;
    /// 0.
    const ZERO: Self;
    /// Whether this is `f64` (whose compute types are the `64F` ones).
    #[doc(hidden)]
    const DOUBLE: bool;
}

impl sealed::Sealed for f32 {}
impl sealed::Sealed for f64 {}
impl sealed::Sealed for F16 {}
impl sealed::Sealed for Bf16 {}

impl Scalar for f32 {
    const ONE: f32 = 1.0;
    const ZERO: f32 = 0.0;
    const DOUBLE: bool = false;
}
impl Scalar for f64 {
    const ONE: f64 = 1.0;
    const ZERO: f64 = 0.0;
    const DOUBLE: bool = true;
}

/// A matrix element type of [`Blas::gemm`](super::Blas::gemm): `f32`, `f64`, [`F16`],
/// [`Bf16`], each with its `cudaDataType` and the type of its scalars. Sealed: the data
/// type decides how many bytes cuBLAS reads per element.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an element type cuBLAS's GEMM takes here",
    note = "the GEMM element types are `f32`, `f64`, `cuda_brand::cublas::F16` and `cuda_brand::cublas::Bf16`",
    note = "see `cuda_brand::cublas`"
)]
pub trait GemmType: DeviceCopy + sealed::Sealed {
    /// The type of `alpha` and `beta`.
    type Scalar: Scalar;
    /// The `cudaDataType` value (`CUDA_R_32F` = 0, `CUDA_R_64F` = 1, `CUDA_R_16F` = 2,
    /// `CUDA_R_16BF` = 14).
    const DATA_TYPE: c_int;
}

impl GemmType for f32 {
    type Scalar = f32;
    const DATA_TYPE: c_int = 0;
}
impl GemmType for f64 {
    type Scalar = f64;
    const DATA_TYPE: c_int = 1;
}
impl GemmType for F16 {
    type Scalar = f32;
    const DATA_TYPE: c_int = 2;
}
impl GemmType for Bf16 {
    type Scalar = f32;
    const DATA_TYPE: c_int = 14;
}

// The sizes cuBLAS assumes for each data type are the Rust types' sizes.
const _: () = {
    use std::mem::size_of;
    assert!(size_of::<f32>() == 4 && size_of::<f64>() == 8);
    assert!(size_of::<F16>() == 2 && size_of::<Bf16>() == 2);
};

/// The `cublasComputeType_t` of `compute` for scalars of type `S`, or an error naming
/// `what` (`f64` has no fast compute types).
pub(crate) fn compute_type<S: Scalar>(what: &'static str, compute: Compute) -> Result<c_int> {
    Ok(match (S::DOUBLE, compute) {
        (false, Compute::Default) => 68,
        (false, Compute::Pedantic) => 69,
        (false, Compute::FastF16) => 74,
        (false, Compute::FastBf16) => 75,
        (false, Compute::FastTf32) => 77,
        (true, Compute::Default) => 70,
        (true, Compute::Pedantic) => 71,
        (true, other) => {
            return Err(Error::invalid_input(
                what,
                Invalid::argument(format!(
                    "an f64 GEMM computes in f64 (Default or Pedantic), not {other:?}"
                )),
            ));
        }
    })
}

/// A GEMM, `C = alpha op(A) op(B) + beta C`, column-major as in cuBLAS: `op(A)` is
/// `m × k`, `op(B)` `k × n`, `C` `m × n`. Made with [`Gemm::new`] (no transposes,
/// `alpha` 1, `beta` 0, packed leading dimensions: the stored matrix's row count), then
/// changed by its methods.
///
/// ```
/// use cuda_brand::cublas::{Compute, Gemm, Op};
/// // C (4 × 2) = 2 Aᵀ B + C, with A stored 3 × 4 (so k = 3) in a taller buffer
/// let g = Gemm::new(4, 2, 3).ops(Op::T, Op::N).alpha(2.0f32).beta(1.0).lda(8);
/// assert_eq!(g.leading_dimensions(), (8, 3, 4));
/// let g = g.compute(Compute::FastTf32);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemm<S> {
    pub(crate) ops: (Op, Op),
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) alpha: S,
    pub(crate) beta: S,
    lds: (Option<usize>, Option<usize>, Option<usize>),
    pub(crate) compute: Compute,
}

impl<S: Scalar> Gemm<S> {
    /// An `m × n` result of a product over `k`, with no transposes, `alpha` 1, `beta` 0,
    /// packed leading dimensions and the default compute type.
    pub fn new(m: usize, n: usize, k: usize) -> Gemm<S> {
        Gemm {
            ops: (Op::N, Op::N),
            m,
            n,
            k,
            alpha: S::ONE,
            beta: S::ZERO,
            lds: (None, None, None),
            compute: Compute::Default,
        }
    }

    /// The operations on A and B.
    pub fn ops(self, a: Op, b: Op) -> Gemm<S> {
        Gemm {
            ops: (a, b),
            ..self
        }
    }

    /// `alpha`.
    pub fn alpha(self, alpha: S) -> Gemm<S> {
        Gemm { alpha, ..self }
    }

    /// `beta` (0: C is only written; cuBLAS does not read it then).
    pub fn beta(self, beta: S) -> Gemm<S> {
        Gemm { beta, ..self }
    }

    /// A's leading dimension (default: the rows of A as stored, `m` or `k`).
    pub fn lda(self, lda: usize) -> Gemm<S> {
        Gemm {
            lds: (Some(lda), self.lds.1, self.lds.2),
            ..self
        }
    }

    /// B's leading dimension (default: the rows of B as stored, `k` or `n`).
    pub fn ldb(self, ldb: usize) -> Gemm<S> {
        Gemm {
            lds: (self.lds.0, Some(ldb), self.lds.2),
            ..self
        }
    }

    /// C's leading dimension (default: `m`).
    pub fn ldc(self, ldc: usize) -> Gemm<S> {
        Gemm {
            lds: (self.lds.0, self.lds.1, Some(ldc)),
            ..self
        }
    }

    /// The compute type.
    pub fn compute(self, compute: Compute) -> Gemm<S> {
        Gemm { compute, ..self }
    }

    /// `(lda, ldb, ldc)`, the packed ones where none was given: the stored row counts
    /// (`max(1, rows)`, as cuBLAS requires).
    pub fn leading_dimensions(&self) -> (usize, usize, usize) {
        let rows_a = match self.ops.0 {
            Op::N => self.m,
            Op::T => self.k,
        };
        let rows_b = match self.ops.1 {
            Op::N => self.k,
            Op::T => self.n,
        };
        (
            self.lds.0.unwrap_or(rows_a.max(1)),
            self.lds.1.unwrap_or(rows_b.max(1)),
            self.lds.2.unwrap_or(self.m.max(1)),
        )
    }

    /// The elements of one packed matrix `(A, B, C)`: the default strides of a
    /// [`Batch::packed`].
    pub(crate) fn extents(&self) -> (usize, usize, usize) {
        let (lda, ldb, ldc) = self.leading_dimensions();
        let extent = |ld: usize, cols: usize, rows: usize| {
            if rows == 0 || cols == 0 {
                0
            } else {
                ld.saturating_mul(cols - 1).saturating_add(rows)
            }
        };
        let (a_rows, a_cols) = super::check::Matrix::stored(self.ops.0, self.m, self.k);
        let (b_rows, b_cols) = super::check::Matrix::stored(self.ops.1, self.k, self.n);
        (
            extent(lda, a_cols, a_rows),
            extent(ldb, b_cols, b_rows),
            extent(ldc, self.n, self.m),
        )
    }
}

/// A strided batch of GEMMs ([`Blas::gemm_strided_batched`](super::Blas::gemm_strided_batched)):
/// `count` products, matrix `i` of A at element `i × stride_a` of its buffer, and so on.
/// A stride of 0 for A or B uses one matrix for every product; C's stride must keep its
/// matrices apart (checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub(crate) count: usize,
    pub(crate) strides: Option<(usize, usize, usize)>,
}

impl Batch {
    /// `count` products of matrices stored one after another (each stride the matrix's
    /// extent, `ld × (cols - 1) + rows`).
    pub fn packed(count: usize) -> Batch {
        Batch {
            count,
            strides: None,
        }
    }

    /// `count` products with the given strides, in elements.
    pub fn strided(count: usize, stride_a: usize, stride_b: usize, stride_c: usize) -> Batch {
        Batch {
            count,
            strides: Some((stride_a, stride_b, stride_c)),
        }
    }
}

/// A GEMV, `y = alpha op(A) x + beta y`, with `A` stored `m × n` column-major. Made with
/// [`Gemv::new`] (no transpose, `alpha` 1, `beta` 0, `lda = max(1, m)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemv<S> {
    pub(crate) op: Op,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) alpha: S,
    pub(crate) beta: S,
    pub(crate) lda: Option<usize>,
}

impl<S: Scalar> Gemv<S> {
    /// A product with the `m × n` matrix A.
    pub fn new(m: usize, n: usize) -> Gemv<S> {
        Gemv {
            op: Op::N,
            m,
            n,
            alpha: S::ONE,
            beta: S::ZERO,
            lda: None,
        }
    }

    /// The operation on A (`Op::T`: `x` has `m` elements, `y` `n`).
    pub fn op(self, op: Op) -> Gemv<S> {
        Gemv { op, ..self }
    }

    /// `alpha`.
    pub fn alpha(self, alpha: S) -> Gemv<S> {
        Gemv { alpha, ..self }
    }

    /// `beta`.
    pub fn beta(self, beta: S) -> Gemv<S> {
        Gemv { beta, ..self }
    }

    /// A's leading dimension (default `max(1, m)`).
    pub fn lda(self, lda: usize) -> Gemv<S> {
        Gemv {
            lda: Some(lda),
            ..self
        }
    }
}
