//! The GPU fuzz run behind the safe `Module::from_binary`: mutated copies of the committed
//! cubin and fatbin, each loaded in a child process, and not one may kill its process.
//!
//! The parent test writes batches of mutated images (100 per batch) to a temporary folder
//! and runs its test binary (`gpu`) again as a child (`CUDA_BRAND_FUZZ_CHILD=<batch file>`,
//! which `tests/gpu.rs` hands to `fuzz_child` before its harness starts), eight at a time. A child creates a context, loads every image of its batch
//! with `Module::from_binary` (and, for each image it loads, reads every kernel's parameters
//! as a declaration does: the count from the image's own table, then the driver's layout)
//! and prints one line per image: `ok`, `rejected` (the crate's
//! image check refused it) or `driver <code>` (the driver refused it). A child killed by a
//! signal has its images re-run one per child to find the ones that crash; those are saved
//! next to the batches and the test fails listing them. A child that hangs is killed and
//! reported the same way.
//!
//! Mutations are seeded and reproducible: truncations, header and table fields (ELF header,
//! section and program headers, symbols, relocations, `.nv.info` records, fatbin headers)
//! overwritten with boundary values (0, the image length and its neighbours, `u32::MAX`,
//! `u64::MAX`, random) or nearby plausible ones (small deltas, values below twice the old
//! one), random byte flips anywhere, and byte changes inside section contents only (most of
//! which pass the check and reach the driver).
//!
//! Knobs: `CUDA_BRAND_FUZZ_COUNT` (images per kind, default 10000), `CUDA_BRAND_FUZZ_SEED`
//! (default fixed), `CUDA_BRAND_FUZZ_TRACE=1` (children print each driver step on stderr; with
//! `CUDA_BRAND_FUZZ_CHILD=crash-NAME-N.bin` a child loads one saved crashing image), `CUDA_BRAND_FUZZ_STANDIN=1` (no GPU: children answer `driver StandIn`,
//! except that one image in 997 aborts its child, to exercise this harness itself).
//!
//! Skips without a device (fails with `CUDA_BRAND_REQUIRE_GPU=1`) and under
//! compute-sanitizer (the driver errors it provokes are the point). Alone:
//! `cargo test --release --test gpu -- --exact mutated_images_never_kill_the_process`.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::ops::Range;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cuda_brand::{ContextFlags, Device, Error, Module, with_context};

const CUBIN: &[u8] = include_bytes!("../kernels/kernels_sm90.cubin");
const FATBIN: &[u8] = include_bytes!("../kernels/kernels.fatbin");
/// The kernels of both images (`kernels/kernels.cu`).
const KERNELS: [&str; 8] = [
    "vector_add",
    "scale",
    "sum_u64",
    "empty",
    "empty8",
    "write_wild",
    "bump",
    "spin",
];

const CHILD_VAR: &str = "CUDA_BRAND_FUZZ_CHILD";
const STANDIN_VAR: &str = "CUDA_BRAND_FUZZ_STANDIN";
const RESULT: &str = "fuzz-result: ";
const PER_CHILD: usize = 100;
const CHILDREN: usize = 8;
const BATCH_TIMEOUT: Duration = Duration::from_secs(180);
const SINGLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Stop re-running crashed batches image by image after this many crashing images.
const MAX_CRASHERS: usize = 20;

// ---------------------------------------------------------------------------------------
// The child: load each image of a batch, print one line per image.

/// In a child (`CUDA_BRAND_FUZZ_CHILD` set), loads its batch and returns the exit status:
/// `tests/gpu.rs` calls this first, before its harness.
pub fn child() -> Option<std::process::ExitCode> {
    let path = std::env::var_os(CHILD_VAR)?;
    fuzz_child(Path::new(&path));
    Some(std::process::ExitCode::SUCCESS)
}

/// This file's test (it may run beside any other test of its binary).
pub fn tests() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    let needs = match std::env::var_os(STANDIN_VAR) {
        Some(_) => Needs::Nothing, // the harness's self-test: no GPU
        None => Needs::Gpu,
    };
    vec![Test {
        name: "mutated_images_never_kill_the_process",
        needs,
        body: mutated_images_never_kill_the_process,
    }]
}

/// The child: loads each image of the batch at `path`, printing one line per image.
fn fuzz_child(path: &Path) {
    // a saved crashing image (`crash-*.bin`) is one raw image, not a batch
    let images = match path.extension() {
        Some(ext) if ext == "bin" => vec![fs::read(path).unwrap()],
        _ => read_batch(path),
    };
    // CUDA_BRAND_FUZZ_TRACE=1: each step on stderr, unbuffered, to see where a crash is
    let trace = std::env::var_os("CUDA_BRAND_FUZZ_TRACE").is_some();
    if std::env::var_os(STANDIN_VAR).is_some() {
        for image in &images {
            if fnv(image) % 997 == 0 {
                std::process::abort();
            }
            println!("{RESULT}driver StandIn");
        }
        return;
    }
    let device = Device::get(0).expect("the fuzz child needs device 0");
    with_context(
        &device,
        ContextFlags::default(),
        |ctx| -> Result<(), Error> {
            for image in &images {
                if trace {
                    eprintln!("trace: Module::from_binary ({} bytes)", image.len());
                }
                let line = match Module::from_binary(ctx, image) {
                    Ok(module) => {
                        // each kernel's parameters, as a declaration reads them: the count
                        // from the mutated image's own table (on CUDA 12.4-13.1 drivers),
                        // then the driver's layout; whatever they say, nothing may crash
                        for name in KERNELS {
                            if trace {
                                eprintln!("trace: Module::function({name})");
                            }
                            if let Ok(f) = module.function(name) {
                                if trace {
                                    eprintln!("trace: Function::params ({name})");
                                }
                                let params = f.params();
                                if trace {
                                    eprintln!("trace: {params:?}");
                                }
                            }
                        }
                        drop(module);
                        "ok".to_string()
                    }
                    Err(e) if e.call() == "Module::from_binary" => "rejected".to_string(),
                    Err(e) => format!("driver {:?}", e.code()),
                };
                println!("{RESULT}{line}");
            }
            Ok(())
        },
    )
    .expect("the fuzz child's context failed");
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A batch file: `u32` count, then per image a `u64` length and the bytes.
fn write_batch(path: &Path, images: &[&[u8]]) {
    let mut out = Vec::new();
    out.extend_from_slice(&(images.len() as u32).to_le_bytes());
    for image in images {
        out.extend_from_slice(&(image.len() as u64).to_le_bytes());
        out.extend_from_slice(image);
    }
    fs::write(path, out).unwrap();
}

fn read_batch(path: &Path) -> Vec<Vec<u8>> {
    let data = fs::read(path).unwrap();
    let count = u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
    let mut at = 4;
    let mut images = Vec::with_capacity(count);
    for _ in 0..count {
        let len = u64::from_le_bytes(data[at..at + 8].try_into().unwrap()) as usize;
        images.push(data[at + 8..at + 8 + len].to_vec());
        at += 8 + len;
    }
    images
}

// ---------------------------------------------------------------------------------------
// Mutations.

struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // splitmix64 of the seed: nearby seeds give unrelated streams, and never zero.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        XorShift((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn get(b: &[u8], at: usize, width: usize) -> u64 {
    b[at..at + width]
        .iter()
        .rev()
        .fold(0u64, |v, &x| (v << 8) | u64::from(x))
}

fn put(b: &mut [u8], at: usize, width: usize, value: u64) {
    for (k, byte) in b[at..at + width].iter_mut().enumerate() {
        *byte = (value >> (8 * k)) as u8;
    }
}

/// Where the header and table fields of a pristine image are, and the byte ranges of its
/// section contents.
#[derive(Default)]
struct Layout {
    fields: Vec<(usize, usize)>, // (offset, width)
    contents: Vec<Range<usize>>,
}

fn elf_layout(b: &[u8], base: usize, l: &mut Layout) {
    let r = |at: usize, w: usize| get(b, base + at, w) as usize;
    for (at, w) in [
        (32, 8),
        (40, 8),
        (54, 2),
        (56, 2),
        (58, 2),
        (60, 2),
        (62, 2),
    ] {
        l.fields.push((base + at, w));
    }
    let (phoff, phnum, shoff, shnum) = (r(32, 8), r(56, 2), r(40, 8), r(60, 2));
    for n in 0..phnum {
        for (at, w) in [(0, 4), (8, 8), (32, 8), (40, 8), (48, 8)] {
            l.fields.push((base + phoff + n * 56 + at, w));
        }
    }
    for i in 1..shnum {
        let h = shoff + i * 64;
        for (at, w) in [
            (0, 4),
            (4, 4),
            (8, 8),
            (24, 8),
            (32, 8),
            (40, 4),
            (44, 4),
            (48, 8),
            (56, 8),
        ] {
            l.fields.push((base + h + at, w));
        }
        let (typ, off, size) = (r(h + 4, 4) as u32, r(h + 24, 8), r(h + 32, 8));
        if typ == 8 || size == 0 {
            continue;
        }
        l.contents.push(base + off..base + off + size);
        match typ {
            2 => {
                for n in 1..size / 24 {
                    for (at, w) in [(0, 4), (4, 1), (6, 2), (8, 8), (16, 8)] {
                        l.fields.push((base + off + n * 24 + at, w));
                    }
                }
            }
            4 | 9 => {
                let es = if typ == 4 { 24 } else { 16 };
                for n in 0..size / es {
                    for (at, w) in [(0, 8), (8, 4), (12, 4)] {
                        l.fields.push((base + off + n * es + at, w));
                    }
                }
            }
            0x7000_0000 => {
                let mut p = 0;
                while p + 4 <= size {
                    let at = base + off + p;
                    l.fields.push((at, 1));
                    l.fields.push((at + 2, 2));
                    let v = get(b, at + 2, 2) as usize;
                    if b[at] == 4 {
                        for k in (0..v).step_by(4) {
                            l.fields.push((at + 4 + k, 4));
                        }
                        p += 4 + v;
                    } else {
                        p += 4;
                    }
                }
            }
            _ => {}
        }
    }
}

fn layout(b: &[u8]) -> Layout {
    let mut l = Layout::default();
    if b[..4] == [0x7f, b'E', b'L', b'F'] {
        elf_layout(b, 0, &mut l);
        return l;
    }
    l.fields.extend([(4, 2), (6, 2), (8, 8)]);
    let mut p = 16;
    while p < b.len() {
        let (hs, size) = (get(b, p + 4, 4) as usize, get(b, p + 8, 8) as usize);
        for (at, w) in [
            (0, 2),
            (2, 2),
            (4, 4),
            (8, 8),
            (16, 4),
            (20, 4),
            (28, 4),
            (32, 4),
            (36, 4),
            (40, 8),
            (48, 8),
            (56, 8),
        ] {
            l.fields.push((p + at, w));
        }
        if get(b, p, 2) == 2 {
            elf_layout(b, p + hs, &mut l);
        } else {
            l.contents.push(p + hs..p + hs + size);
        }
        p += hs + size;
    }
    l
}

const KINDS: [&str; 5] = [
    "truncate",
    "field-boundary",
    "field-plausible",
    "flip-anywhere",
    "flip-contents",
];

/// Mutation `index` of `image`, reproducible from (seed, index); returns its kind.
fn mutate(image: &[u8], l: &Layout, seed: u64, index: usize, m: &mut Vec<u8>) -> usize {
    let mut rng = XorShift::new(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    m.clear();
    m.extend_from_slice(image);
    let len = image.len() as u64;
    let roll = rng.below(100);
    let kind = match roll {
        0..=11 => 0,
        12..=36 => 1,
        37..=51 => 2,
        52..=61 => 3,
        _ => 4,
    };
    match kind {
        0 => {
            let keep = if rng.below(2) == 0 {
                rng.below(image.len())
            } else {
                image.len() - 1 - rng.below(64)
            };
            m.truncate(keep);
        }
        1 | 2 => {
            for _ in 0..1 + rng.below(2) {
                let (at, w) = l.fields[rng.below(l.fields.len())];
                let max = if w == 8 {
                    u64::MAX
                } else {
                    (1u64 << (8 * w)) - 1
                };
                let old = get(m, at, w);
                let value = if kind == 1 {
                    match rng.below(8) {
                        0 => rng.next(),
                        1 => len,
                        2 => len - 1,
                        3 => len + 1,
                        4 => 0,
                        5 => u64::from(u32::MAX),
                        6 => u64::MAX,
                        _ => len + rng.next() % 4096,
                    }
                } else {
                    let delta = 1 + rng.next() % 64;
                    match rng.below(4) {
                        0 => old.wrapping_add(delta),
                        1 => old.wrapping_sub(delta),
                        2 => rng.next() % (old.saturating_mul(2) + 16),
                        _ => get(m, l.fields[rng.below(l.fields.len())].0, w),
                    }
                };
                put(m, at, w, value & max);
            }
        }
        3 => {
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(m.len());
                m[at] ^= 1 << rng.below(8);
            }
        }
        _ => {
            let r = &l.contents[rng.below(l.contents.len())];
            for _ in 0..1 + rng.below(4) {
                let at = r.start + rng.below(r.len());
                if rng.below(2) == 0 {
                    m[at] ^= 1 << rng.below(8);
                } else {
                    m[at] = rng.next() as u8;
                }
            }
        }
    }
    kind
}

// ---------------------------------------------------------------------------------------
// The parent.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Rejected,
    Driver,
    Loaded,
    Crashed,
    Unknown,
}

#[derive(Default)]
struct Tally {
    /// (mutation kind, outcome) -> images
    counts: BTreeMap<(usize, Outcome), usize>,
    driver_codes: BTreeMap<String, usize>,
    signals: usize,
    crashers: Vec<String>,
    failures: Vec<String>,
}

enum Child {
    Done(ExitStatus, Vec<String>, String),
    TimedOut(Vec<String>),
}

fn run_child(batch: &Path, timeout: Duration) -> Child {
    let out = batch.with_extension("out");
    let err = batch.with_extension("err");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_VAR, batch)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .spawn()
        .expect("re-running the test binary");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let lines = fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.find(RESULT).map(|at| l[at + RESULT.len()..].to_owned()))
        .collect();
    let stderr = fs::read_to_string(&err).unwrap_or_default();
    let _ = fs::remove_file(&out);
    let _ = fs::remove_file(&err);
    match status {
        Some(status) => Child::Done(status, lines, stderr),
        None => Child::TimedOut(lines),
    }
}

fn outcome(line: &str) -> Outcome {
    match line {
        "ok" => Outcome::Loaded,
        "rejected" => Outcome::Rejected,
        l if l.starts_with("driver ") => Outcome::Driver,
        _ => Outcome::Unknown,
    }
}

fn tail(s: &str) -> &str {
    &s[s.len().saturating_sub(2000)..]
}

/// Runs every batch of mutations of `image` and tallies what happened.
fn fuzz(dir: &Path, name: &str, image: &[u8], seed: u64, count: usize) -> Tally {
    let l = layout(image);
    let tally = Mutex::new(Tally::default());
    let next = AtomicUsize::new(0);
    let batches = count.div_ceil(PER_CHILD);
    std::thread::scope(|scope| {
        for _ in 0..CHILDREN {
            scope.spawn(|| {
                let mut buffers: Vec<Vec<u8>> = Vec::new();
                loop {
                    let batch = next.fetch_add(1, Ordering::Relaxed);
                    if batch >= batches {
                        break;
                    }
                    let first = batch * PER_CHILD;
                    let n = PER_CHILD.min(count - first);
                    buffers.resize_with(n, Vec::new);
                    let kinds: Vec<usize> = (0..n)
                        .map(|j| mutate(image, &l, seed, first + j, &mut buffers[j]))
                        .collect();
                    let path = dir.join(format!("{name}-{batch}.batch"));
                    let refs: Vec<&[u8]> = buffers.iter().map(Vec::as_slice).collect();
                    write_batch(&path, &refs);
                    let result = run_child(&path, BATCH_TIMEOUT);
                    let (lines, crashed) = match result {
                        Child::Done(status, lines, stderr) => {
                            if let Some(sig) = status.signal() {
                                tally.lock().unwrap().signals += 1;
                                eprintln!(
                                    "fuzz: {name} batch {batch} killed by signal {sig} after {} \
                                     images",
                                    lines.len()
                                );
                                (lines, true)
                            } else if !status.success() || lines.len() != n {
                                tally.lock().unwrap().failures.push(format!(
                                    "{name} batch {batch}: child exited with {status} after {} of \
                                     {n} images; stderr:\n{}",
                                    lines.len(),
                                    tail(&stderr)
                                ));
                                (lines, false)
                            } else {
                                (lines, false)
                            }
                        }
                        Child::TimedOut(lines) => {
                            tally.lock().unwrap().signals += 1;
                            eprintln!(
                                "fuzz: {name} batch {batch} hung after {} images; killed",
                                lines.len()
                            );
                            (lines, true)
                        }
                    };
                    let mut outcomes: Vec<(Outcome, String)> = (0..n)
                        .map(|j| match lines.get(j) {
                            Some(line) => (outcome(line), line.clone()),
                            None => (Outcome::Unknown, String::new()),
                        })
                        .collect();
                    if crashed {
                        bisect(dir, name, batch, first, &buffers, &mut outcomes, &tally);
                    }
                    let mut t = tally.lock().unwrap();
                    for (j, (o, line)) in outcomes.iter().enumerate() {
                        *t.counts.entry((kinds[j], *o)).or_default() += 1;
                        if *o == Outcome::Driver {
                            *t.driver_codes.entry(line.clone()).or_default() += 1;
                        }
                    }
                    drop(t);
                    let _ = fs::remove_file(&path);
                }
            });
        }
    });
    tally.into_inner().unwrap()
}

/// Re-runs each image of a crashed batch in its own child, records which ones crash and
/// saves them next to the batches.
fn bisect(
    dir: &Path,
    name: &str,
    batch: usize,
    first: usize,
    images: &[Vec<u8>],
    outcomes: &mut [(Outcome, String)],
    tally: &Mutex<Tally>,
) {
    for (j, image) in images.iter().enumerate() {
        if tally.lock().unwrap().crashers.len() >= MAX_CRASHERS {
            return;
        }
        let path = dir.join(format!("{name}-{batch}-{j}.single"));
        write_batch(&path, &[image.as_slice()]);
        let crashed = match run_child(&path, SINGLE_TIMEOUT) {
            Child::Done(status, lines, _) if status.signal().is_none() => {
                if let Some(line) = lines.first() {
                    outcomes[j] = (outcome(line), line.clone());
                }
                None
            }
            Child::Done(status, ..) => Some(format!("signal {}", status.signal().unwrap_or(0))),
            Child::TimedOut(_) => Some("hang".to_string()),
        };
        let _ = fs::remove_file(&path);
        if let Some(how) = crashed {
            outcomes[j] = (Outcome::Crashed, how.clone());
            let saved = dir.join(format!("crash-{name}-{}.bin", first + j));
            fs::write(&saved, image).unwrap();
            tally.lock().unwrap().crashers.push(format!(
                "{} ({how}, mutation {})",
                saved.display(),
                first + j
            ));
        }
    }
}

fn mutated_images_never_kill_the_process() {
    let standin = std::env::var_os(STANDIN_VAR).is_some();
    // never under compute-sanitizer, whatever its options (a `fault` line of
    // tests/DRIVER_ERRORS): thousands of child processes, each loading malformed images
    if !standin && std::env::var_os("NV_SANITIZER_INJECTION_PORT_BASE").is_some() {
        eprintln!("skipped under compute-sanitizer: the binary fuzz run loads malformed images");
        return;
    }
    let count: usize = std::env::var("CUDA_BRAND_FUZZ_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let seed: u64 = std::env::var("CUDA_BRAND_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x00c0_ffee_cafe_f00d);
    let dir = std::env::temp_dir().join(format!("cuda-brand-fuzz-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    println!(
        "fuzz: seed {seed}, {count} images per kind, {PER_CHILD} per child, {CHILDREN} children \
         at a time, in {}",
        dir.display()
    );

    let mut problems = Vec::new();
    let mut reached = 0;
    for (k, (name, image)) in [("cubin", CUBIN), ("fatbin", FATBIN)]
        .into_iter()
        .enumerate()
    {
        let start = Instant::now();
        let t = fuzz(&dir, name, image, seed.wrapping_add(k as u64), count);
        let total = |o: Outcome| -> usize {
            t.counts
                .iter()
                .filter(|((_, x), _)| *x == o)
                .map(|(_, n)| n)
                .sum()
        };
        let (rejected, driver, loaded) = (
            total(Outcome::Rejected),
            total(Outcome::Driver),
            total(Outcome::Loaded),
        );
        reached += driver + loaded;
        println!(
            "fuzz: {name} {count} images: {rejected} rejected by the check, {driver} refused by the \
             driver, {loaded} loaded, {} signals ({:.1} s)",
            t.signals,
            start.elapsed().as_secs_f64()
        );
        for (kind, label) in KINDS.iter().enumerate() {
            let of = |o: Outcome| t.counts.get(&(kind, o)).copied().unwrap_or(0);
            println!(
                "fuzz:   {label:15} {:5} rejected, {:5} driver, {:5} loaded, {} crashed, {} unknown",
                of(Outcome::Rejected),
                of(Outcome::Driver),
                of(Outcome::Loaded),
                of(Outcome::Crashed),
                of(Outcome::Unknown),
            );
        }
        let codes: Vec<String> = t
            .driver_codes
            .iter()
            .map(|(c, n)| format!("{} x{n}", c.trim_start_matches("driver ")))
            .collect();
        println!("fuzz:   driver codes: {}", codes.join(", "));
        if t.signals > 0 {
            problems.push(format!(
                "{name}: {} children killed by a signal or hung; crashing images:\n  {}",
                t.signals,
                t.crashers.join("\n  ")
            ));
        }
        problems.extend(t.failures);
    }
    let _ = std::io::stdout().flush();
    assert!(
        problems.is_empty(),
        "the fuzz run failed (images kept in {}):\n{}",
        dir.display(),
        problems.join("\n")
    );
    assert!(
        reached > 0,
        "no mutated image reached the driver: the fuzz run tested only the check"
    );
    let _ = fs::remove_dir_all(&dir);
}
