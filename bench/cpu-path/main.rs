//! The loop `scripts/cpu-path` measures: `WHAT` (`with_raw_context` or `shared_enter`)
//! `N` times (default 2,000,000), `R` runs (default 7); prints the best run's ns per entry.
//! The context is a made-up handle that the stand-in driver only pushes and pops.

use cuda_brand::{Error, with_raw_context};
use std::hint::black_box;
use std::time::Instant;

fn var(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn best(mut once: impl FnMut()) -> f64 {
    let (n, runs) = (var("N", 2_000_000), var("R", 7));
    let mut best = f64::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        for _ in 0..n {
            once();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / f64::from(n));
    }
    best
}

fn main() {
    let raw = 0x1000 as *mut u8;
    let what = std::env::var("WHAT").unwrap_or_default();
    // SAFETY: the stand-in driver's context is a number it pushes and pops, never destroyed.
    let ns = unsafe {
        with_raw_context(raw.cast(), |ctx| {
            Ok::<_, Error>(match what.as_str() {
                "shared_enter" => {
                    let shared = ctx.share();
                    best(|| {
                        shared
                            .enter(|c| Ok::<_, Error>(black_box(c).as_raw()))
                            .unwrap();
                    })
                }
                _ => best(|| {
                    with_raw_context(raw.cast(), |c| Ok::<_, Error>(black_box(c).as_raw()))
                        .unwrap();
                }),
            })
        })
    }
    .unwrap();
    print!("{ns:.1}");
}
