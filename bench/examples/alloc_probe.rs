//! Where does stream-ordered allocation spend its time? A diagnostic (its first table is in
//! `bench/results/2026-11-23-first-runs/README.md`):
//! 100 allocations of 1 KiB, a stream synchronize, 100 frees, timed five ways in rotating
//! order, 31 rounds, medians per allocation and free:
//!
//! 1. raw calls, pointers in an array (the benchmark's raw column);
//! 2. raw calls, pointers pushed onto a `Vec` of an enum (what a scope does);
//! 3. a `StreamScope` (the benchmark's cuda-brand column);
//! 4. raw calls, freed in reverse order;
//! 5. a `StreamScope` followed by a second synchronize (waiting for the frees).
//!
//! Unlike `benches/overhead.rs`, no other library's allocations run between them.
//! `cargo run --release --example alloc_probe`; without a GPU it prints the error, exits 1.

use std::hint::black_box;
use std::time::Instant;

use cuda_brand::{ContextFlags, Device, Error, Stream, StreamFlags, with_context};
use cuda_driver_sys as sys;

unsafe extern "C" {
    fn cuMemAllocAsync(p: *mut u64, bytes: usize, s: sys::CUstream) -> u32;
    fn cuMemFreeAsync(p: u64, s: sys::CUstream) -> u32;
    fn cuStreamSynchronize(s: sys::CUstream) -> u32;
}

/// ns per allocation and free: `n` runs of `f`, each doing 100 of them.
fn per_pair(n: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / n as f64 / 100.0
}

enum Allocation {
    Pool(u64),
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // SAFETY: the raw rounds use the handle while `stream` lives and destroy nothing.
        let rs = unsafe { stream.as_raw() };
        let ok = |r: u32| assert_eq!(r, 0);
        let mut rounds: Vec<[f64; 5]> = Vec::new();
        for round in 0..32 {
            let mut r = [0.0; 5];
            for k in 0..5 {
                let which = (k + round) % 5;
                r[which] = match which {
                    // SAFETY: a live stream, out-pointers are locals, each pointer freed
                    // once after the synchronize.
                    0 => per_pair(10, || unsafe {
                        let mut ptrs = [0u64; 100];
                        for p in &mut ptrs {
                            ok(cuMemAllocAsync(p, 1024, rs));
                        }
                        ok(cuStreamSynchronize(rs));
                        for p in ptrs {
                            ok(cuMemFreeAsync(p, rs));
                        }
                    }),
                    // SAFETY: as above.
                    1 => per_pair(10, || unsafe {
                        let mut v: Vec<Allocation> = Vec::new();
                        for _ in 0..100 {
                            let mut p = 0;
                            ok(cuMemAllocAsync(&mut p, 1024, rs));
                            v.push(Allocation::Pool(p));
                        }
                        ok(cuStreamSynchronize(rs));
                        for Allocation::Pool(p) in v {
                            ok(cuMemFreeAsync(p, rs));
                        }
                    }),
                    2 | 4 => per_pair(10, || {
                        stream
                            .scope(|s| {
                                for _ in 0..100 {
                                    // SAFETY: never read.
                                    black_box(unsafe { s.alloc::<u8>(1024) }?);
                                }
                                Ok::<_, Error>(())
                            })
                            .unwrap();
                        if which == 4 {
                            stream.synchronize().unwrap();
                        }
                    }),
                    // SAFETY: as above.
                    _ => per_pair(10, || unsafe {
                        let mut ptrs = [0u64; 100];
                        for p in &mut ptrs {
                            ok(cuMemAllocAsync(p, 1024, rs));
                        }
                        ok(cuStreamSynchronize(rs));
                        for p in ptrs.iter().rev() {
                            ok(cuMemFreeAsync(*p, rs));
                        }
                    }),
                };
            }
            if round > 0 {
                rounds.push(r); // round 0 warms up
            }
        }
        let names = [
            "raw, array",
            "raw, Vec of an enum",
            "StreamScope",
            "raw, frees reversed",
            "StreamScope + synchronize",
        ];
        for (i, name) in names.iter().enumerate() {
            let mut v: Vec<f64> = rounds.iter().map(|r| r[i]).collect();
            v.sort_by(f64::total_cmp);
            println!(
                "{name:>26}: median {:.0} ns per alloc+free (min {:.0}, max {:.0})",
                v[v.len() / 2],
                v[0],
                v[v.len() - 1]
            );
        }
        Ok(())
    })
}
