//! rust-cuda's `gemm` example (cust and blastoff, `examples/cuda/gemm` of Rust-GPU/Rust-CUDA)
//! written on this crate: cuBLAS SGEMMs of random square matrices from 32 to 4096, timed
//! with events, verified against a CPU GEMM.
//!
//! `cargo run --release --example gemm --features cublas`. Without a GPU, or without
//! cuBLAS (`CUDA_BRAND_CUBLAS_LIBRARY` names the library to load), it says so and exits 0;
//! it exits 1 if any result differs from the CPU's.
//!
//! What the port keeps and what it changes:
//!
//! * The same program: a 2 × 2 sanity check with known values, then for each size random
//!   A, B and C with elements uniform in [-10, 10), `alpha` 1 and `beta` 0, two warm-up
//!   GEMMs, ten timed ones, the mean time per GEMM printed. The peer verifies sizes below
//!   1024 only; here those are verified whole, and the larger ones at 256 sampled elements
//!   (each a dot product of `k` terms on the CPU), so every size is checked.
//! * Row-major matrices, as in the peer (which uses ndarray's standard layout): cuBLAS is
//!   column-major, and a row-major `C = A B` is the column-major `Cᵀ = Bᵀ Aᵀ`, so B is passed
//!   first. [`Gemm`] describes the product (`m`, `n`, `k`; its leading dimensions default
//!   to the packed ones), and `Blas::gemm` checks every buffer's length against what the
//!   description makes cuBLAS read or write before it calls cuBLAS: the peer's
//!   `CublasContext::gemm` takes the dimensions and leading dimensions as plain numbers and
//!   passes them on unchecked.
//! * `alpha` and `beta` are host values here (`CUBLAS_POINTER_MODE_HOST`); the peer copies
//!   them into `DeviceBox`es first.
//! * The handle, the buffers and the events live inside `with_context` and carry its brand;
//!   the GEMMs run in a stream scope, which borrows A and B shared and C exclusively until it
//!   has synchronized. The peer's timed loop synchronizes after every GEMM; here the ten are
//!   queued back to back between two events, which measures the GPU's time per GEMM.
//! * Not ported: the peer's two hand-written GEMM kernels (naive and tiled, written in Rust
//!   and compiled by rust-cuda's codegen). They are what that project is for; this crate
//!   runs kernels compiled elsewhere (examples/vector_add.rs launches one).
//! * No ndarray or rand: a small generator and a CPU GEMM are written out below.

use std::process::ExitCode;

use cuda_brand::cublas::{Blas, Gemm};
use cuda_brand::{
    ContextFlags, ContextGuard, Device, Error, ErrorCode, Event, EventFlags, Stream, StreamFlags,
    with_context,
};

/// The square sizes, as in the peer.
const SIZES: [usize; 8] = [32, 64, 128, 256, 512, 1024, 2048, 4096];
/// GEMMs run before timing.
const WARMUPS: usize = 2;
/// GEMMs timed.
const RUNS: usize = 10;
/// Sizes from this one on are verified at [`SAMPLES`] elements instead of every one.
const SAMPLED_FROM: usize = 1024;
/// Elements verified of a large product.
const SAMPLES: usize = 256;

type BoxError = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let device = match Device::get(0) {
        Ok(device) => device,
        Err(e) if no_gpu(&e) => {
            println!("no CUDA GPU here, so no GEMM to run: {e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&device) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Skip::NoCublas(e)) => {
            println!("cuBLAS could not be loaded, so no GEMM to run: {e}");
            ExitCode::SUCCESS
        }
        Err(Skip::Failed(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why [`run`] stopped: cuBLAS is missing (not a failure of the example), or anything else.
enum Skip {
    NoCublas(Error),
    Failed(BoxError),
}

impl<E: Into<BoxError>> From<E> for Skip {
    fn from(e: E) -> Skip {
        Skip::Failed(e.into())
    }
}

/// Whether `e` says that this machine has no GPU to use (no driver, or no device).
fn no_gpu(e: &Error) -> bool {
    matches!(e.code(), ErrorCode::NoDevice | ErrorCode::DriverNotFound)
        || (e.code() == ErrorCode::InvalidDevice && e.call() == "Device::get")
}

fn run(device: &Device) -> Result<(), Skip> {
    println!(
        "{} (compute {})",
        device.name()?,
        device.compute_capability()?
    );
    with_context(device, ContextFlags::default(), |ctx| {
        let blas = match Blas::new(ctx) {
            Ok(blas) => blas,
            Err(e) if e.code() == ErrorCode::CublasNotFound => return Err(Skip::NoCublas(e)),
            Err(e) => return Err(e.into()),
        };
        let (major, minor, patch) = cuda_brand::cublas::version()?;
        println!("cuBLAS {major}.{minor}.{patch}");
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        sanity(ctx, &blas, &stream)?;
        println!("sanity check: [[1, 2], [3, 4]] × [[5, 6], [7, 8]] = [[19, 22], [43, 50]]");
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for n in SIZES {
            size(ctx, &blas, &stream, &mut rng, n)?;
        }
        println!("verified: every size against the CPU");
        Ok(())
    })
}

/// The peer's 2 × 2 check: row-major `[[1, 2], [3, 4]] × [[5, 6], [7, 8]]`.
fn sanity<'ctx>(
    ctx: ContextGuard<'ctx>,
    blas: &Blas<'ctx>,
    stream: &Stream<'ctx>,
) -> Result<(), Skip> {
    let a = ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0])?;
    let b = ctx.from_slice(&[5.0f32, 6.0, 7.0, 8.0])?;
    let mut c = ctx.zeroed::<f32>(4)?;
    // row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ: B first
    stream.scope(|s| blas.gemm(s, &Gemm::new(2, 2, 2), &b, &a, &mut c))?;
    let c = c.to_vec()?;
    if c != [19.0, 22.0, 43.0, 50.0] {
        return Err(format!("sanity check: expected [19, 22, 43, 50], got {c:?}").into());
    }
    Ok(())
}

/// One size: random A, B, C, warm-up, timed GEMMs, verification.
fn size<'ctx>(
    ctx: ContextGuard<'ctx>,
    blas: &Blas<'ctx>,
    stream: &Stream<'ctx>,
    rng: &mut Rng,
    n: usize,
) -> Result<(), Skip> {
    let a: Vec<f32> = (0..n * n).map(|_| rng.uniform(-10.0, 10.0)).collect();
    let b: Vec<f32> = (0..n * n).map(|_| rng.uniform(-10.0, 10.0)).collect();
    let c0: Vec<f32> = (0..n * n).map(|_| rng.uniform(-10.0, 10.0)).collect();
    let (alpha, beta) = (1.0f32, 0.0f32);
    let da = ctx.from_slice(&a)?;
    let db = ctx.from_slice(&b)?;
    let mut dc = ctx.from_slice(&c0)?;
    let (mut start, mut end) = (
        Event::new(ctx, EventFlags::new())?,
        Event::new(ctx, EventFlags::new())?,
    );
    let gemm = Gemm::new(n, n, n).alpha(alpha).beta(beta);

    stream.scope(|s| {
        let c = s.bind_mut(&mut dc);
        for _ in 0..WARMUPS {
            blas.gemm(s, &gemm, &db, &da, c)?;
        }
        Ok::<(), Error>(())
    })?;
    let (t0, t1) = stream.scope(|s| {
        let c = s.bind_mut(&mut dc);
        let t0 = start.record(s)?;
        for _ in 0..RUNS {
            blas.gemm(s, &gemm, &db, &da, c)?;
        }
        end.record(s).map(|t1| (t0, t1))
    })?;
    let each = t0.elapsed(&t1)?.as_secs_f64() / RUNS as f64;
    let c = dc.to_vec()?;

    // row-major: C[i][j] = alpha Σ_l A[i][l] B[l][j] + beta C0[i][j], in f64, with the
    // sum of the terms' magnitudes (what rounding errors in f32 scale with)
    let expect = |i: usize, j: usize| {
        let (mut dot, mut mag) = (0.0f64, 0.0f64);
        for l in 0..n {
            let t = f64::from(a[i * n + l]) * f64::from(b[l * n + j]);
            dot += t;
            mag += t.abs();
        }
        let beta_c = f64::from(beta) * f64::from(c0[i * n + j]);
        (
            f64::from(alpha) * dot + beta_c,
            f64::from(alpha).abs() * mag + beta_c.abs(),
        )
    };
    let check = |i: usize, j: usize| -> Result<(), BoxError> {
        let ((want, mag), got) = (expect(i, j), f64::from(c[i * n + j]));
        // the peer's tolerance (0.01, relative, or absolute below 1), or 16 f32 roundings
        // of the terms' magnitudes, whichever is larger: a large sum of products of either
        // sign cancels, and its rounding errors scale with the terms, not with the result
        let bound = (0.01 * want.abs().max(1.0)).max(16.0 * f64::from(f32::EPSILON) * mag);
        if (want - got).abs() > bound {
            return Err(format!(
                "{n} × {n}: C[{i}][{j}] is {got}, the CPU's is {want} (tolerance {bound:.3e})"
            )
            .into());
        }
        Ok(())
    };
    let checked = if n < SAMPLED_FROM {
        for i in 0..n {
            for j in 0..n {
                check(i, j)?;
            }
        }
        format!("all {} elements", n * n)
    } else {
        for _ in 0..SAMPLES {
            check(rng.below(n), rng.below(n))?;
        }
        format!("{SAMPLES} sampled elements")
    };
    let flops = 2.0 * (n as f64).powi(3);
    println!(
        "cuBLAS {n:4} × {n:<4}: {:9.4} ms  {:9.1} GFLOP/s  (verified: {checked})",
        each * 1e3,
        flops / each / 1e9
    );
    Ok(())
}

/// A xorshift64* generator: enough for test matrices, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
