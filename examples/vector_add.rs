//! The main job: allocate, copy, launch, copy back, verify every element, print timing.
//!
//! `cargo run --release --example vector_add [N]` (default N = 16 Mi elements). Without a
//! GPU it prints the driver's error and exits 1.

use std::process::ExitCode;
use std::time::Instant;

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, Event, EventFlags, In, Module, Out, Stream, StreamFlags,
    samples, with_context,
};

fn main() -> ExitCode {
    let n = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 16 << 20,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: vector_add [N > 0]");
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
    println!(
        "{} (compute {}), N = {n}",
        device.name()?,
        device.compute_capability()?
    );
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 0.5 - (i % 1000) as f32).collect();

    with_context(&device, ContextFlags::default(), |ctx| {
        // the crate's sample kernels (kernels/kernels.cu), compiled into it as PTX
        let module = Module::from_ptx(ctx, samples::KERNELS_PTX)?;
        // SAFETY: `vector_add(const float *a, size_t a_len, const float *b, size_t b_len,
        // float *c, size_t c_len)` (`cuda_brand::samples`) has this parameter list, reads a
        // and b, writes c, and never indexes past the smallest length.
        let vector_add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let (mut start, mut end) = (
            Event::new(ctx, EventFlags::new())?,
            Event::new(ctx, EventFlags::new())?,
        );

        let t = Instant::now();
        let da = DeviceBuffer::from_slice(ctx, &a)?;
        let db = DeviceBuffer::from_slice(ctx, &b)?;
        let mut dc = DeviceBuffer::<f32>::zeroed(ctx, n)?;
        let upload = t.elapsed();

        let config = vector_add.config_for(n)?;
        let (t0, t1) = stream.scope(|s| {
            let t0 = start.record(s)?;
            s.launch(&vector_add, config, (&da, &db, &mut dc))?;
            end.record(s).map(|t1| (t0, t1))
        })?;
        let kernel = t0.elapsed(&t1)?;

        let t = Instant::now();
        let c = dc.to_vec()?;
        let download = t.elapsed();

        let wrong = (0..n).filter(|&i| c[i] != a[i] + b[i]).count();
        if wrong > 0 {
            let i = (0..n).find(|&i| c[i] != a[i] + b[i]).unwrap_or(0);
            return Err(format!(
                "{wrong} wrong elements, first at {i}: {} + {} gave {}",
                a[i], b[i], c[i]
            )
            .into());
        }
        let bytes = 3.0 * n as f64 * 4.0;
        println!(
            "upload   {:8.3} ms (2 buffers, with allocation)",
            upload.as_secs_f64() * 1e3
        );
        println!(
            "kernel   {:8.3} ms ({} blocks of {}; {:.0} GB/s)",
            kernel.as_secs_f64() * 1e3,
            config.grid[0],
            config.block[0],
            bytes / kernel.as_secs_f64() / 1e9
        );
        println!("download {:8.3} ms", download.as_secs_f64() * 1e3);
        println!("verified: all {n} elements equal a[i] + b[i]");
        Ok(())
    })
}
