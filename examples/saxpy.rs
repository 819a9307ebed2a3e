//! A kernel written as CUDA code usually is: `saxpy(int n, float a, const float *x, float
//! *y)`, bare pointers and an `int` count, declared with `InPtr` / `OutPtr` and launched
//! from safe code, with no raw address. The declaration's promise, that every launch passes
//! an `n` of at most both lengths, is kept by the one function that launches it.
//!
//! `cargo run --release --example saxpy [N]` (default N = 1 Mi elements). Without a GPU it
//! prints the driver's error and exits 1.

use std::process::ExitCode;

use cuda_brand::prelude::*;
use cuda_brand::samples;

/// `saxpy(int n, float a, const float *x, float *y)`: `y[i] = a * x[i] + y[i]` for `i < n`.
type SaxpyParams = (i32, f32, InPtr<f32>, OutPtr<f32>);

/// The kernel, private to this type: [`Saxpy::run`] is its only launch.
struct Saxpy<'m, 'ctx>(Kernel<'m, 'ctx, SaxpyParams>);

impl<'m, 'ctx> Saxpy<'m, 'ctx> {
    fn new(module: &'m Module<'ctx>) -> cuda_brand::Result<Self> {
        // SAFETY: saxpy (`cuda_brand::samples`) has this parameter list and touches x[0..n]
        // and y[0..n] only, for a grid of fewer than 2^31 threads; the kernel stays in this
        // type, whose `run` passes n = the shorter length (below 2^30) and a grid of
        // `config_for(n)`, n rounded up to a block.
        Ok(Saxpy(unsafe { module.kernel::<SaxpyParams>("saxpy") }?))
    }

    /// Queues `y[i] = a * x[i] + y[i]` for `i` below both lengths.
    fn run<'s>(
        &'s self,
        s: &'s StreamScope<'s, '_, 'ctx>,
        a: f32,
        x: &'s DeviceBuffer<'ctx, f32>,
        y: &'s mut DeviceBuffer<'ctx, f32>,
    ) -> cuda_brand::Result<()> {
        let n = x.len().min(y.len());
        assert!(n <= 1 << 30, "saxpy indexes with an `int`");
        s.launch(&self.0, self.0.config_for(n)?, (n as i32, a, x, y))
    }
}

fn main() -> ExitCode {
    let n = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 1 << 20,
        Some(Ok(n)) if n > 0 && n <= 1 << 30 => n,
        Some(_) => {
            eprintln!("usage: saxpy [N, 0 < N <= 2^30]");
            return ExitCode::from(2);
        }
    };
    match run(n) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::get(0)?;
    println!("{}, N = {n}", device.name()?);
    // small integers, so that a * x + y is exact in f32: y becomes 5 * (i % 1000)
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (2 * (i % 1000)) as f32).collect();
    let a = 3.0f32;

    with_context(&device, ContextFlags::default(), |ctx| {
        let module = ctx.module_from_ptx(samples::KERNELS_PTX)?;
        let saxpy = Saxpy::new(&module)?;
        let dx = ctx.from_slice(&x)?;
        let mut dy = ctx.from_slice(&y)?;
        ctx.new_stream()?.scope(|s| saxpy.run(s, a, &dx, &mut dy))?;
        let out = dy.to_vec()?;

        if let Some(i) = (0..n).find(|&i| out[i] != a * x[i] + y[i]) {
            return Err(format!("element {i}: {a} * {} + {} gave {}", x[i], y[i], out[i]).into());
        }
        println!(
            "y[..4] = {:?}, y[{}] = {}",
            &out[..4.min(n)],
            n - 1,
            out[n - 1]
        );
        println!("verified: all {n} elements equal {a} * x[i] + y[i]");
        Ok(())
    })
}
