//! Large synchronous copies from the device into pageable host memory, from Rust: into a
//! new `Vec` each time (cuda-brand's `to_vec`, cudarc 0.19.10's `clone_dtoh`) and into a
//! `Vec` reused across copies (cuda-brand's `copy_to_host`, cudarc's `memcpy_dtoh`), for
//! 64 MiB and 256 MiB. For docs/driver-facts.md, "Large pageable copies", next to the raw
//! driver calls of `docs/c/facts/bandwidth.c`.
//!
//! cuda-brand and cudarc share the device's primary context. The four variants run
//! interleaved, five rounds after a warm-up round; each copy is timed until its data is
//! in the `Vec` (cudarc's copies are followed by a stream synchronize), a new `Vec` is
//! freed after the timing. GB/s are 10^9 bytes per second, medians of the five rounds.
//!
//! `cargo run --release --example pageable_dtoh`; its recorded output is
//! `bench/examples/pageable_dtoh.out`. Without a GPU it prints the driver's error and
//! exits 1.

use std::process::ExitCode;
use std::time::Instant;

use cuda_brand::{Device, with_primary_context};
use cudarc::driver as rc;

const ROUNDS: usize = 5;

fn gbps(bytes: usize, t: Instant) -> f64 {
    bytes as f64 / t.elapsed().as_secs_f64() / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn cudarc_error(e: rc::DriverError) -> String {
    format!("cudarc: {e:?}")
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::get(0)?;
    println!("{}", device.name()?);
    with_primary_context(&device, |ctx| {
        let rctx = rc::CudaContext::new(0).map_err(cudarc_error)?;
        let rstream = rctx.new_stream().map_err(cudarc_error)?;
        for mib in [64usize, 256] {
            let n = mib << 18; // u32 elements
            let bytes = n * 4;
            let ours = ctx.zeroed::<u32>(n)?;
            let theirs = rstream.alloc_zeros::<u32>(n).map_err(cudarc_error)?;
            rstream.synchronize().map_err(cudarc_error)?;
            let mut reused = vec![0u32; n];
            let mut r: [Vec<f64>; 4] = Default::default();
            for round in 0..=ROUNDS {
                let t = Instant::now();
                let v = ours.to_vec()?;
                let a = gbps(bytes, t);
                drop(v);
                let t = Instant::now();
                ours.copy_to_host(&mut reused)?;
                let b = gbps(bytes, t);
                let t = Instant::now();
                let v = rstream.clone_dtoh(&theirs).map_err(cudarc_error)?;
                rstream.synchronize().map_err(cudarc_error)?;
                let c = gbps(bytes, t);
                drop(v);
                let t = Instant::now();
                rstream
                    .memcpy_dtoh(&theirs, &mut reused)
                    .map_err(cudarc_error)?;
                rstream.synchronize().map_err(cudarc_error)?;
                let d = gbps(bytes, t);
                if round > 0 {
                    for (k, x) in [a, b, c, d].into_iter().enumerate() {
                        r[k].push(x);
                    }
                }
            }
            let [a, b, c, d] = r.map(median);
            println!(
                "{mib:>3} MiB into a new Vec: cuda-brand to_vec {a:5.1} GB/s, cudarc clone_dtoh {c:5.1} GB/s; \
                 into a reused Vec: cuda-brand copy_to_host {b:5.1} GB/s, cudarc memcpy_dtoh {d:5.1} GB/s \
                 (medians of {ROUNDS})"
            );
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}
