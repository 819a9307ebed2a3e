//! The NVIDIA libraries (issue 29): cuda-brand's `cublas`, `cufft` and `curand` against the
//! same library calls made directly and against cudarc's wrappers, in one process, the
//! method of `owned.rs` and `overhead.rs` (`harness`): each row measured three ways, the
//! three run interleaved in rounds with the order rotating each round, round 0 a warm-up;
//! the table gives medians and the two ratios (above 1: cuda-brand is slower).
//!
//! * **cuda-brand**: `Blas::gemm`, `FftPlan::exec`, `Rng::normal`, each in a blocking
//!   `Stream::scope` (which synchronizes its stream at its end), every extent checked and
//!   the handle's stream set on every call, as the crate always does.
//! * **raw library**: the libraries' C entry points (`cublasGemmEx`, `cufftExecC2C`,
//!   `curandGenerateNormal`) called directly through cudarc's `sys` modules, which load each
//!   library at run time with `libloading` (no wrapper: the handle made once, its stream set
//!   once, buffers from `cuMemAlloc`), then `cuStreamSynchronize`.
//! * **cudarc**: cudarc's safe wrappers (`CudaBlas` through its `Gemm` trait, which calls
//!   `cublasSgemm_v2` for `f32`; `CudaFft::exec_c2c`; `CudaRng::fill_with_normal`), then
//!   `CudaStream::synchronize`. cudarc's `bf16` GEMM needs its `f16` feature and the `half`
//!   crate, which this package does not depend on: n/a. `CudaRng` always makes cuRAND's
//!   default generator (XORWOW), so the Philox row has no cudarc column and a second row
//!   compares XORWOW.
//!
//! Rows: GEMM 4096³ in `f32` (compute `CUBLAS_COMPUTE_32F`) and in `bf16` (`f32` compute,
//! `bf16` output), reported with TFLOP/s (2 m n k per GEMM); a 64³ `f32` GEMM's latency (one
//! GEMM then a synchronization, per operation); a 2^24-point single-precision C2C forward
//! FFT (out of place, the plan made before timing); 2^26 normal `f32` samples (Philox, then
//! XORWOW). The throughput rows queue several operations per measurement and synchronize
//! once; the time is per operation.
//!
//! Each library is loaded twice, by the crate's loader and by cudarc's: both print the
//! version they loaded, which must be the same for the comparison to mean anything (point
//! `CUDA_BRAND_CUBLAS_LIBRARY` and friends, or `LD_LIBRARY_PATH`, at one installation).
//!
//! It checks what it computes, after the rounds, every column's own output: the GEMMs'
//! inputs are small integers, so every `f32` product is exact (checked at 64 elements
//! against the CPU, bit for bit) and every `bf16` one within its rounding; the FFT's input
//! is one complex frequency, whose spectrum is `N` at that bin and 0 elsewhere; the
//! samples' mean and variance within their statistical bounds. A wrong result panics.
//!
//! `cd bench && cargo bench --bench libraries [-- --out FILE.md]`; or build the binary
//! where cargo is (`cargo bench --no-run`) and run it with `--bench --out FILE.md` on the
//! machine with the GPU. Without a GPU it prints the driver's error and exits 0; without one
//! of the libraries, the crate's error (exit 1) or cudarc's panic.

mod harness;

use std::ffi::c_void;
use std::time::Instant;

use cuda_brand::cublas::{Bf16, Blas, Gemm};
use cuda_brand::cufft::{Complex32, Direction, FftPlan};
use cuda_brand::curand::{Rng, RngKind};
use cuda_brand::{ContextGuard, Device, DeviceBuffer, DeviceCopy, Error, Stream, StreamFlags};
use cuda_driver_sys as dsys;
use cudarc::cublas::sys as bsys;
use cudarc::cufft::sys as fsys;
use cudarc::curand::sys as rsys;
use cudarc::driver as rc;
use harness::{Row, Unit, measure};

const ROUNDS: usize = 21;
/// The large GEMM's extent, and GEMMs per measurement (f32, bf16).
const BIG: usize = 4096;
const BIG_REPS: [usize; 2] = [5, 20];
/// The small GEMM's extent, and GEMMs (each synchronized) per measurement.
const SMALL: usize = 64;
const SMALL_REPS: usize = 200;
/// The FFT's length, and transforms per measurement.
const FFT_LEN: usize = 1 << 24;
const FFT_REPS: usize = 10;
/// The bin of the FFT's input frequency.
const FREQ: usize = 12_345;
/// Normal samples per call, and calls per measurement.
const SAMPLES: usize = 1 << 26;
const RNG_REPS: usize = 10;
const SEED: u64 = 0x5eed;

/// The `cudaDataType`s of the raw GEMMs.
const CUDA_R_32F: bsys::cudaDataType = bsys::cudaDataType::CUDA_R_32F;
const CUDA_R_16BF: bsys::cudaDataType = bsys::cudaDataType::CUDA_R_16BF;

#[track_caller]
fn ok(r: dsys::CUresult) {
    assert_eq!(r, dsys::CUresult::CUDA_SUCCESS, "a raw driver call failed");
}

#[track_caller]
fn blas_ok(r: bsys::cublasStatus_t) {
    assert_eq!(
        r,
        bsys::cublasStatus_t::CUBLAS_STATUS_SUCCESS,
        "a raw cuBLAS call failed"
    );
}

#[track_caller]
fn fft_ok(r: fsys::cufftResult) {
    assert_eq!(
        r,
        fsys::cufftResult::CUFFT_SUCCESS,
        "a raw cuFFT call failed"
    );
}

#[track_caller]
fn rand_ok(r: rsys::curandStatus_t) {
    assert_eq!(
        r,
        rsys::curandStatus_t::CURAND_STATUS_SUCCESS,
        "a raw cuRAND call failed"
    );
}

// ---- raw memory --------------------------------------------------------------------------

/// A device allocation made with `cuMemAlloc`, for the raw column.
struct RawBuf<T> {
    ptr: dsys::CUdeviceptr,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Copy + Default> RawBuf<T> {
    fn from_slice(data: &[T]) -> RawBuf<T> {
        let mut ptr = 0;
        let bytes = std::mem::size_of_val(data);
        // SAFETY: plain allocation and copy of `bytes` from a live slice, in the current
        // (primary) context.
        unsafe {
            ok(dsys::cuMemAlloc_v2(&mut ptr, bytes));
            ok(dsys::cuMemcpyHtoD_v2(ptr, data.as_ptr().cast(), bytes));
        }
        RawBuf {
            ptr,
            len: data.len(),
            _t: std::marker::PhantomData,
        }
    }

    fn to_vec(&self) -> Vec<T> {
        let mut v = vec![T::default(); self.len];
        // SAFETY: `v` holds `len` elements; the allocation too; synchronous copy (after the
        // queued work of every stream, which the callers have synchronized).
        unsafe {
            ok(dsys::cuMemcpyDtoH_v2(
                v.as_mut_ptr().cast(),
                self.ptr,
                self.len * std::mem::size_of::<T>(),
            ));
        }
        v
    }

    fn ptr(&self) -> *mut c_void {
        self.ptr as *mut c_void
    }
}

impl<T> Drop for RawBuf<T> {
    fn drop(&mut self) {
        // SAFETY: our allocation; its work has been synchronized.
        unsafe { ok(dsys::cuMemFree_v2(self.ptr)) };
    }
}

/// Wall time of `f` (which synchronizes), in ns per each of its `reps` operations.
fn per_op(reps: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64 / reps as f64
}

// ---- inputs and checks -------------------------------------------------------------------

/// A GEMM's inputs: small integers, so that every product and partial sum is exact in f32.
fn gemm_inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let a = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let b = (0..n * n).map(|i| (i % 5) as f32 - 2.0).collect();
    (a, b)
}

/// The elements checked of an `n × n` product: the corners and a spread of others.
fn gemm_points(n: usize) -> Vec<(usize, usize)> {
    let mut p = vec![(0, 0), (n - 1, 0), (0, n - 1), (n - 1, n - 1)];
    p.extend((0..60).map(|i| ((i * 7919 + 13) % n, (i * 104_729 + 7) % n)));
    p
}

/// Checks a column-major `C = A B` (all `n × n`) at [`gemm_points`]; `round` is what the
/// output type does to an exact value; `tol` the relative error allowed.
#[track_caller]
fn check_gemm(
    what: &str,
    n: usize,
    a: &[f32],
    b: &[f32],
    c: &[f32],
    round: fn(f32) -> f32,
    tol: f32,
) {
    for (r, col) in gemm_points(n) {
        let exact: f32 = (0..n).map(|l| a[r + l * n] * b[l + col * n]).sum();
        let (want, got) = (round(exact), c[r + col * n]);
        assert!(
            (want - got).abs() <= tol * want.abs(),
            "{what}: C[{r}, {col}] is {got}, the CPU's is {want}"
        );
    }
}

fn bf16_bits_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// One complex frequency, `FREQ` cycles over the length: its spectrum is `N` at `FREQ`.
fn fft_input() -> Vec<Complex32> {
    (0..FFT_LEN)
        .map(|j| {
            let phase = 2.0 * std::f64::consts::PI * ((FREQ * j) % FFT_LEN) as f64 / FFT_LEN as f64;
            Complex32::new(phase.cos() as f32, phase.sin() as f32)
        })
        .collect()
}

#[track_caller]
fn check_fft(what: &str, spectrum: &[(f32, f32)]) {
    let n = FFT_LEN as f32;
    let (re, im) = spectrum[FREQ];
    assert!(
        (re - n).abs() <= 1e-3 * n && im.abs() <= 1e-3 * n,
        "{what}: bin {FREQ} is {re} + {im}i, not {n}"
    );
    for bin in [0, 1, FREQ - 1, FREQ + 1, FFT_LEN / 2, FFT_LEN - 1] {
        let (re, im) = spectrum[bin];
        assert!(
            re.hypot(im) <= 1e-4 * n,
            "{what}: bin {bin} is {re} + {im}i, not 0"
        );
    }
}

#[track_caller]
fn check_normal(what: &str, x: &[f32]) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let var = x
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n;
    // six standard errors: of the mean 1/√n, of the variance √(2/n)
    assert!(mean.abs() <= 6.0 / n.sqrt(), "{what}: mean {mean}");
    assert!(
        (var - 1.0).abs() <= 6.0 * (2.0 / n).sqrt(),
        "{what}: variance {var}"
    );
}

// ---- the benchmark -----------------------------------------------------------------------

fn main() {
    harness::main("libraries", run);
}

/// The crate's buffers of one row, each column's own.
fn buffers<'ctx, T: DeviceCopy + Copy>(
    ctx: ContextGuard<'ctx>,
    data: &[T],
) -> Result<DeviceBuffer<'ctx, T>, Error> {
    DeviceBuffer::from_slice(ctx, data)
}

fn run(ctx: ContextGuard<'_>, device: &Device, out: Option<&str>) -> Result<(), Error> {
    let rctx = rc::CudaContext::new(0).expect("cudarc context");
    let cstream = rctx.new_stream().expect("cudarc stream");
    let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
    // the raw column's stream: made and destroyed with the driver's own calls
    let mut raw_stream: dsys::CUstream = std::ptr::null_mut();
    // SAFETY: plain creation in the current (primary) context.
    unsafe { ok(dsys::cuStreamCreate(&mut raw_stream, 1)) };
    let raw_sync = || {
        // SAFETY: our stream, live until the end of `run`.
        unsafe { ok(dsys::cuStreamSynchronize(raw_stream)) }
    };

    // ---- the handles, three of each ----
    let blas = Blas::new(ctx)?;
    let mut raw_blas: bsys::cublasHandle_t = std::ptr::null_mut();
    // SAFETY: plain creation, then the stream set, on our handle.
    unsafe {
        blas_ok(bsys::cublasCreate_v2(&mut raw_blas));
        blas_ok(bsys::cublasSetStream_v2(raw_blas, raw_stream.cast()));
    }
    let cblas = cudarc::cublas::CudaBlas::new(cstream.clone()).expect("cudarc cuBLAS");

    let plan = FftPlan::<Complex32, Complex32>::new(ctx, &[FFT_LEN], 1)?;
    let mut raw_plan: fsys::cufftHandle = 0;
    // SAFETY: plain creation, then the stream set, on our plan.
    unsafe {
        fft_ok(fsys::cufftPlan1d(
            &mut raw_plan,
            FFT_LEN as i32,
            fsys::cufftType::CUFFT_C2C,
            1,
        ));
        fft_ok(fsys::cufftSetStream(raw_plan, raw_stream.cast()));
    }
    let cplan = cudarc::cufft::CudaFft::plan_1d(
        FFT_LEN as i32,
        fsys::cufftType::CUFFT_C2C,
        1,
        cstream.clone(),
    )
    .expect("cudarc cuFFT plan");

    let philox = Rng::new(ctx, SEED)?;
    let xorwow = Rng::with_kind(ctx, RngKind::Xorwow, SEED)?;
    let raw_gen = |kind| {
        let mut g: rsys::curandGenerator_t = std::ptr::null_mut();
        // SAFETY: plain creation, seed and stream set, on our generator.
        unsafe {
            rand_ok(rsys::curandCreateGenerator(&mut g, kind));
            rand_ok(rsys::curandSetPseudoRandomGeneratorSeed(g, SEED));
            rand_ok(rsys::curandSetStream(g, raw_stream.cast()));
        }
        g
    };
    let raw_philox = raw_gen(rsys::curandRngType_t::CURAND_RNG_PSEUDO_PHILOX4_32_10);
    let raw_xorwow = raw_gen(rsys::curandRngType_t::CURAND_RNG_PSEUDO_XORWOW);
    let crng = cudarc::curand::CudaRng::new(SEED, cstream.clone()).expect("cudarc cuRAND");

    // ---- the libraries' versions, as each loader found them ----
    let (mut bv, mut fv, mut rv) = (0, 0, 0);
    // SAFETY: out-parameters on live handles, nothing else.
    unsafe {
        blas_ok(bsys::cublasGetVersion_v2(raw_blas, &mut bv));
        fft_ok(fsys::cufftGetVersion(&mut fv));
        rand_ok(rsys::curandGetVersion(&mut rv));
    }
    let (bm, bn, bp) = cuda_brand::cublas::version()?;
    let libraries = format!(
        "cuBLAS {bm}.{bn}.{bp} (cudarc's: {bv}), cuFFT {} (cudarc's: {fv}), cuRAND {} (cudarc's: {rv})",
        cuda_brand::cufft::version()?,
        cuda_brand::curand::version()?
    );
    eprintln!("{libraries}");

    // ---- the data: each column its own buffers ----
    let (a32, b32) = gemm_inputs(BIG);
    let a16: Vec<Bf16> = a32.iter().map(|&x| Bf16::from_f32(x)).collect();
    let b16: Vec<Bf16> = b32.iter().map(|&x| Bf16::from_f32(x)).collect();
    let a16_bits: Vec<u16> = a16
        .iter()
        .map(|x| Bf16::to_f32(*x).to_bits().wrapping_shr(16) as u16)
        .collect();
    let b16_bits: Vec<u16> = b16
        .iter()
        .map(|x| Bf16::to_f32(*x).to_bits().wrapping_shr(16) as u16)
        .collect();
    let (sa, sb) = gemm_inputs(SMALL);
    let signal = fft_input();
    let signal_raw: Vec<(f32, f32)> = signal.iter().map(|c| (c.re, c.im)).collect();
    let signal_rc: Vec<fsys::float2> = signal
        .iter()
        .map(|c| fsys::float2 { x: c.re, y: c.im })
        .collect();

    // cuda-brand
    let (da, db) = (buffers(ctx, &a32)?, buffers(ctx, &b32)?);
    let mut dc = DeviceBuffer::<f32>::zeroed(ctx, BIG * BIG)?;
    let (da16, db16) = (buffers(ctx, &a16)?, buffers(ctx, &b16)?);
    let mut dc16 = DeviceBuffer::<Bf16>::zeroed(ctx, BIG * BIG)?;
    let (dsa, dsb) = (buffers(ctx, &sa)?, buffers(ctx, &sb)?);
    let mut dsc = DeviceBuffer::<f32>::zeroed(ctx, SMALL * SMALL)?;
    let dsig = buffers(ctx, &signal)?;
    let mut dspec = DeviceBuffer::<Complex32>::zeroed(ctx, FFT_LEN)?;
    let mut dnorm = DeviceBuffer::<f32>::zeroed(ctx, SAMPLES)?;
    let mut dnorm_x = DeviceBuffer::<f32>::zeroed(ctx, SAMPLES)?;
    // raw
    let (ra, rb, rcm) = (
        RawBuf::from_slice(&a32),
        RawBuf::from_slice(&b32),
        RawBuf::from_slice(&vec![0f32; BIG * BIG]),
    );
    let (ra16, rb16, rc16) = (
        RawBuf::from_slice(&a16_bits),
        RawBuf::from_slice(&b16_bits),
        RawBuf::from_slice(&vec![0u16; BIG * BIG]),
    );
    let (rsa, rsb, rsc) = (
        RawBuf::from_slice(&sa),
        RawBuf::from_slice(&sb),
        RawBuf::from_slice(&vec![0f32; SMALL * SMALL]),
    );
    let (rsig, rspec) = (
        RawBuf::from_slice(&signal_raw),
        RawBuf::from_slice(&vec![(0f32, 0f32); FFT_LEN]),
    );
    let (rnorm, rnorm_x) = (
        RawBuf::from_slice(&vec![0f32; SAMPLES]),
        RawBuf::from_slice(&vec![0f32; SAMPLES]),
    );
    // cudarc
    let ca = cstream.clone_htod(&a32).expect("cudarc copy");
    let cb = cstream.clone_htod(&b32).expect("cudarc copy");
    let mut cc = cstream.alloc_zeros::<f32>(BIG * BIG).expect("cudarc alloc");
    let csa = cstream.clone_htod(&sa).expect("cudarc copy");
    let csb = cstream.clone_htod(&sb).expect("cudarc copy");
    let mut csc = cstream
        .alloc_zeros::<f32>(SMALL * SMALL)
        .expect("cudarc alloc");
    let mut csig = cstream.clone_htod(&signal_rc).expect("cudarc copy");
    let mut cspec = cstream.clone_htod(&signal_rc).expect("cudarc copy");
    let mut cnorm = cstream.alloc_zeros::<f32>(SAMPLES).expect("cudarc alloc");
    cstream.synchronize().expect("cudarc sync");

    let raw_gemm =
        |n: usize, ty: bsys::cudaDataType, a: *mut c_void, b: *mut c_void, c: *mut c_void| {
            let (alpha, beta) = (1.0f32, 0.0f32);
            let n = n as i32;
            // SAFETY: every matrix is n × n, packed, in an allocation of n² elements of the
            // type `ty` names; the scalars are host f32 (the handle's default pointer mode,
            // and the scalar type of CUBLAS_COMPUTE_32F).
            unsafe {
                blas_ok(bsys::cublasGemmEx(
                    raw_blas,
                    bsys::cublasOperation_t::CUBLAS_OP_N,
                    bsys::cublasOperation_t::CUBLAS_OP_N,
                    n,
                    n,
                    n,
                    (&raw const alpha).cast(),
                    a,
                    ty,
                    n,
                    b,
                    ty,
                    n,
                    (&raw const beta).cast(),
                    c,
                    ty,
                    n,
                    bsys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    bsys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                ))
            }
        };
    let cfg = |n: usize| cudarc::cublas::GemmConfig {
        transa: bsys::cublasOperation_t::CUBLAS_OP_N,
        transb: bsys::cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: n as i32,
        k: n as i32,
        alpha: 1.0f32,
        lda: n as i32,
        ldb: n as i32,
        beta: 0.0f32,
        ldc: n as i32,
    };

    {
        use cudarc::cublas::Gemm as _;
        let g_big = Gemm::<f32>::new(BIG, BIG, BIG);
        let g_small = Gemm::<f32>::new(SMALL, SMALL, SMALL);
        let (stream, blas, plan) = (&stream, &blas, &plan);
        let (cblas, cplan, crng, cstream) = (&cblas, &cplan, &crng, &cstream);
        let (philox, xorwow) = (&philox, &xorwow);
        let (dc, dc16, dsc, dspec, dnorm, dnorm_x) = (
            &mut dc,
            &mut dc16,
            &mut dsc,
            &mut dspec,
            &mut dnorm,
            &mut dnorm_x,
        );
        let (cc, csc, csig, cspec, cnorm) = (&mut cc, &mut csc, &mut csig, &mut cspec, &mut cnorm);
        let (da, db, da16, db16, dsa, dsb, dsig) = (&da, &db, &da16, &db16, &dsa, &dsb, &dsig);
        let (ca, cb, csa, csb) = (&ca, &cb, &csa, &csb);
        let (ra, rb, rcm, ra16, rb16, rc16) = (&ra, &rb, &rcm, &ra16, &rb16, &rc16);
        let (rsa, rsb, rsc, rsig, rspec, rnorm, rnorm_x) =
            (&rsa, &rsb, &rsc, &rsig, &rspec, &rnorm, &rnorm_x);
        let [reps32, reps16] = BIG_REPS;

        let mut rows = vec![
            Row {
                name: "GEMM 4096³ f32",
                unit: Unit::Ns,
                ours: Box::new(move || {
                    per_op(reps32, || {
                        stream
                            .scope(|s| {
                                let c = s.bind_mut(&mut *dc);
                                (0..reps32).try_for_each(|_| blas.gemm(s, &g_big, da, db, c))
                            })
                            .unwrap()
                    })
                }),
                raw: Box::new(move || {
                    per_op(reps32, || {
                        (0..reps32)
                            .for_each(|_| raw_gemm(BIG, CUDA_R_32F, ra.ptr(), rb.ptr(), rcm.ptr()));
                        raw_sync();
                    })
                }),
                cudarc: Some(Box::new(move || {
                    per_op(reps32, || {
                        for _ in 0..reps32 {
                            // SAFETY: every matrix is BIG × BIG, packed, in a slice of BIG² f32.
                            unsafe { cblas.gemm(cfg(BIG), ca, cb, &mut *cc) }.unwrap();
                        }
                        cstream.synchronize().unwrap();
                    })
                })),
            },
            Row {
                name: "GEMM 4096³ bf16 (f32 compute)",
                unit: Unit::Ns,
                ours: Box::new(move || {
                    per_op(reps16, || {
                        stream
                            .scope(|s| {
                                let c = s.bind_mut(&mut *dc16);
                                (0..reps16).try_for_each(|_| blas.gemm(s, &g_big, da16, db16, c))
                            })
                            .unwrap()
                    })
                }),
                raw: Box::new(move || {
                    per_op(reps16, || {
                        (0..reps16).for_each(|_| {
                            raw_gemm(BIG, CUDA_R_16BF, ra16.ptr(), rb16.ptr(), rc16.ptr())
                        });
                        raw_sync();
                    })
                }),
                cudarc: None,
            },
            Row {
                name: "GEMM 64³ f32 + synchronize (latency)",
                unit: Unit::Ns,
                ours: Box::new(move || {
                    per_op(SMALL_REPS, || {
                        for _ in 0..SMALL_REPS {
                            stream
                                .scope(|s| blas.gemm(s, &g_small, dsa, dsb, &mut *dsc))
                                .unwrap();
                        }
                    })
                }),
                raw: Box::new(move || {
                    per_op(SMALL_REPS, || {
                        for _ in 0..SMALL_REPS {
                            raw_gemm(SMALL, CUDA_R_32F, rsa.ptr(), rsb.ptr(), rsc.ptr());
                            raw_sync();
                        }
                    })
                }),
                cudarc: Some(Box::new(move || {
                    per_op(SMALL_REPS, || {
                        for _ in 0..SMALL_REPS {
                            // SAFETY: every matrix is SMALL × SMALL, packed, in a slice of SMALL² f32.
                            unsafe { cblas.gemm(cfg(SMALL), csa, csb, &mut *csc) }.unwrap();
                            cstream.synchronize().unwrap();
                        }
                    })
                })),
            },
            Row {
                name: "FFT C2C 2^24 f32, forward",
                unit: Unit::Ns,
                ours: Box::new(move || {
                    per_op(FFT_REPS, || {
                        stream
                            .scope(|s| {
                                let out = s.bind_mut(&mut *dspec);
                                (0..FFT_REPS)
                                    .try_for_each(|_| plan.exec(s, out, dsig, Direction::Forward))
                            })
                            .unwrap()
                    })
                }),
                raw: Box::new(move || {
                    per_op(FFT_REPS, || {
                        for _ in 0..FFT_REPS {
                            // SAFETY: both buffers hold FFT_LEN complex f32, the plan's length;
                            // the input is not written by an out-of-place C2C transform.
                            unsafe {
                                fft_ok(fsys::cufftExecC2C(
                                    raw_plan,
                                    rsig.ptr().cast(),
                                    rspec.ptr().cast(),
                                    -1,
                                ))
                            };
                        }
                        raw_sync();
                    })
                }),
                cudarc: Some(Box::new(move || {
                    per_op(FFT_REPS, || {
                        for _ in 0..FFT_REPS {
                            cplan
                                .exec_c2c(
                                    &mut *csig,
                                    &mut *cspec,
                                    cudarc::cufft::FftDirection::Forward,
                                )
                                .unwrap();
                        }
                        cstream.synchronize().unwrap();
                    })
                })),
            },
            Row {
                name: "normal 2^26 f32, Philox",
                unit: Unit::Ns,
                ours: Box::new(move || {
                    per_op(RNG_REPS, || {
                        stream
                            .scope(|s| {
                                let out = s.bind_mut(&mut *dnorm);
                                (0..RNG_REPS).try_for_each(|_| philox.normal(s, out, 0.0, 1.0))
                            })
                            .unwrap()
                    })
                }),
                raw: Box::new(move || {
                    per_op(RNG_REPS, || {
                        for _ in 0..RNG_REPS {
                            // SAFETY: the buffer holds SAMPLES f32 (an even count).
                            unsafe {
                                rand_ok(rsys::curandGenerateNormal(
                                    raw_philox,
                                    rnorm.ptr().cast(),
                                    SAMPLES,
                                    0.0,
                                    1.0,
                                ))
                            };
                        }
                        raw_sync();
                    })
                }),
                cudarc: None,
            },
            Row {
                name: "normal 2^26 f32, XORWOW",
                unit: Unit::Ns,
                ours: Box::new(move || {
                    per_op(RNG_REPS, || {
                        stream
                            .scope(|s| {
                                let out = s.bind_mut(&mut *dnorm_x);
                                (0..RNG_REPS).try_for_each(|_| xorwow.normal(s, out, 0.0, 1.0))
                            })
                            .unwrap()
                    })
                }),
                raw: Box::new(move || {
                    per_op(RNG_REPS, || {
                        for _ in 0..RNG_REPS {
                            // SAFETY: the buffer holds SAMPLES f32 (an even count).
                            unsafe {
                                rand_ok(rsys::curandGenerateNormal(
                                    raw_xorwow,
                                    rnorm_x.ptr().cast(),
                                    SAMPLES,
                                    0.0,
                                    1.0,
                                ))
                            };
                        }
                        raw_sync();
                    })
                }),
                cudarc: Some(Box::new(move || {
                    per_op(RNG_REPS, || {
                        for _ in 0..RNG_REPS {
                            crng.fill_with_normal(&mut *cnorm, 0.0f32, 1.0).unwrap();
                        }
                        cstream.synchronize().unwrap();
                    })
                })),
            },
        ];
        // the primary context is current throughout: nothing to put back between columns
        let medians = measure(&mut rows, ROUNDS, || {});
        let work = [
            Some((2.0 * (BIG as f64).powi(3), "TFLOP/s", 1e12)),
            Some((2.0 * (BIG as f64).powi(3), "TFLOP/s", 1e12)),
            None,
            None,
            Some((SAMPLES as f64, "Gsamples/s", 1e9)),
            Some((SAMPLES as f64, "Gsamples/s", 1e9)),
        ];
        report(device, &libraries, &rows, &medians, &work, out)?;
    }

    // ---- every column's results ----
    let exact = |x: f32| x;
    let to_bf16 = |x: f32| Bf16::from_f32(x).to_f32();
    check_gemm("cuda-brand f32", BIG, &a32, &b32, &dc.to_vec()?, exact, 0.0);
    check_gemm("raw f32", BIG, &a32, &b32, &rcm.to_vec(), exact, 0.0);
    check_gemm(
        "cudarc f32",
        BIG,
        &a32,
        &b32,
        &cstream.clone_dtoh(&cc).expect("cudarc copy"),
        exact,
        0.0,
    );
    let ours16: Vec<f32> = dc16.to_vec()?.iter().map(|x| x.to_f32()).collect();
    let raw16: Vec<f32> = rc16.to_vec().into_iter().map(bf16_bits_to_f32).collect();
    check_gemm(
        "cuda-brand bf16",
        BIG,
        &a32,
        &b32,
        &ours16,
        to_bf16,
        1.0 / 128.0,
    );
    check_gemm("raw bf16", BIG, &a32, &b32, &raw16, to_bf16, 1.0 / 128.0);
    check_gemm(
        "cuda-brand 64³",
        SMALL,
        &sa,
        &sb,
        &dsc.to_vec()?,
        exact,
        0.0,
    );
    check_gemm("raw 64³", SMALL, &sa, &sb, &rsc.to_vec(), exact, 0.0);
    check_gemm(
        "cudarc 64³",
        SMALL,
        &sa,
        &sb,
        &cstream.clone_dtoh(&csc).expect("cudarc copy"),
        exact,
        0.0,
    );
    let spec: Vec<(f32, f32)> = dspec.to_vec()?.iter().map(|c| (c.re, c.im)).collect();
    check_fft("cuda-brand FFT", &spec);
    check_fft("raw FFT", &rspec.to_vec());
    let cspec: Vec<(f32, f32)> = cstream
        .clone_dtoh(&cspec)
        .expect("cudarc copy")
        .iter()
        .map(|c| (c.x, c.y))
        .collect();
    check_fft("cudarc FFT", &cspec);
    check_normal("cuda-brand Philox", &dnorm.to_vec()?);
    check_normal("raw Philox", &rnorm.to_vec());
    check_normal("cuda-brand XORWOW", &dnorm_x.to_vec()?);
    check_normal("raw XORWOW", &rnorm_x.to_vec());
    check_normal(
        "cudarc XORWOW",
        &cstream.clone_dtoh(&cnorm).expect("cudarc copy"),
    );
    eprintln!("checked: every column's GEMMs, FFT and samples");

    // SAFETY: our handles, their work synchronized (every measurement ends with it).
    unsafe {
        blas_ok(bsys::cublasDestroy_v2(raw_blas));
        fft_ok(fsys::cufftDestroy(raw_plan));
        rand_ok(rsys::curandDestroyGenerator(raw_philox));
        rand_ok(rsys::curandDestroyGenerator(raw_xorwow));
    }
    drop((
        ra, rb, rcm, ra16, rb16, rc16, rsa, rsb, rsc, rsig, rspec, rnorm, rnorm_x,
    ));
    // SAFETY: our stream, idle, nothing uses it after this.
    unsafe { ok(dsys::cuStreamDestroy_v2(raw_stream)) };
    Ok(())
}

/// The table: per operation, each column's median time (and its throughput where `work`
/// gives the work of one operation), then the two ratios.
fn report(
    device: &Device,
    libraries: &str,
    rows: &[Row<'_>],
    medians: &[[f64; 3]],
    work: &[Option<(f64, &str, f64)>],
    out: Option<&str>,
) -> Result<(), Error> {
    let mut text = format!(
        "{} (driver CUDA {}), {libraries}, medians of {ROUNDS} rounds, the three interleaved; ratios above 1 mean cuda-brand is slower\n\n",
        device.name()?,
        cuda_brand::driver_version()?
    );
    text.push_str(
        "| operation | cuda-brand | raw library | cudarc | cuda-brand / raw | cuda-brand / cudarc |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for ((row, &[ours, raw, theirs]), work) in rows.iter().zip(medians).zip(work) {
        let fmt = |ns: f64| {
            if ns.is_nan() {
                return "n/a".to_string();
            }
            let time = if ns >= 1e6 {
                format!("{:.3} ms", ns / 1e6)
            } else {
                format!("{:.1} µs", ns / 1e3)
            };
            match work {
                Some((amount, unit, scale)) => {
                    format!("{time} ({:.1} {unit})", amount / (ns * 1e-9) / scale)
                }
                None => time,
            }
        };
        let ratio = |a: f64, b: f64| {
            if b.is_nan() {
                "n/a".to_string()
            } else {
                format!("{:.3}", a / b)
            }
        };
        text.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.name,
            fmt(ours),
            fmt(raw),
            fmt(theirs),
            ratio(ours, raw),
            ratio(ours, theirs)
        ));
    }
    harness::emit(&text, out);
    Ok(())
}
