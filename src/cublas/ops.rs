//! The operations of a [`Blas`] handle on a stream scope: GEMM (plain and strided-batched,
//! `cublasGemmEx`), GEMV, AXPY, DOT, NRM2, SCAL. Each checks every extent first
//! (`check.rs`), refuses an output that overlaps an input, then queues the call on the
//! scope's stream, ordered with the scope's other streams like any operation.
//!
//! **Scalars.** `alpha` and `beta` are passed from the host in `CUBLAS_POINTER_MODE_HOST`:
//! cuBLAS reads them before the call returns (they become kernel parameters), so a
//! reference to a local is sound. **Results** of DOT and NRM2 are written to device memory
//! (`CUBLAS_POINTER_MODE_DEVICE`), in stream order, to a one-element buffer the scope
//! borrows like any output: with a host pointer, cuBLAS would either block the calling
//! thread until the stream reaches the call or, under a graph capture, write the host
//! memory whenever the graph runs, long after the borrow ended.

use std::ffi::{c_int, c_void};

use super::check::{self, GemmShape};
use super::handle::Blas;
use super::sys::{self, POINTER_MODE_DEVICE, POINTER_MODE_HOST};
use super::types::{Batch, Gemm, GemmType, Gemv, Scalar, compute_type, sealed};
use crate::context::StreamKind;
use crate::error::Result;
use crate::launch::sealed::Crate;
use crate::memory::overlap_error;
use crate::scope::{DeviceMut, DeviceRef, IntoDeviceMut, IntoDeviceRef, StreamScope};
use crate::span::Span;
use crate::tracker::first_overlap;

fn read<T>(v: &DeviceRef<'_, '_, T>) -> Span {
    Span {
        start: v.device_ptr(),
        bytes: (v.len() * size_of::<T>()) as u64,
        write: false,
    }
}

fn write<T>(v: &DeviceMut<'_, '_, T>) -> Span {
    Span {
        start: v.device_ptr(),
        bytes: (v.len() * size_of::<T>()) as u64,
        write: true,
    }
}

/// Refuses an operation whose written span overlaps another of its spans.
fn no_overlap(what: &'static str, spans: &[Span], names: &[&'static str]) -> Result<()> {
    match first_overlap(spans) {
        None => Ok(()),
        Some((i, j)) => Err(overlap_error(
            what,
            [names[i], names[j]],
            &spans[i],
            &spans[j],
        )),
    }
}

/// The element types of GEMV, AXPY, DOT, NRM2 and SCAL: `f32` and `f64` (cuBLAS's `S` and
/// `D` calls). Sealed (through [`Scalar`], which only `f32` and `f64` implement).
pub trait Real: GemmType<Scalar = Self> + Scalar + sealed::Sealed {
    /// The GEMV entry point.
    #[doc(hidden)]
    const GEMV: &'static str;
    /// The AXPY entry point.
    #[doc(hidden)]
    const AXPY: &'static str;
    /// The DOT entry point.
    #[doc(hidden)]
    const DOT: &'static str;
    /// The NRM2 entry point.
    #[doc(hidden)]
    const NRM2: &'static str;
    /// The SCAL entry point.
    #[doc(hidden)]
    const SCAL: &'static str;
}

macro_rules! real {
    ($t:ty, $prefix:literal) => {
        impl Real for $t {
            const GEMV: &'static str = concat!("cublas", $prefix, "gemv_v2");
            const AXPY: &'static str = concat!("cublas", $prefix, "axpy_v2");
            const DOT: &'static str = concat!("cublas", $prefix, "dot_v2");
            const NRM2: &'static str = concat!("cublas", $prefix, "nrm2_v2");
            const SCAL: &'static str = concat!("cublas", $prefix, "scal_v2");
        }
    };
}
real!(f32, "S");
real!(f64, "D");

/// A level-1 or level-2 call's arguments, as pointers and `int`s.
#[derive(Clone, Copy)]
enum Level {
    Gemv {
        op: c_int,
        m: c_int,
        n: c_int,
        alpha: *const c_void,
        a: *const c_void,
        lda: c_int,
        x: *const c_void,
        beta: *const c_void,
        y: *mut c_void,
    },
    Axpy {
        n: c_int,
        alpha: *const c_void,
        x: *const c_void,
        y: *mut c_void,
    },
    Dot {
        n: c_int,
        x: *const c_void,
        y: *const c_void,
        result: *mut c_void,
    },
    Nrm2 {
        n: c_int,
        x: *const c_void,
        result: *mut c_void,
    },
    Scal {
        n: c_int,
        alpha: *const c_void,
        x: *mut c_void,
    },
}

/// Makes the call `c` through the `D` entry point for `f64` (`double`), else the `S` one.
///
/// # Safety
/// As for the entry point: every pointer is of `T`'s elements (and scalars of `T`), with
/// the lengths the `int`s imply (the callers in this module check every extent), on a live
/// handle whose stream and pointer mode are set.
unsafe fn level_call<T: Real>(api: &sys::Api, h: sys::cublasHandle_t, c: Level) -> c_int {
    macro_rules! call {
        ($t:ty, $gemv:ident, $axpy:ident, $dot:ident, $nrm2:ident, $scal:ident) => {
            // (every arm) the caller's promise; `T` is `$t` (`Real` is `f32` or `f64` only,
            // told apart by `Scalar::DOUBLE`), and vectors are contiguous (increment 1).
            match c {
                Level::Gemv {
                    op,
                    m,
                    n,
                    alpha,
                    a,
                    lda,
                    x,
                    beta,
                    y,
                } => {
                    // SAFETY: see above.
                    unsafe {
                        (api.$gemv)(
                            h,
                            op,
                            m,
                            n,
                            alpha.cast::<$t>(),
                            a.cast(),
                            lda,
                            x.cast(),
                            1,
                            beta.cast(),
                            y.cast(),
                            1,
                        )
                    }
                }
                Level::Axpy { n, alpha, x, y } => {
                    // SAFETY: see above.
                    unsafe { (api.$axpy)(h, n, alpha.cast::<$t>(), x.cast(), 1, y.cast(), 1) }
                }
                Level::Dot { n, x, y, result } => {
                    // SAFETY: see above.
                    unsafe { (api.$dot)(h, n, x.cast::<$t>(), 1, y.cast(), 1, result.cast()) }
                }
                Level::Nrm2 { n, x, result } => {
                    // SAFETY: see above.
                    unsafe { (api.$nrm2)(h, n, x.cast::<$t>(), 1, result.cast()) }
                }
                Level::Scal { n, alpha, x } => {
                    // SAFETY: see above.
                    unsafe { (api.$scal)(h, n, alpha.cast::<$t>(), x.cast(), 1) }
                }
            }
        };
    }
    if T::DOUBLE {
        call!(f64, dgemv, daxpy, ddot, dnrm2, dscal)
    } else {
        call!(f32, sgemv, saxpy, sdot, snrm2, sscal)
    }
}

/// The operations (feature `cublas`): each is queued at once on the stream of `scope`, a
/// scope of the handle's context, and the scope borrows the handle and the buffers until it
/// has synchronized. The scope comes first, then the description (a [`Gemm`] or
/// [`Gemv`]) or scalar, then the buffers, inputs first. Checked before cuBLAS sees
/// anything, each an error naming the operation and the argument: every dimension against
/// cuBLAS's `int`, every leading dimension against its matrix's rows, every buffer's length
/// against what the dimensions, leading dimensions, transposes, batch count and strides
/// make cuBLAS touch, a batch's output stride against overlap, and an output overlapping
/// an input.
impl<'ctx> Blas<'ctx> {
    /// Queues a GEMM (`cublasGemmEx`): `C = alpha op(A) op(B) + beta C`, column-major,
    /// described by `gemm` (dimensions, transposes, scalars, leading dimensions, compute
    /// type). `A`, `B` and `C` are `f32`, `f64`, [`F16`](super::F16) or
    /// [`Bf16`](super::Bf16) (all three one type); each buffer holds at least what its
    /// matrix spans, `ld × (cols - 1) + rows` elements.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::cublas::{Blas, Bf16, Gemm, Op};
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let blas = Blas::new(ctx)?;
    ///     let one = Bf16::from_f32(1.0);
    ///     let (a, b) = (ctx.from_slice(&[one; 6])?, ctx.from_slice(&[one; 6])?);
    ///     let mut c = ctx.zeroed::<Bf16>(4)?;
    ///     // C (2 × 2) = Aᵀ B, A and B stored 3 × 2
    ///     let g = Gemm::new(2, 2, 3).ops(Op::T, Op::N);
    ///     ctx.new_stream()?.scope(|s| blas.gemm(s, &g, &a, &b, &mut c))?;
    ///     assert!(c.to_vec()?.iter().all(|x| x.to_f32() == 3.0));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn gemm<'scope, T: GemmType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        gemm: &Gemm<T::Scalar>,
        a: impl IntoDeviceRef<'scope, 'ctx, T>,
        b: impl IntoDeviceRef<'scope, 'ctx, T>,
        c: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Blas::gemm";
        let views = (
            a.into_ref(Crate(())),
            b.into_ref(Crate(())),
            c.into_mut(Crate(())),
        );
        self.gemm_any(scope, gemm, None, views, WHAT)
    }

    /// Queues a strided batch of GEMMs (`cublasGemmStridedBatchedEx`): for `i` in
    /// `0..batch.count`, `C_i = alpha op(A_i) op(B_i) + beta C_i`, where `A_i` starts at
    /// element `i × stride_a` of `a` (likewise B and C). The strides of A and B may be 0
    /// (one matrix for every product); C's must be at least one matrix's extent, so that no
    /// element of C is written by two products.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::cublas::{Batch, Blas, Gemm};
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let blas = Blas::new(ctx)?;
    ///     // three 2 × 2 products, each A_i = i × identity, one B for all
    ///     let a = ctx.from_slice(&[0.0f64, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0])?;
    ///     let b = ctx.from_slice(&[1.0f64, 2.0, 3.0, 4.0])?;
    ///     let mut c = ctx.zeroed::<f64>(12)?;
    ///     let batch = Batch::strided(3, 4, 0, 4);
    ///     ctx.new_stream()?.scope(|s| blas.gemm_strided_batched(s, &Gemm::new(2, 2, 2), batch, &a, &b, &mut c))?;
    ///     assert_eq!(c.to_vec()?[8..], [2.0, 4.0, 6.0, 8.0]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn gemm_strided_batched<'scope, T: GemmType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        gemm: &Gemm<T::Scalar>,
        batch: Batch,
        a: impl IntoDeviceRef<'scope, 'ctx, T>,
        b: impl IntoDeviceRef<'scope, 'ctx, T>,
        c: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Blas::gemm_strided_batched";
        let views = (
            a.into_ref(Crate(())),
            b.into_ref(Crate(())),
            c.into_mut(Crate(())),
        );
        self.gemm_any(scope, gemm, Some(batch), views, WHAT)
    }

    fn gemm_any<'scope, T: GemmType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        gemm: &Gemm<T::Scalar>,
        batch: Option<Batch>,
        (a, b, c): (
            DeviceRef<'scope, 'ctx, T>,
            DeviceRef<'scope, 'ctx, T>,
            DeviceMut<'scope, 'ctx, T>,
        ),
        what: &'static str,
    ) -> Result<()> {
        let compute = compute_type::<T::Scalar>(what, gemm.compute)?;
        let batch = batch.map(|b| {
            let (sa, sb, sc) = b.strides.unwrap_or_else(|| gemm.extents());
            (b.count, sa, sb, sc)
        });
        let args = check::gemm(
            what,
            &GemmShape {
                ops: gemm.ops,
                m: gemm.m,
                n: gemm.n,
                k: gemm.k,
                lds: gemm.leading_dimensions(),
                lens: (a.len(), b.len(), c.len()),
                batch,
            },
        )?;
        let spans = [read(&a), read(&b), write(&c)];
        no_overlap(what, &spans, &["A", "B", "C"])?;
        let (alpha, beta) = (gemm.alpha, gemm.beta);
        let (alpha, beta): (*const c_void, *const c_void) =
            ((&raw const alpha).cast(), (&raw const beta).cast());
        let (ta, tb, dt) = (gemm.ops.0.raw(), gemm.ops.1.raw(), T::DATA_TYPE);
        let (pa, pb, pc) = (
            a.device_ptr() as usize as *const c_void,
            b.device_ptr() as usize as *const c_void,
            c.device_ptr() as usize as *mut c_void,
        );
        let GemmArgs {
            m,
            n,
            k,
            lda,
            ldb,
            ldc,
            batch,
        } = args;
        let stream = scope.stream().raw();
        let entry = if batch.is_some() {
            "cublasGemmStridedBatchedEx"
        } else {
            "cublasGemmEx"
        };
        let call = sys::GemmCall {
            ops: (ta, tb),
            mnk: (m, n, k),
            scalars: (alpha, beta),
            a: (pa, lda),
            b: (pb, ldb),
            c: (pc, ldc),
            data_type: dt,
            compute,
            batch,
        };
        let f = |api: &sys::Api, h| {
            // SAFETY: every extent was checked against the buffers' lengths
            // (`check::gemm`), C overlaps neither A nor B, the scalars are locals of this
            // function, read before the call returns (host pointer mode).
            unsafe { sys::gemm(api, h, &call) }
        };
        scope.ordered(&spans, None, || {
            // SAFETY: the stream is the scope's, of the handle's context (one brand), alive
            // while the scope borrows it, and the buffers are borrowed until the scope has
            // synchronized.
            unsafe { self.run(stream, POINTER_MODE_HOST, f, entry) }
        })
    }

    /// Queues a GEMV (`cublasSgemv_v2`, `cublasDgemv_v2`): `y = alpha op(A) x + beta y`,
    /// with A stored `m × n` (leading dimension `lda`); `x` holds at least `n` elements
    /// (`m` for `Op::T`), `y` at least `m` (`n`).
    pub fn gemv<'scope, T: Real, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        gemv: &Gemv<T>,
        a: impl IntoDeviceRef<'scope, 'ctx, T>,
        x: impl IntoDeviceRef<'scope, 'ctx, T>,
        y: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Blas::gemv";
        let (a, x, y) = (
            a.into_ref(Crate(())),
            x.into_ref(Crate(())),
            y.into_mut(Crate(())),
        );
        let lda = gemv.lda.unwrap_or(gemv.m.max(1));
        let (m, n, lda) = check::gemv(
            WHAT,
            gemv.op,
            (gemv.m, gemv.n, lda),
            (a.len(), x.len(), y.len()),
        )?;
        let spans = [read(&a), read(&x), write(&y)];
        no_overlap(WHAT, &spans, &["A", "x", "y"])?;
        let (alpha, beta) = (gemv.alpha, gemv.beta);
        let call = Level::Gemv {
            op: gemv.op.raw(),
            m,
            n,
            alpha: (&raw const alpha).cast(),
            a: a.device_ptr() as usize as *const c_void,
            lda,
            x: x.device_ptr() as usize as *const c_void,
            beta: (&raw const beta).cast(),
            y: y.device_ptr() as usize as *mut c_void,
        };
        self.level::<T, K>(scope, &spans, POINTER_MODE_HOST, call, T::GEMV)
    }

    /// Queues an AXPY (`cublasSaxpy_v2`, `cublasDaxpy_v2`): `y += alpha x`, `x` and `y` of
    /// one length.
    pub fn axpy<'scope, T: Real, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        alpha: T,
        x: impl IntoDeviceRef<'scope, 'ctx, T>,
        y: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Blas::axpy";
        let (x, y) = (x.into_ref(Crate(())), y.into_mut(Crate(())));
        let n = check::vectors(WHAT, &["x", "y"], &[x.len(), y.len()])?;
        let spans = [read(&x), write(&y)];
        no_overlap(WHAT, &spans, &["x", "y"])?;
        let call = Level::Axpy {
            n,
            alpha: (&raw const alpha).cast(),
            x: x.device_ptr() as usize as *const c_void,
            y: y.device_ptr() as usize as *mut c_void,
        };
        self.level::<T, K>(scope, &spans, POINTER_MODE_HOST, call, T::AXPY)
    }

    /// Queues a DOT (`cublasSdot_v2`, `cublasDdot_v2`): `result[0] = x · y`, `x` and `y`
    /// of one length, `result` a one-element device buffer (written in stream order: read it
    /// after the scope, or with a later operation of the scope).
    pub fn dot<'scope, T: Real, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        x: impl IntoDeviceRef<'scope, 'ctx, T>,
        y: impl IntoDeviceRef<'scope, 'ctx, T>,
        result: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Blas::dot";
        let (x, y, r) = (
            x.into_ref(Crate(())),
            y.into_ref(Crate(())),
            result.into_mut(Crate(())),
        );
        let n = check::vectors(WHAT, &["x", "y"], &[x.len(), y.len()])?;
        check::one_result(WHAT, r.len())?;
        let spans = [read(&x), read(&y), write(&r)];
        no_overlap(WHAT, &spans, &["x", "y", "the result"])?;
        let call = Level::Dot {
            n,
            x: x.device_ptr() as usize as *const c_void,
            y: y.device_ptr() as usize as *const c_void,
            result: r.device_ptr() as usize as *mut c_void,
        };
        self.level::<T, K>(scope, &spans, POINTER_MODE_DEVICE, call, T::DOT)
    }

    /// Queues an NRM2 (`cublasSnrm2_v2`, `cublasDnrm2_v2`): `result[0] = ‖x‖₂`, `result` a
    /// one-element device buffer.
    pub fn nrm2<'scope, T: Real, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        x: impl IntoDeviceRef<'scope, 'ctx, T>,
        result: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Blas::nrm2";
        let (x, r) = (x.into_ref(Crate(())), result.into_mut(Crate(())));
        let n = check::vectors(WHAT, &["x"], &[x.len()])?;
        check::one_result(WHAT, r.len())?;
        let spans = [read(&x), write(&r)];
        no_overlap(WHAT, &spans, &["x", "the result"])?;
        let call = Level::Nrm2 {
            n,
            x: x.device_ptr() as usize as *const c_void,
            result: r.device_ptr() as usize as *mut c_void,
        };
        self.level::<T, K>(scope, &spans, POINTER_MODE_DEVICE, call, T::NRM2)
    }

    /// Queues a SCAL (`cublasSscal_v2`, `cublasDscal_v2`): `x *= alpha`.
    pub fn scal<'scope, T: Real, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        alpha: T,
        x: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Blas::scal";
        let x = x.into_mut(Crate(()));
        let n = check::vectors(WHAT, &["x"], &[x.len()])?;
        let spans = [write(&x)];
        let call = Level::Scal {
            n,
            alpha: (&raw const alpha).cast(),
            x: x.device_ptr() as usize as *mut c_void,
        };
        self.level::<T, K>(scope, &spans, POINTER_MODE_HOST, call, T::SCAL)
    }

    /// Queues a checked level-1 or level-2 call on `scope`'s stream.
    fn level<'scope, T: Real, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        spans: &[Span],
        mode: c_int,
        call: Level,
        entry: &'static str,
    ) -> Result<()> {
        let stream = scope.stream().raw();
        let f = |api: &sys::Api, h| {
            // SAFETY: every length was checked (the callers), the output overlaps no input,
            // host scalars are the callers' locals, alive across this call (read before it
            // returns).
            unsafe { level_call::<T>(api, h, call) }
        };
        scope.ordered(spans, None, || {
            // SAFETY: the stream is the scope's, of the handle's context (one brand), alive
            // while the scope borrows it; every length was checked (the callers), the output
            // overlaps no input, host scalars are the callers' locals, alive across this call
            // (read before it returns), and device buffers are borrowed until the scope has
            // synchronized.
            unsafe { self.run(stream, mode, f, entry) }
        })
    }
}

use check::GemmArgs;
