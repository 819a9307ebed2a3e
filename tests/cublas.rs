//! cuBLAS on a real GPU (`cargo test --features cublas --test cublas`), every result checked
//! against a CPU reference, element by element; and the paths that need no GPU (the missing
//! library, in a child process). The checks of every extent run without a GPU as unit tests
//! of `src/cublas/check/tests.rs`; here they are seen refusing before cuBLAS writes anything.
//!
//! cuBLAS is loaded as the crate loads it: `CUDA_BRAND_CUBLAS_LIBRARY`, else
//! `libcublas.so.13`, then `.12`. A test that finds a GPU but no cuBLAS fails, saying so.

mod common;

use std::process::Command;

use cuda_brand::cublas::{self, Batch, Bf16, Blas, Compute, F16, Gemm, GemmType, Gemv, Op};
use cuda_brand::{ContextFlags, ContextGuard, Device, Error, ErrorCode, with_context};

/// Runs `f` in a new context of device 0, after checking that cuBLAS loads.
fn in_context(f: impl for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<(), Error>) {
    match cublas::version() {
        Ok(v) => eprintln!("cuBLAS {v:?}"),
        Err(e) => panic!("this test needs the cuBLAS library: {e}"),
    }
    let device = Device::get(0).expect("device 0");
    with_context(&device, ContextFlags::default(), f).unwrap();
}

/// Element types with exact conversions of small integers.
trait Elem: GemmType + PartialEq + std::fmt::Debug {
    fn of(v: f64) -> Self;
    fn value(self) -> f64;
    fn scalar(v: f64) -> Self::Scalar;
}

impl Elem for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn value(self) -> f64 {
        self as f64
    }
    fn scalar(v: f64) -> f32 {
        v as f32
    }
}
impl Elem for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn value(self) -> f64 {
        self
    }
    fn scalar(v: f64) -> f64 {
        v
    }
}
impl Elem for F16 {
    fn of(v: f64) -> Self {
        F16::from_f32(v as f32)
    }
    fn value(self) -> f64 {
        self.to_f32() as f64
    }
    fn scalar(v: f64) -> f32 {
        v as f32
    }
}
impl Elem for Bf16 {
    fn of(v: f64) -> Self {
        Bf16::from_f32(v as f32)
    }
    fn value(self) -> f64 {
        self.to_f32() as f64
    }
    fn scalar(v: f64) -> f32 {
        v as f32
    }
}

/// Small integers in -2..=2: every product and sum below is exact in every type.
fn pattern(len: usize, seed: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i * 7 + seed * 3) % 5) as f64 - 2.0)
        .collect()
}

/// `C = alpha op(A) op(B) + beta C` on the CPU, column-major.
#[allow(clippy::too_many_arguments)]
fn reference(
    ops: (Op, Op),
    (m, n, k): (usize, usize, usize),
    (lda, ldb, ldc): (usize, usize, usize),
    (alpha, beta): (f64, f64),
    a: &[f64],
    b: &[f64],
    c: &mut [f64],
) {
    let at = |i: usize, p: usize| match ops.0 {
        Op::N => a[i + p * lda],
        Op::T => a[p + i * lda],
    };
    let bt = |p: usize, j: usize| match ops.1 {
        Op::N => b[p + j * ldb],
        Op::T => b[j + p * ldb],
    };
    for j in 0..n {
        for i in 0..m {
            let sum: f64 = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
            c[i + j * ldc] = alpha * sum + beta * c[i + j * ldc];
        }
    }
}

fn gemm_case<'ctx, T: Elem>(
    ctx: ContextGuard<'ctx>,
    blas: &Blas<'ctx>,
    ops: (Op, Op),
    pad: usize,
) -> Result<(), Error> {
    let (m, n, k) = (5, 3, 4);
    let rows = |op: Op, r: usize, c: usize| if op == Op::N { (r, c) } else { (c, r) };
    let (ar, ac) = rows(ops.0, m, k);
    let (br, bc) = rows(ops.1, k, n);
    let (lda, ldb, ldc) = (ar + pad, br + pad, m + pad);
    let (a, b, c0) = (
        pattern(lda * ac, 1),
        pattern(ldb * bc, 2),
        pattern(ldc * n, 3),
    );
    let mut want = c0.clone();
    reference(
        ops,
        (m, n, k),
        (lda, ldb, ldc),
        (2.0, -1.0),
        &a,
        &b,
        &mut want,
    );
    let to = |v: &[f64]| v.iter().map(|&x| T::of(x)).collect::<Vec<T>>();
    let (da, db) = (ctx.from_slice(&to(&a))?, ctx.from_slice(&to(&b))?);
    let mut dc = ctx.from_slice(&to(&c0))?;
    let g = Gemm::new(m, n, k)
        .ops(ops.0, ops.1)
        .alpha(T::scalar(2.0))
        .beta(T::scalar(-1.0))
        .lda(lda)
        .ldb(ldb)
        .ldc(ldc);
    ctx.new_stream()?
        .scope(|s| blas.gemm(s, &g, &da, &db, &mut dc))?;
    let got: Vec<f64> = dc.to_vec()?.into_iter().map(T::value).collect();
    // the padding rows of C are untouched
    assert_eq!(
        got,
        want,
        "{} {ops:?} pad {pad}",
        std::any::type_name::<T>()
    );
    Ok(())
}

fn gemm_matches_the_cpu_for_every_type_transpose_and_leading_dimension() {
    in_context(|ctx| {
        let blas = Blas::new(ctx)?;
        for ops in [
            (Op::N, Op::N),
            (Op::N, Op::T),
            (Op::T, Op::N),
            (Op::T, Op::T),
        ] {
            for pad in [0, 2] {
                gemm_case::<f32>(ctx, &blas, ops, pad)?;
                gemm_case::<f64>(ctx, &blas, ops, pad)?;
                gemm_case::<F16>(ctx, &blas, ops, pad)?;
                gemm_case::<Bf16>(ctx, &blas, ops, pad)?;
            }
        }
        Ok(())
    });
}

fn gemm_compute_types_and_math_modes_give_exact_small_integer_products() {
    in_context(|ctx| {
        let blas = Blas::new(ctx)?;
        let (a, b) = (
            ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0])?,
            ctx.from_slice(&[5.0f32, 6.0, 7.0, 8.0])?,
        );
        let mut c = ctx.zeroed::<f32>(4)?;
        let stream = ctx.new_stream()?;
        for mode in [
            cublas::MathMode::Default,
            cublas::MathMode::Pedantic,
            cublas::MathMode::Tf32,
        ] {
            blas.set_math_mode(mode)?;
            for compute in [
                Compute::Default,
                Compute::Pedantic,
                Compute::FastF16,
                Compute::FastBf16,
                Compute::FastTf32,
            ] {
                let g = Gemm::new(2, 2, 2).compute(compute);
                stream.scope(|s| blas.gemm(s, &g, &a, &b, &mut c))?;
                // [1 3; 2 4] × [5 7; 6 8] = [23 31; 34 46]
                assert_eq!(
                    c.to_vec()?,
                    [23.0, 34.0, 31.0, 46.0],
                    "{mode:?} {compute:?}"
                );
            }
        }
        // f64 has no fast compute types: refused before cuBLAS
        let (a, b) = (ctx.from_slice(&[1.0f64; 4])?, ctx.from_slice(&[1.0f64; 4])?);
        let mut c = ctx.zeroed::<f64>(4)?;
        let e = stream
            .scope(|s| {
                blas.gemm(
                    s,
                    &Gemm::new(2, 2, 2).compute(Compute::FastTf32),
                    &a,
                    &b,
                    &mut c,
                )
            })
            .unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("Blas::gemm", ErrorCode::InvalidInput)
        );
        Ok(())
    });
}

fn strided_batched_gemm_matches_the_cpu_per_matrix_with_a_shared_b() {
    in_context(|ctx| {
        let blas = Blas::new(ctx)?;
        let (m, n, k, count) = (3, 2, 4, 5);
        let (a, b) = (pattern(m * k * count, 4), pattern(k * n, 5));
        let mut want = vec![0.0; m * n * count];
        for i in 0..count {
            reference(
                (Op::N, Op::N),
                (m, n, k),
                (m, k, m),
                (1.0, 0.0),
                &a[i * m * k..],
                &b,
                &mut want[i * m * n..],
            );
        }
        let (da, db) = (ctx.from_slice(&a)?, ctx.from_slice(&b)?);
        let mut dc = ctx.zeroed::<f64>(m * n * count)?;
        let g = Gemm::new(m, n, k);
        let batch = Batch::strided(count, m * k, 0, m * n);
        ctx.new_stream()?
            .scope(|s| blas.gemm_strided_batched(s, &g, batch, &da, &db, &mut dc))?;
        assert_eq!(dc.to_vec()?, want);
        // packed strides, B repeated in its buffer
        let b_all: Vec<f64> = (0..count).flat_map(|_| b.clone()).collect();
        let mut dc2 = ctx.zeroed::<f32>(m * n * count)?;
        let (da32, db32) = (
            ctx.from_slice(&a.iter().map(|&x| x as f32).collect::<Vec<_>>())?,
            ctx.from_slice(&b_all.iter().map(|&x| x as f32).collect::<Vec<_>>())?,
        );
        ctx.new_stream()?.scope(|s| {
            blas.gemm_strided_batched(
                s,
                &Gemm::new(m, n, k),
                Batch::packed(count),
                &da32,
                &db32,
                &mut dc2,
            )
        })?;
        assert_eq!(
            dc2.to_vec()?.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            want
        );
        Ok(())
    });
}

fn gemv_axpy_dot_nrm2_and_scal_give_the_cpu_values() {
    in_context(|ctx| {
        let blas = Blas::new(ctx)?;
        let stream = ctx.new_stream()?;
        // A = [1 3 5; 2 4 6] (2 × 3, column-major)
        let a = ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
        let x3 = ctx.from_slice(&[1.0f32, 1.0, 1.0])?;
        let x2 = ctx.from_slice(&[1.0f32, -1.0])?;
        let mut y2 = ctx.from_slice(&[10.0f32, 20.0])?;
        let mut y3 = ctx.zeroed::<f32>(3)?;
        stream.scope(|s| {
            blas.gemv(s, &Gemv::new(2, 3).alpha(2.0).beta(1.0), &a, &x3, &mut y2)?;
            blas.gemv(s, &Gemv::new(2, 3).op(Op::T), &a, &x2, &mut y3)
        })?;
        assert_eq!(y2.to_vec()?, [10.0 + 2.0 * 9.0, 20.0 + 2.0 * 12.0]); // [28, 44]
        assert_eq!(y3.to_vec()?, [-1.0, -1.0, -1.0]);
        // level 1, f64
        let x = ctx.from_slice(&[3.0f64, 4.0, 0.0, 12.0])?;
        let mut y = ctx.from_slice(&[1.0f64, 1.0, 1.0, 1.0])?;
        let (mut dot, mut norm) = (ctx.zeroed::<f64>(1)?, ctx.zeroed::<f64>(1)?);
        stream.scope(|s| {
            let yv = s.bind_mut(&mut y); // written by several operations, in stream order
            blas.axpy(s, 2.0, &x, yv)?; // y = [7, 9, 1, 25]
            blas.dot(s, &x, yv.into_ref(), &mut dot)?; // 21 + 36 + 0 + 300
            blas.nrm2(s, &x, &mut norm)?; // sqrt(9 + 16 + 144) = 13
            blas.scal(s, -0.5, yv) // [-3.5, -4.5, -0.5, -12.5]
        })?;
        assert_eq!(y.to_vec()?, [-3.5, -4.5, -0.5, -12.5]);
        assert_eq!(dot.to_vec()?, [357.0]);
        let norm = norm.to_vec()?[0]; // cuBLAS scales as it sums: within rounding of 13
        assert!((norm - 13.0).abs() < 1e-12, "{norm}");
        Ok(())
    });
}

/// Zero dimensions pass the checks with empty buffers, whose address is never allocated
/// (the crate's placeholder for empty memory): cuBLAS must touch neither A nor B then. A GEMM
/// with `k = 0` is `C = beta C`; one with `m = 0` or a batch of 0 does nothing; GEMV with
/// `n = 0`, DOT and NRM2 of empty vectors read nothing (what they leave in y and the
/// results is printed). Afterwards the context must be usable (no sticky error from an
/// access to the placeholder address).
fn empty_dimensions_touch_no_memory_and_leave_the_context_usable() {
    in_context(|ctx| {
        let blas = Blas::new(ctx)?;
        let stream = ctx.new_stream()?;
        let (a0, b0) = (ctx.zeroed::<f32>(0)?, ctx.zeroed::<f32>(0)?);
        let mut c = ctx.from_slice(&[3.0f32; 8])?;
        let mut c0 = ctx.zeroed::<f32>(0)?;
        let mut cb = ctx.from_slice(&[3.0f32; 16])?;
        let k0 = Gemm::new(4, 2, 0).beta(2.0f32);
        stream.scope(|s| blas.gemm(s, &k0, &a0, &b0, &mut c))?;
        assert_eq!(c.to_vec()?, [6.0; 8], "k = 0: C = beta C");
        let batch = Batch::strided(2, 0, 0, 8);
        stream.scope(|s| blas.gemm_strided_batched(s, &k0, batch, &a0, &b0, &mut cb))?;
        assert_eq!(cb.to_vec()?, [6.0; 16], "k = 0, batched: C = beta C");
        let full = ctx.from_slice(&[1.0f32; 12])?;
        stream.scope(|s| blas.gemm(s, &Gemm::new(0, 2, 3), &a0, &full, &mut c0))?;
        stream.scope(|s| {
            let none = Batch::strided(0, 0, 0, 0);
            blas.gemm_strided_batched(s, &Gemm::new(4, 2, 3), none, &a0, &b0, &mut c0)
        })?;
        let mut y = ctx.from_slice(&[5.0f32; 4])?;
        let gemv = Gemv::new(4, 0).beta(2.0f32);
        stream.scope(|s| blas.gemv(s, &gemv, &a0, &b0, &mut y))?;
        // reference BLAS returns at once for n = 0 (y unchanged); either is sound
        eprintln!("GEMV with n = 0 and beta 2 left y = {:?}", y.to_vec()?);
        let (mut dot, mut norm) = (ctx.from_slice(&[9.0f32])?, ctx.from_slice(&[9.0f32])?);
        stream.scope(|s| {
            blas.dot(s, &a0, &b0, &mut dot)?;
            blas.nrm2(s, &a0, &mut norm)
        })?;
        eprintln!(
            "DOT and NRM2 of empty vectors wrote {:?} and {:?} (over 9)",
            dot.to_vec()?,
            norm.to_vec()?
        );
        // the context still works
        let one = ctx.from_slice(&[1.0f32; 4])?;
        let mut out = ctx.zeroed::<f32>(4)?;
        stream.scope(|s| blas.gemm(s, &Gemm::new(2, 2, 2), &one, &one, &mut out))?;
        assert_eq!(out.to_vec()?, [2.0; 4]);
        Ok(())
    });
}

fn bad_extents_and_overlaps_are_refused_before_cublas_writes_anything() {
    in_context(|ctx| {
        let blas = Blas::new(ctx)?;
        let stream = ctx.new_stream()?;
        let (a, b) = (
            ctx.from_slice(&[1.0f32; 12])?,
            ctx.from_slice(&[1.0f32; 6])?,
        );
        let mut c = ctx.from_slice(&[7.0f32; 7])?; // a 4 × 2 C needs 8
        let e = stream
            .scope(|s| blas.gemm(s, &Gemm::new(4, 2, 3), &a, &b, &mut c))
            .unwrap_err();
        assert_eq!(e.call(), "Blas::gemm");
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(
            e.invalid().and_then(cuda_brand::Invalid::reason),
            Some("C has 7 elements, but a 4 × 2 matrix with ldc = 4 needs 8")
        );
        assert_eq!(c.to_vec()?, [7.0; 7]); // nothing written
        // lda below the stored rows
        let mut c8 = ctx.zeroed::<f32>(8)?;
        let e = stream
            .scope(|s| blas.gemm(s, &Gemm::new(4, 2, 3).lda(3), &a, &b, &mut c8))
            .unwrap_err();
        assert!(
            e.invalid()
                .unwrap()
                .to_string()
                .starts_with("lda is 3, less than max(1, rows of A) = 4"),
            "{e}"
        );
        // C overlapping A: two views of one bound buffer
        let mut whole = ctx.from_slice(&[1.0f32; 20])?;
        let e = stream
            .scope(|s| {
                let w = s.bind_mut(&mut whole);
                blas.gemm(
                    s,
                    &Gemm::new(2, 2, 2),
                    w.slice(0..4).into_ref(),
                    w.slice(8..12).into_ref(),
                    w.slice(2..6),
                )
            })
            .unwrap_err();
        assert!(e.invalid().unwrap().to_string().starts_with("A ("), "{e}");
        assert!(e.invalid().unwrap().to_string().contains("and C ("), "{e}");
        assert_eq!(whole.to_vec()?, [1.0; 20]);
        // an output stride that makes a batch's products share elements of C
        let mut c = ctx.zeroed::<f32>(100)?;
        let e = stream
            .scope(|s| {
                blas.gemm_strided_batched(
                    s,
                    &Gemm::new(4, 2, 3),
                    Batch::strided(2, 0, 0, 7),
                    &a,
                    &b,
                    &mut c,
                )
            })
            .unwrap_err();
        assert!(
            e.invalid()
                .unwrap()
                .to_string()
                .starts_with("the stride of C is 7"),
            "{e}"
        );
        // level 1: lengths differ, results of two elements, a result inside x
        let x = ctx.from_slice(&[1.0f32; 4])?;
        let mut y3 = ctx.zeroed::<f32>(3)?;
        let e = stream
            .scope(|s| blas.axpy(s, 1.0, &x, &mut y3))
            .unwrap_err();
        assert_eq!(
            e.invalid().and_then(cuda_brand::Invalid::reason),
            Some("x has 4 elements but y has 3: the operation's n is both")
        );
        let mut r2 = ctx.zeroed::<f32>(2)?;
        let e = stream.scope(|s| blas.nrm2(s, &x, &mut r2)).unwrap_err();
        assert_eq!(
            e.invalid().and_then(cuda_brand::Invalid::reason),
            Some("the result has 2 elements: cuBLAS writes exactly one")
        );
        let mut v = ctx.from_slice(&[1.0f32; 5])?;
        let e = stream
            .scope(|s| {
                let w = s.bind_mut(&mut v);
                blas.dot(
                    s,
                    w.slice(0..4).into_ref(),
                    w.slice(0..4).into_ref(),
                    w.slice(3..4),
                )
            })
            .unwrap_err();
        assert!(
            e.invalid().unwrap().to_string().contains("the result ("),
            "{e}"
        );
        Ok(())
    });
}

fn a_handle_moves_to_another_thread_and_works_there() {
    in_context(|ctx| {
        let blas = Blas::new(ctx)?;
        let mut x = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
        let shared = ctx.share();
        std::thread::scope(|t| {
            t.spawn(move || {
                shared.enter(|ctx| {
                    let blas = blas; // moved here: `Blas` is `Send`
                    ctx.new_stream()?.scope(|s| blas.scal(s, 3.0, &mut x))?;
                    assert_eq!(x.to_vec()?, [3.0, 6.0, 9.0]);
                    Ok::<_, Error>(())
                })
            })
            .join()
            .unwrap()
        })
    });
}

fn an_owned_handle_is_bound_in_another_entry_on_another_thread() {
    use cuda_brand::owned::{OwnedBlas, OwnedContext, OwnedDeviceBuffer};
    match cublas::version() {
        Ok(v) => eprintln!("cuBLAS {v:?}"),
        Err(e) => panic!("this test needs the cuBLAS library: {e}"),
    }
    let home =
        OwnedContext::new(&Device::get(0).expect("device 0"), ContextFlags::default()).unwrap();
    let (blas, x): (OwnedBlas, OwnedDeviceBuffer<f32>) = home
        .enter(|ctx| {
            let blas = home.unbind(ctx, Blas::new(ctx)?)?;
            let x = home.unbind(ctx, ctx.from_slice(&[1.0f32, 2.0, 3.0])?)?;
            Ok::<_, Error>((blas, x))
        })
        .unwrap();
    let back = std::thread::spawn(move || {
        let (blas, mut x) = (blas, x);
        let home = blas.context().clone();
        home.enter(|ctx| {
            let (b, xv) = (blas.bind(ctx)?, x.bind_mut(ctx)?);
            ctx.new_stream()?.scope(|s| b.scal(s, 3.0, &mut *xv))?;
            xv.to_vec()
        })
    })
    .join()
    .unwrap()
    .unwrap();
    assert_eq!(back, [3.0, 6.0, 9.0]);
    assert_eq!(home.handles(), 1, "the last handle");
    home.close().unwrap();
}

const CHILD: &str = "CUDA_BRAND_CUBLAS_TEST_CHILD";

fn a_missing_library_is_cublas_not_found_naming_it_and_the_variable() {
    const MISSING: &str = "/nonexistent/libcublas.so.12";
    if std::env::var_os(CHILD).is_some() {
        let e = cublas::version().unwrap_err();
        assert_eq!(e.code(), ErrorCode::CublasNotFound, "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "loading the cuBLAS library failed: CUDA_BRAND_CUBLAS_NOT_FOUND (cuBLAS library not found): CUDA_BRAND_CUBLAS_LIBRARY={MISSING} could not be loaded ("
            )),
            "{text}"
        );
        assert!(text.contains("nvidia/cublas/lib"), "{text}");
        assert_eq!(cublas::version().unwrap_err(), e); // the same error every time
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_missing_library_is_cublas_not_found_naming_it_and_the_variable",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("CUDA_BRAND_CUBLAS_LIBRARY", MISSING)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() -> std::process::ExitCode {
    use common::harness::{Needs, Test, run};
    run(vec![
        Test {
            name: "gemm_matches_the_cpu_for_every_type_transpose_and_leading_dimension",
            needs: Needs::Gpu,
            body: gemm_matches_the_cpu_for_every_type_transpose_and_leading_dimension,
        },
        Test {
            name: "gemm_compute_types_and_math_modes_give_exact_small_integer_products",
            needs: Needs::Gpu,
            body: gemm_compute_types_and_math_modes_give_exact_small_integer_products,
        },
        Test {
            name: "strided_batched_gemm_matches_the_cpu_per_matrix_with_a_shared_b",
            needs: Needs::Gpu,
            body: strided_batched_gemm_matches_the_cpu_per_matrix_with_a_shared_b,
        },
        Test {
            name: "gemv_axpy_dot_nrm2_and_scal_give_the_cpu_values",
            needs: Needs::Gpu,
            body: gemv_axpy_dot_nrm2_and_scal_give_the_cpu_values,
        },
        Test {
            name: "bad_extents_and_overlaps_are_refused_before_cublas_writes_anything",
            needs: Needs::Gpu,
            body: bad_extents_and_overlaps_are_refused_before_cublas_writes_anything,
        },
        Test {
            name: "empty_dimensions_touch_no_memory_and_leave_the_context_usable",
            needs: Needs::Gpu,
            body: empty_dimensions_touch_no_memory_and_leave_the_context_usable,
        },
        Test {
            name: "a_handle_moves_to_another_thread_and_works_there",
            needs: Needs::Gpu,
            body: a_handle_moves_to_another_thread_and_works_there,
        },
        Test {
            name: "an_owned_handle_is_bound_in_another_entry_on_another_thread",
            needs: Needs::Gpu,
            body: an_owned_handle_is_bound_in_another_entry_on_another_thread,
        },
        Test {
            name: "a_missing_library_is_cublas_not_found_naming_it_and_the_variable",
            needs: Needs::Nothing,
            body: a_missing_library_is_cublas_not_found_naming_it_and_the_variable,
        },
    ])
}
