//! The method of `overhead.rs`, for benchmarks that use it as a module (`mod harness;`):
//! rows of one operation measured three ways (cuda-brand, the same driver calls made
//! directly, cudarc where it has the operation), run interleaved in rounds with the order
//! rotating each round, round 0 a warm-up; the table reports medians and the two ratios.
#![allow(dead_code)]

use std::time::Instant;

use cuda_brand::{ContextGuard, Device, Error, with_primary_context};

/// What a measurement is: nanoseconds per operation (lower is better) or GB/s.
#[derive(Clone, Copy, PartialEq)]
pub enum Unit {
    Ns,
    GBps,
}

/// One measurement: runs the operation and returns its time (ns) or bandwidth (GB/s).
pub type Measure<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// One operation, three ways; `cudarc` is `None` where cudarc has no such operation.
pub struct Row<'a> {
    pub name: &'static str,
    pub unit: Unit,
    pub ours: Measure<'a>,
    pub raw: Measure<'a>,
    pub cudarc: Option<Measure<'a>>,
}

/// Times `n` runs of `f`, in ns per run.
pub fn per_op(n: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Times one run of `f` moving `bytes`, in GB/s.
pub fn bandwidth(bytes: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    bytes as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// The inputs of `workload`'s and `round_parts`' rounds: `a[i] = i`, `b[i] = 2i + 0.5`.
pub fn vector_add_inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    (
        (0..n).map(|i| i as f32).collect(),
        (0..n).map(|i| (2 * i) as f32 + 0.5).collect(),
    )
}

/// Checks a round's output: `c[i] == a[i] + b[i]` for every `i`.
pub fn verify_vector_add(a: &[f32], b: &[f32], c: &[f32]) {
    assert_eq!(c.len(), a.len());
    for i in 0..c.len() {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `fn main` of a benchmark named `name`: runs `run` on device 0's primary context with
/// the value of `--out FILE`, if given. Without a GPU it prints the driver's error and
/// returns (so `cargo bench` stays usable); an error of `run` exits 1.
pub fn main(
    name: &str,
    run: impl for<'ctx> FnOnce(ContextGuard<'ctx>, &Device, Option<&str>) -> Result<(), Error>,
) {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{name}: no benchmark without a GPU: {e}");
            return;
        }
    };
    if let Err(e) = with_primary_context(&device, |ctx| run(ctx, &device, out.as_deref())) {
        eprintln!("{name}: {e}");
        std::process::exit(1);
    }
}

/// Runs every row `rounds` times after a warm-up round, the three columns interleaved and
/// their order rotating each round; `after` runs after every measurement (to put back
/// what a column may have changed, such as the current context). Returns each row's
/// medians (`NaN` for a column it does not have).
pub fn measure(rows: &mut [Row<'_>], rounds: usize, mut after: impl FnMut()) -> Vec<[f64; 3]> {
    let mut samples: Vec<[Vec<f64>; 3]> = rows.iter().map(|_| [vec![], vec![], vec![]]).collect();
    for round in 0..=rounds {
        for (row, s) in rows.iter_mut().zip(samples.iter_mut()) {
            for k in 0..3 {
                let which = (k + round) % 3;
                let v = match which {
                    0 => (row.ours)(),
                    1 => (row.raw)(),
                    _ => match row.cudarc.as_mut() {
                        Some(f) => f(),
                        None => continue,
                    },
                };
                after();
                if round > 0 {
                    s[which].push(v); // round 0 is the warm-up
                }
            }
        }
    }
    samples
        .into_iter()
        .map(|s| s.map(|v| if v.is_empty() { f64::NAN } else { median(v) }))
        .collect()
}

/// The Markdown table of `rows` and their medians: the three columns, then cuda-brand / raw
/// and cuda-brand / cudarc (above 1: cuda-brand costs more; for GB/s, the inverse
/// bandwidth).
pub fn table(rows: &[Row<'_>], medians: &[[f64; 3]]) -> String {
    let mut table = String::from(
        "| operation | cuda-brand | raw driver | cudarc | cuda-brand / raw | cuda-brand / cudarc |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (row, &[ours, raw, theirs]) in rows.iter().zip(medians) {
        let fmt = |v: f64| match (v.is_nan(), row.unit) {
            (true, _) => "n/a".to_string(),
            (false, Unit::Ns) => format!("{v:.0} ns"),
            (false, Unit::GBps) => format!("{v:.1} GB/s"),
        };
        let ratio = |a: f64, b: f64| match (b.is_nan(), row.unit) {
            (true, _) => "n/a".to_string(),
            (false, Unit::Ns) => format!("{:.3}", a / b),
            (false, Unit::GBps) => format!("{:.3}", b / a),
        };
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.name,
            fmt(ours),
            fmt(raw),
            fmt(theirs),
            ratio(ours, raw),
            ratio(ours, theirs)
        ));
    }
    table
}

/// Prints the table of `rows` under a header naming the device, the driver and `what`, and
/// writes both to `out` if given.
pub fn report(
    device: &Device,
    what: &str,
    rounds: usize,
    rows: &[Row<'_>],
    medians: &[[f64; 3]],
    out: Option<&str>,
) -> Result<(), Error> {
    let header = format!(
        "{} (driver CUDA {}), {what}, medians of {rounds} rounds, the three interleaved; ratios above 1 mean cuda-brand is slower (for GB/s: inverse bandwidth)\n\n",
        device.name()?,
        cuda_brand::driver_version()?
    );
    emit(&format!("{header}{}", table(rows, medians)), out);
    Ok(())
}

/// Prints `text` (a benchmark's header and tables), and writes it to `out` if given (the
/// value of `--out FILE`).
pub fn emit(text: &str, out: Option<&str>) {
    print!("{text}");
    if let Some(path) = out {
        std::fs::write(path, text).expect("writing the table");
        eprintln!("table written to {path}");
    }
}
