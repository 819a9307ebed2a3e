//! The GPU fuzz run behind the safe `Module::from_binary`: mutated copies of the committed
//! cubin and fatbin, each loaded in a child process, and not one may kill its process.
//!
//! The parent test writes batches of mutated images (100 per batch) to a temporary folder
//! and runs its test binary (`gpu`) again as a child (`CUDA_BRAND_FUZZ_CHILD=<batch file>`,
//! which `tests/gpu.rs` hands to `fuzz_child` before its harness starts), eight at a time. A child creates a context, loads every image of its batch
//! with `Module::from_binary` (and, for each image it loads, reads every kernel's parameters
//! as a declaration does: the count from the image's own table, then the driver's layout;
//! every function attribute and the occupancy calculations; the module's globals; and the
//! same image as a `Library`, each kernel looked up for the context) and prints one line
//! per image: `ok`, `rejected` (the crate's
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
//! A second test, `targeted_images_that_pass_the_check_never_kill_the_process`, runs coherent
//! edits of the cubin that random mutations rarely make together (a kernel's symbol moved
//! into another kernel's code, code naming another symbol, sizes past 2^32, register, stack
//! and parameter records at their extremes), each in a child of its own; each must pass the
//! image check, so that each reaches the driver.
//!
//! Knobs: `CUDA_BRAND_FUZZ_COUNT` (images per kind, default 10000), `CUDA_BRAND_FUZZ_SEED`
//! (default fixed), `CUDA_BRAND_FUZZ_TRACE=1` (children print each driver step on stderr; with
//! `CUDA_BRAND_FUZZ_CHILD=crash-NAME-N.bin` a child loads one saved crashing image), `CUDA_BRAND_FUZZ_STANDIN=1` (no GPU: children answer `driver StandIn`,
//! except that one image in 997 aborts its child, to exercise this harness itself).
//!
//! Ignored, with the reason, without a device (fails with `CUDA_BRAND_REQUIRE_GPU=1`) and
//! under compute-sanitizer (the driver errors it provokes are the point). Alone:
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

use cuda_brand::{ContextFlags, Device, Error, Library, Module, with_context};

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
    vec![
        Test {
            name: "mutated_images_never_kill_the_process",
            needs,
            body: mutated_images_never_kill_the_process,
        },
        Test {
            name: "targeted_images_that_pass_the_check_never_kill_the_process",
            needs,
            body: targeted_images_that_pass_the_check_never_kill_the_process,
        },
    ]
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
                                exercise(f, name, trace);
                            }
                        }
                        // the module's globals (`cuModuleGetGlobal`), read back when small
                        for name in ["counter", "table"] {
                            if trace {
                                eprintln!("trace: Module::global({name})");
                            }
                            if let Ok(g) = module.global::<u8>(name) {
                                if g.len() <= 1 << 20 {
                                    let _ = g.to_vec();
                                }
                            }
                        }
                        drop(module);
                        // the same image as a library: `cuLibraryLoadData`, then each
                        // kernel for this context (`cuLibraryGetKernel`,
                        // `cuKernelGetFunction`), other driver paths than a module's
                        if trace {
                            eprintln!("trace: Library::from_binary");
                        }
                        if let Ok(library) = Library::from_binary(image) {
                            for name in KERNELS {
                                if trace {
                                    eprintln!("trace: Library::function({name})");
                                }
                                if let Ok(f) = library.function(ctx, name) {
                                    exercise(f, name, trace);
                                }
                            }
                        }
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

/// What safe code may ask of a kernel of a mutated image: its parameters (as a declaration
/// reads them), every attribute, and the occupancy calculations (which read the image's
/// register, stack and shared-memory records). Whatever they answer, nothing may crash.
fn exercise(f: cuda_brand::Function<'_, '_>, name: &str, trace: bool) {
    use cuda_brand::FunctionAttribute as A;
    if trace {
        eprintln!("trace: Function::params ({name})");
    }
    let params = f.params();
    if trace {
        eprintln!("trace: {params:?}");
    }
    for attribute in [
        A::MaxThreadsPerBlock,
        A::SharedSizeBytes,
        A::ConstSizeBytes,
        A::LocalSizeBytes,
        A::NumRegs,
        A::PtxVersion,
        A::BinaryVersion,
        A::CacheModeCa,
        A::MaxDynamicSharedSizeBytes,
        A::PreferredSharedMemoryCarveout,
        A::ClusterSizeMustBeSet,
        A::RequiredClusterWidth,
        A::RequiredClusterHeight,
        A::RequiredClusterDepth,
        A::NonPortableClusterSizeAllowed,
    ] {
        if trace {
            eprintln!("trace: Function::attribute({attribute:?}) ({name})");
        }
        let _ = f.attribute(attribute);
    }
    if trace {
        eprintln!("trace: occupancy ({name})");
    }
    let _ = f.suggested_block_size(0);
    let _ = f.max_active_blocks_per_multiprocessor(128, 0);
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
    if !standin && common::under_sanitizer() {
        common::skip("under compute-sanitizer: the binary fuzz run loads malformed images");
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

// ---------------------------------------------------------------------------------------
// Targeted mutations: coherent edits of the cubin that random ones rarely make together,
// each passing the crate's check, so each reaches the driver.

/// The cubin's section `name`: the byte of its header.
fn section_header(b: &[u8], name: &str) -> (usize, usize) {
    let (shoff, shnum, shstrndx) = (
        get(b, 40, 8) as usize,
        get(b, 60, 2) as usize,
        get(b, 62, 2) as usize,
    );
    let names = get(b, shoff + shstrndx * 64 + 24, 8) as usize;
    (0..shnum)
        .map(|i| (i, shoff + i * 64))
        .find(|&(_, at)| {
            let n = names + get(b, at, 4) as usize;
            b[n..].split(|&c| c == 0).next() == Some(name.as_bytes())
        })
        .unwrap_or_else(|| panic!("the cubin has no section {name}"))
}

/// The cubin's symbol `name`: its index and the byte of its entry.
fn symbol_entry(b: &[u8], name: &str) -> (usize, usize) {
    let (_, symtab) = section_header(b, ".symtab");
    let (_, strtab) = section_header(b, ".strtab");
    let (syms, size) = (
        get(b, symtab + 24, 8) as usize,
        get(b, symtab + 32, 8) as usize,
    );
    let strings = get(b, strtab + 24, 8) as usize;
    (0..size / 24)
        .map(|n| (n, syms + n * 24))
        .find(|&(_, at)| {
            let n = strings + get(b, at, 4) as usize;
            b[n..].split(|&c| c == 0).next() == Some(name.as_bytes())
        })
        .unwrap_or_else(|| panic!("the cubin has no symbol {name}"))
}

/// The payload offsets of the `.nv.info`-style records of attribute `attr` in section
/// `name` (whose first payload word is `first`, where given).
fn records(b: &[u8], name: &str, attr: u8, first: Option<u32>) -> Vec<usize> {
    let (_, h) = section_header(b, name);
    let (off, size) = (get(b, h + 24, 8) as usize, get(b, h + 32, 8) as usize);
    let mut found = Vec::new();
    let mut p = off;
    while p < off + size {
        let (fmt, a, v) = (b[p], b[p + 1], get(b, p + 2, 2) as usize);
        if a == attr && first.is_none_or(|w| get(b, p + 4, 4) == u64::from(w)) {
            found.push(if fmt == 4 { p + 4 } else { p + 2 });
        }
        p += if fmt == 4 { 4 + v } else { 4 };
    }
    found
}

/// Edits of the committed cubin that keep it acceptable to the image check: symbols moved
/// between code sections or retyped, code naming other symbols, sizes the driver might
/// truncate, register, stack and parameter records at their extremes.
fn targeted(cubin: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut edit = |name: &str, f: &dyn Fn(&mut Vec<u8>)| {
        let mut m = cubin.to_vec();
        f(&mut m);
        out.push((name.to_owned(), m));
    };
    let sec = |name: &str| section_header(cubin, name);
    let sym = |name: &str| symbol_entry(cubin, name);
    let (text_scale, text_scale_at) = sec(".text.scale");
    let (text_vector_add, _) = sec(".text.vector_add");
    let (_, text_spin_at) = sec(".text.spin");
    let (bank_scale, _) = sec(".nv.constant0.scale");
    let (spin, spin_at) = sym("spin");
    let (scale, scale_at) = sym("scale");
    let (_, vector_add_at) = sym("vector_add");
    let (counter, counter_at) = sym("counter");
    let (_, table_at) = sym("table");
    let (bank_symbol, _) = sym(".nv.constant0.scale");
    let shndx = |m: &mut Vec<u8>, at: usize, i: usize| put(m, at + 6, 2, i as u64);
    let info = |m: &mut Vec<u8>, at: usize, symbol: usize| {
        let old = get(m, at + 44, 4);
        put(m, at + 44, 4, (old & 0xff00_0000) | symbol as u64);
    };
    edit("spin's symbol in scale's code", &|m| {
        shndx(m, spin_at, text_scale)
    });
    edit("scale's code names the null symbol", &|m| {
        info(m, text_scale_at, 0)
    });
    edit("scale's code names a data symbol", &|m| {
        info(m, text_scale_at, counter)
    });
    edit("scale's code names its bank's section symbol", &|m| {
        info(m, text_scale_at, bank_symbol)
    });
    edit("scale's code names spin", &|m| info(m, text_scale_at, spin));
    edit("spin's code names scale", &|m| info(m, text_spin_at, scale));
    edit("scale's entry at the end of its code", &|m| {
        put(m, scale_at + 8, 8, 768);
        put(m, scale_at + 16, 8, 0);
    });
    edit("scale's entry inside an instruction", &|m| {
        put(m, scale_at + 8, 8, 8);
        put(m, scale_at + 16, 8, 16);
    });
    for (label, value) in [
        ("no type", 0x10),
        ("section type", 0x13),
        ("local", 0x02),
        ("weak", 0x22),
    ] {
        edit(&format!("scale's symbol of {label}"), &|m| {
            m[scale_at + 4] = value
        });
    }
    edit("counter overlaps table", &|m| {
        put(m, counter_at + 16, 8, 68)
    });
    edit("counter in scale's parameter bank", &|m| {
        shndx(m, counter_at, bank_scale)
    });
    // a data object in a section the driver does not allocate on the device: what address
    // does `cuModuleGetGlobal` give it, and what does reading it (`to_vec`) touch?
    for section in [".strtab", ".symtab", ".debug_frame", ".nv.info.scale"] {
        let (index, _) = sec(section);
        edit(&format!("counter in {section}"), &|m| {
            shndx(m, counter_at, index)
        });
    }
    edit("table untyped in code", &|m| {
        shndx(m, table_at, text_vector_add);
        m[table_at + 4] = 0;
    });
    edit("scale and vector_add swap code", &|m| {
        shndx(m, scale_at, text_vector_add);
        shndx(m, vector_add_at, text_scale);
        put(m, vector_add_at + 16, 8, 768);
    });
    let (_, global_at) = sec(".nv.global");
    let (_, shared_at) = sec(".nv.shared.sum_u64");
    for (label, at, size) in [
        (".nv.global of 2^32 + 4 bytes", global_at, (1u64 << 32) + 4),
        (".nv.global of 2^40 bytes", global_at, 1 << 40),
        (
            ".nv.shared.sum_u64 of 2^32 + 16 bytes",
            shared_at,
            (1 << 32) + 16,
        ),
        (".nv.shared.sum_u64 of 2^31 bytes", shared_at, 1 << 31),
    ] {
        edit(label, &|m| put(m, at + 32, 8, size));
    }
    // per-function records of the global .nv.info for scale: REGCOUNT, FRAME_SIZE,
    // MIN_STACK_SIZE, MAX_STACK_SIZE
    for (label, attr) in [
        ("register count", 0x2f),
        ("frame size", 0x11),
        ("min stack", 0x12),
        ("max stack", 0x23),
    ] {
        for value in [0u64, 0x8000_0000, 0xffff_ffff] {
            if value == 0 && attr != 0x2f {
                continue; // already 0 in the committed cubin
            }
            edit(&format!("scale's {label} {value:#x}"), &|m| {
                for p in records(cubin, ".nv.info", attr, Some(scale as u32)) {
                    put(m, p + 4, 4, value);
                }
            });
        }
    }
    // scale's own records: CRS stack, CUDA API version, MAXREG_COUNT, exit offsets
    for (label, attr, width, value) in [
        ("CRS stack size u32::MAX", 0x1e, 4, 0xffff_ffff),
        ("CRS stack size i32::MAX", 0x1e, 4, 0x7fff_ffff),
        ("CUDA API version 0", 0x37, 4, 0),
        ("CUDA API version u32::MAX", 0x37, 4, 0xffff_ffff),
        ("max register count 0", 0x1b, 2, 0),
        ("max register count 0xffff", 0x1b, 2, 0xffff),
        ("exit at byte 0", 0x1c, 8, 0),
    ] {
        edit(&format!("scale's {label}"), &|m| {
            for p in records(cubin, ".nv.info.scale", attr, None) {
                put(m, p, width, value);
            }
        });
    }
    // scale's parameter records: the index word the check does not read, the flag bits
    // below the size, every offset 0, every size 0
    let kparams = records(cubin, ".nv.info.scale", 0x17, None);
    for value in [0xffff_ffffu64, 0x7fff_ffff, 0x1000] {
        edit(&format!("scale's parameter index {value:#x}"), &|m| {
            for &p in &kparams {
                put(m, p, 4, value);
            }
        });
    }
    for low in [0x3ffffu64, 0, 0xf03f] {
        edit(&format!("scale's parameter flags {low:#x}"), &|m| {
            for &p in &kparams {
                let w = get(m, p + 8, 4);
                put(m, p + 8, 4, (w & !0x3ffff) | low);
            }
        });
    }
    edit("scale's parameters all at offset 0", &|m| {
        for &p in &kparams {
            let w = get(m, p + 4, 4);
            put(m, p + 4, 4, w & 0xffff);
        }
    });
    edit("scale's parameters all of size 0", &|m| {
        for &p in &kparams {
            let w = get(m, p + 8, 4);
            put(m, p + 8, 4, w & 0x3ffff);
        }
    });
    out
}

/// Each targeted image in a child of its own: the image must pass the crate's check (so
/// that it reaches the driver) and load, be refused by the driver, or fail later, but never
/// kill or hang its process. Crashing images are saved like the fuzz run's.
fn targeted_images_that_pass_the_check_never_kill_the_process() {
    if std::env::var_os(STANDIN_VAR).is_some() {
        common::skip(format!(
            "{STANDIN_VAR} is set: its children load nothing, and the targeted images need the driver"
        ));
    }
    if common::under_sanitizer() {
        common::skip("under compute-sanitizer: the targeted images are malformed on purpose");
    }
    let dir = std::env::temp_dir().join(format!("cuda-brand-targeted-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let mut problems = Vec::new();
    for (n, (label, image)) in targeted(CUBIN).iter().enumerate() {
        let path = dir.join(format!("targeted-{n}.single"));
        write_batch(&path, &[image.as_slice()]);
        let verdict = match run_child(&path, SINGLE_TIMEOUT) {
            Child::Done(status, lines, stderr) if status.signal().is_none() => {
                match lines.first().map(String::as_str) {
                    Some("rejected") => {
                        problems.push(format!(
                            "{label}: refused by the check, so it tests nothing"
                        ));
                    }
                    None => problems.push(format!(
                        "{label}: the child printed no result ({status}); stderr:\n{}",
                        tail(&stderr)
                    )),
                    // loaded, but the context failed after (its teardown reported an error:
                    // a kernel lookup, attribute or global read left a sticky error, say a
                    // global whose address lies outside device memory)
                    Some(_) if !status.success() => problems.push(format!(
                        "{label}: the child failed after the load ({status}); stderr:\n{}",
                        tail(&stderr)
                    )),
                    _ => {}
                }
                lines.first().cloned().unwrap_or_default()
            }
            Child::Done(status, ..) => format!("signal {}", status.signal().unwrap_or(0)),
            Child::TimedOut(_) => "hang".to_string(),
        };
        println!("targeted: {label}: {verdict}");
        if verdict.starts_with("signal") || verdict == "hang" {
            let saved = dir.join(format!("crash-targeted-{n}.bin"));
            fs::write(&saved, image).unwrap();
            problems.push(format!("{label}: {verdict}; saved as {}", saved.display()));
        }
        let _ = fs::remove_file(&path);
    }
    assert!(
        problems.is_empty(),
        "targeted images (kept in {}):\n{}",
        dir.display(),
        problems.join("\n")
    );
    let _ = fs::remove_dir_all(&dir);
}
