//! Synchronous copies between the device and pageable host memory (plain `Vec`s), from
//! 4 B to 256 MiB of `f32`, three ways in one process: **cuda-brand** (large copies staged
//! through the page-locked buffers the context keeps, `src/memory/staging/`), the same driver
//! calls made directly through `cuda-driver-sys` (**raw**), and **cudarc 0.19.10** (on the
//! same primary context; each copy followed by a stream synchronize, so it is complete).
//!
//! * `to_vec`: into a new `Vec` (raw: `Vec::with_capacity` + `cuMemcpyDtoH`; cudarc:
//!   `clone_dtoh`). The new `Vec` is dropped after the timing.
//! * `copy_to_host`: into a `Vec` reused across copies (raw: `cuMemcpyDtoH`; cudarc:
//!   `memcpy_dtoh`).
//! * `copy_from_host`: from a `Vec` into an existing buffer (raw: `cuMemcpyHtoD` then
//!   `cuStreamSynchronize(NULL)`, so that it is complete like the crate's; cudarc:
//!   `memcpy_htod`).
//! * `from_slice`: allocate and copy (raw: `cuMemAllocFromPoolAsync` from the crate's pool
//!   on the legacy stream, `cuMemcpyHtoD`, `cuStreamSynchronize(NULL)`; cudarc:
//!   `clone_htod`). The buffer is freed after the timing.
//!
//! Then the threshold sweep: for each kind of copy and size, cuda-brand with staging
//! forced on (threshold 0) and off (threshold `usize::MAX`, the driver's path: the code of
//! the build before staging, plus one relaxed atomic load and compare), and the smallest
//! measured size from which staging wins at every larger size: what to set
//! `CopyKind::default_threshold` (`src/memory/staging/`) to.
//!
//! Every variant runs interleaved with the others, `ROUNDS` rounds after a warm-up round,
//! the order rotating each round; a sample is the mean time per copy over `iters(bytes)`
//! copies (each timed alone); the tables give medians of the samples. GB/s are 10^9 bytes
//! per second.
//!
//! `cd bench && cargo bench --bench bulk_copies [-- --out FILE.md]`; or build the binary
//! where cargo is (`cargo bench --no-run`) and run it with `--bench --out FILE.md` on the
//! machine with the GPU. Without a GPU it prints the driver's error and exits 0.
//!
//! To measure the build before staging with the same program (the small-copy ratios it
//! must stay within 1.02 of): put this file and its `[[bench]]` entry on that build and
//! run `cargo bench --bench bulk_copies --no-default-features`, which leaves out the
//! threshold sweep (the only part that needs `cuda_brand::__staging`).

use std::cell::RefCell;
use std::ffi::c_void;
use std::time::{Duration, Instant};

use cuda_brand::{ContextGuard, Device, DeviceBuffer, Error, with_primary_context};
use cuda_driver_sys as sys;
use cudarc::driver as rc;

const SIZES: [usize; 11] = [
    4,
    64,
    4 << 10,
    64 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
    256 << 20,
];
const ROUNDS: usize = 11;

/// Copies per sample: enough that a sample of a small copy lasts milliseconds.
fn iters(bytes: usize) -> usize {
    ((16 << 20) / bytes).clamp(1, 1000)
}

#[track_caller]
fn ok(r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

fn cudarc_ok<T>(r: Result<T, rc::DriverError>) -> T {
    r.unwrap_or_else(|e| panic!("cudarc: {e:?}"))
}

/// Seconds per copy over `n` copies, each timed alone; what `op` returns (a new `Vec`, a
/// new buffer) is dropped after its timing.
fn timed<R>(n: usize, mut op: impl FnMut() -> R) -> f64 {
    let mut total = Duration::ZERO;
    for _ in 0..n {
        let t = Instant::now();
        let made = op();
        total += t.elapsed();
        drop(made);
    }
    total.as_secs_f64() / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The thresholds, through the crate's hidden knobs (left out with
/// `--no-default-features`, for a build without staging).
#[cfg(feature = "staging")]
mod knobs {
    pub use cuda_brand::__staging::CopyKind;
    use cuda_brand::__staging::set_threshold;

    pub fn defaults() {
        for kind in CopyKind::ALL {
            set_threshold(kind, kind.default_threshold());
        }
    }
    pub fn force(kind: CopyKind, staged: bool) {
        set_threshold(kind, if staged { 0 } else { usize::MAX });
    }
}

#[cfg(not(feature = "staging"))]
mod knobs {
    #[derive(Clone, Copy)]
    #[allow(clippy::enum_variant_names)] // the names of cuda_brand::__staging::CopyKind
    pub enum CopyKind {
        ToNewHost,
        ToHost,
        FromHost,
    }
    pub fn defaults() {}
}

use knobs::CopyKind;

type Variant<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// One operation at one size, measured every way there is.
struct Row<'a> {
    op: &'static str,
    kind: CopyKind,
    ours: Variant<'a>,
    raw: Variant<'a>,
    cudarc: Variant<'a>,
    /// cuda-brand with staging forced on and off (the sweep), where the operation has a
    /// threshold of its own.
    forced: Option<[Variant<'a>; 2]>,
}

/// Medians, in seconds per copy: cuda-brand, raw, cudarc, staged, plain.
#[cfg_attr(not(feature = "staging"), allow(dead_code))] // `kind`: only the sweep reads it
struct Result5 {
    op: &'static str,
    kind: CopyKind,
    bytes: usize,
    t: [f64; 5],
}

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("bulk_copies: no benchmark without a GPU: {e}");
            return;
        }
    };
    let result = with_primary_context(&device, |ctx| run(ctx, &device, out.as_deref()));
    if let Err(e) = result {
        eprintln!("bulk_copies: {e}");
        std::process::exit(1);
    }
}

fn run(ctx: ContextGuard<'_>, device: &Device, out: Option<&str>) -> Result<(), Error> {
    let rctx = cudarc_ok(rc::CudaContext::new(0));
    let rs = cudarc_ok(rctx.new_stream());
    // SAFETY (of both handles): the raw column uses them while the context lives, destroys
    // neither, and allocates from the pool only memory it frees itself.
    let raw_ctx = unsafe { ctx.as_raw() }.cast();
    // SAFETY: as above (the crate's pool of the device lives as long as the process).
    let raw_pool = unsafe { cuda_brand::MemoryPool::of_device(ctx)?.as_raw() }.cast::<c_void>();
    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });

    let mut results: Vec<Result5> = Vec::new();
    for bytes in SIZES {
        let n = bytes / 4;
        let iters = iters(bytes);
        let host: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let host = &host;
        let ours = RefCell::new(DeviceBuffer::from_slice(ctx, host)?);
        let mut raw_dev: sys::CUdeviceptr = 0;
        ok(unsafe { sys::cuMemAlloc_v2(&mut raw_dev, bytes) });
        ok(unsafe { sys::cuMemcpyHtoD_v2(raw_dev, host.as_ptr().cast(), bytes) });
        let theirs = RefCell::new(cudarc_ok(rs.clone_htod(host)));
        cudarc_ok(rs.synchronize());
        ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });
        let reused = RefCell::new(vec![0f32; n]);
        let (ours, theirs, reused, rs) = (&ours, &theirs, &reused, &rs);

        let to_vec = move || timed(iters, || ours.borrow().to_vec().unwrap());
        let copy_to_host = move || {
            let (buf, mut v) = (ours.borrow(), reused.borrow_mut());
            timed(iters, || buf.copy_to_host(&mut v).unwrap())
        };
        let copy_from_host = move || {
            let mut buf = ours.borrow_mut();
            timed(iters, || buf.copy_from_host(host).unwrap())
        };

        let mut rows: Vec<Row<'_>> = vec![
            Row {
                op: "to_vec (new Vec)",
                kind: CopyKind::ToNewHost,
                ours: Box::new(move || {
                    knobs::defaults();
                    to_vec()
                }),
                raw: Box::new(move || {
                    timed(iters, || {
                        let mut v: Vec<f32> = Vec::with_capacity(n);
                        ok(unsafe { sys::cuMemcpyDtoH_v2(v.as_mut_ptr().cast(), raw_dev, bytes) });
                        // SAFETY: the copy wrote all `n` elements.
                        unsafe { v.set_len(n) };
                        v
                    })
                }),
                cudarc: Box::new(move || {
                    let buf = theirs.borrow();
                    timed(iters, || {
                        let v = cudarc_ok(rs.clone_dtoh(&*buf));
                        cudarc_ok(rs.synchronize());
                        v
                    })
                }),
                forced: forced_pair(CopyKind::ToNewHost, to_vec),
            },
            Row {
                op: "copy_to_host (reused Vec)",
                kind: CopyKind::ToHost,
                ours: Box::new(move || {
                    knobs::defaults();
                    copy_to_host()
                }),
                raw: Box::new(move || {
                    let mut v = reused.borrow_mut();
                    timed(iters, || {
                        ok(unsafe { sys::cuMemcpyDtoH_v2(v.as_mut_ptr().cast(), raw_dev, bytes) })
                    })
                }),
                cudarc: Box::new(move || {
                    let (buf, mut v) = (theirs.borrow(), reused.borrow_mut());
                    timed(iters, || {
                        cudarc_ok(rs.memcpy_dtoh(&*buf, &mut *v));
                        cudarc_ok(rs.synchronize());
                    })
                }),
                forced: forced_pair(CopyKind::ToHost, copy_to_host),
            },
            Row {
                op: "copy_from_host",
                kind: CopyKind::FromHost,
                ours: Box::new(move || {
                    knobs::defaults();
                    copy_from_host()
                }),
                raw: Box::new(move || {
                    timed(iters, || unsafe {
                        ok(sys::cuMemcpyHtoD_v2(raw_dev, host.as_ptr().cast(), bytes));
                        ok(sys::cuStreamSynchronize(std::ptr::null_mut()));
                    })
                }),
                cudarc: Box::new(move || {
                    let mut buf = theirs.borrow_mut();
                    timed(iters, || {
                        cudarc_ok(rs.memcpy_htod(host, &mut *buf));
                        cudarc_ok(rs.synchronize());
                    })
                }),
                forced: forced_pair(CopyKind::FromHost, copy_from_host),
            },
            Row {
                op: "from_slice (allocate + copy)",
                kind: CopyKind::FromHost,
                ours: Box::new(move || {
                    knobs::defaults();
                    timed(iters, || DeviceBuffer::from_slice(ctx, host).unwrap())
                }),
                raw: Box::new(move || {
                    let mut made = Vec::with_capacity(iters);
                    let t = timed(iters, || unsafe {
                        let mut p = 0;
                        ok(cu_mem_alloc_from_pool_async(
                            &mut p,
                            bytes,
                            raw_pool,
                            std::ptr::null_mut(),
                        ));
                        ok(sys::cuMemcpyHtoD_v2(p, host.as_ptr().cast(), bytes));
                        ok(sys::cuStreamSynchronize(std::ptr::null_mut()));
                        made.push(p);
                    });
                    for p in made {
                        ok(unsafe { cu_mem_free_async(p, std::ptr::null_mut()) });
                    }
                    t
                }),
                cudarc: Box::new(move || {
                    timed(iters, || {
                        let buf = cudarc_ok(rs.clone_htod(host));
                        cudarc_ok(rs.synchronize());
                        buf
                    })
                }),
                forced: None,
            },
        ];

        // ---- rounds ------------------------------------------------------------------
        let mut samples: Vec<[Vec<f64>; 5]> = rows.iter().map(|_| Default::default()).collect();
        for round in 0..=ROUNDS {
            for (row, s) in rows.iter_mut().zip(samples.iter_mut()) {
                for k in 0..5 {
                    let which = (k + round) % 5;
                    let t = match which {
                        0 => (row.ours)(),
                        1 => (row.raw)(),
                        2 => (row.cudarc)(),
                        w => match row.forced.as_mut() {
                            Some(pair) => (pair[w - 3])(),
                            None => continue,
                        },
                    };
                    // the current context must be ours again whatever cudarc did
                    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });
                    if round > 0 {
                        s[which].push(t); // round 0 is the warm-up
                    }
                }
            }
        }
        knobs::defaults();
        for (row, s) in rows.iter().zip(samples) {
            results.push(Result5 {
                op: row.op,
                kind: row.kind,
                bytes,
                t: s.map(|v| if v.is_empty() { f64::NAN } else { median(v) }),
            });
        }
        drop(rows);
        ok(unsafe { sys::cuMemFree_v2(raw_dev) });
        eprintln!("bulk_copies: {} done", size_name(bytes));
    }

    let report = report(device, &results)?;
    print!("{report}");
    if let Some(path) = out {
        std::fs::write(path, &report).expect("writing the tables");
        eprintln!("tables written to {path}");
    }
    Ok(())
}

/// cuda-brand's `op` with staging forced on and off, for the sweep.
#[cfg(feature = "staging")]
fn forced_pair<'a>(kind: CopyKind, op: impl Fn() -> f64 + Copy + 'a) -> Option<[Variant<'a>; 2]> {
    Some([
        Box::new(move || {
            knobs::force(kind, true);
            op()
        }),
        Box::new(move || {
            knobs::force(kind, false);
            op()
        }),
    ])
}

#[cfg(not(feature = "staging"))]
fn forced_pair<'a>(_kind: CopyKind, _op: impl Fn() -> f64 + Copy + 'a) -> Option<[Variant<'a>; 2]> {
    None
}

fn size_name(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn cell(seconds: f64, bytes: usize) -> String {
    if seconds.is_nan() {
        return "n/a".to_owned();
    }
    let us = seconds * 1e6;
    let gbps = bytes as f64 / seconds / 1e9;
    if us >= 1000.0 {
        format!("{:.2} ms, {gbps:.2} GB/s", us / 1000.0)
    } else {
        format!("{us:.1} µs, {gbps:.2} GB/s")
    }
}

fn ratio(a: f64, b: f64) -> String {
    if a.is_nan() || b.is_nan() {
        "n/a".to_owned()
    } else {
        format!("{:.3}", a / b)
    }
}

fn report(device: &Device, results: &[Result5]) -> Result<String, Error> {
    let mut s = format!(
        "{} (driver CUDA {}), {} cores; medians of {ROUNDS} rounds, the variants interleaved; \
         time ratios: above 1 means cuda-brand takes longer\n\n",
        device.name()?,
        cuda_brand::driver_version()?,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    s.push_str(&settings());
    s.push_str(
        "| size | operation | cuda-brand | raw | cudarc | cuda-brand / raw | cuda-brand / cudarc | speed-up over raw |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let [ours, raw, theirs, _, _] = r.t;
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2}× |\n",
            size_name(r.bytes),
            r.op,
            cell(ours, r.bytes),
            cell(raw, r.bytes),
            cell(theirs, r.bytes),
            ratio(ours, raw),
            ratio(ours, theirs),
            raw / ours
        ));
    }
    s.push_str(&sweep(results));
    Ok(s)
}

#[cfg(feature = "staging")]
fn settings() -> String {
    use cuda_brand::__staging as st;
    let thresholds: Vec<String> = CopyKind::ALL
        .iter()
        .map(|&k| format!("{k:?} {}", size_name(k.default_threshold())))
        .collect();
    let workers: Vec<String> = SIZES
        .iter()
        .filter(|&&b| b >= 64 << 10)
        .map(|&b| format!("{} {}", size_name(b), st::workers_for(b)))
        .collect();
    format!(
        "Staging: {} per staging ({} slots of {}), at most {} per context; built-in thresholds: {}; copying threads per staged copy: {}.\n\n",
        size_name(st::STAGING_BYTES),
        st::SLOTS,
        size_name(st::SLOT_BYTES),
        st::MAX_STAGINGS_PER_CONTEXT,
        thresholds.join(", "),
        workers.join(", "),
    )
}

#[cfg(not(feature = "staging"))]
fn settings() -> String {
    "Built without the `staging` feature: no staging knobs, no sweep.\n\n".to_owned()
}

#[cfg(feature = "staging")]
fn sweep(results: &[Result5]) -> String {
    let mut s = String::from(
        "\nThreshold sweep: cuda-brand with staging forced on (threshold 0) and off (threshold usize::MAX, the driver's path)\n\n| size | operation | staged | driver's path | staged / driver's path |\n|---|---|---:|---:|---:|\n",
    );
    let mut suggestions = Vec::new();
    for kind in CopyKind::ALL {
        let mut rows: Vec<&Result5> = results
            .iter()
            .filter(|r| r.kind == kind && !r.t[3].is_nan())
            .collect();
        rows.sort_by_key(|r| r.bytes);
        for r in &rows {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                size_name(r.bytes),
                r.op,
                cell(r.t[3], r.bytes),
                cell(r.t[4], r.bytes),
                ratio(r.t[3], r.t[4])
            ));
        }
        // the smallest size from which staging wins at every larger measured size
        let mut from = None;
        for r in rows.iter().rev() {
            if r.t[3] < r.t[4] {
                from = Some(r.bytes);
            } else {
                break;
            }
        }
        suggestions.push(format!(
            "{kind:?}: {} (built in: {})",
            from.map_or("never".to_owned(), size_name),
            size_name(kind.default_threshold())
        ));
    }
    s.push_str(&format!(
        "\nSmallest measured size from which staging wins at every larger size (a threshold to consider; sizes between two measured ones are not measured): {}\n",
        suggestions.join("; ")
    ));
    s
}

#[cfg(not(feature = "staging"))]
fn sweep(_results: &[Result5]) -> String {
    String::new()
}

// CUDA 11.2 entry points, newer than the bindings (linked like the rest of the raw column).
unsafe extern "C" {
    #[link_name = "cuMemAllocFromPoolAsync"]
    fn cu_mem_alloc_from_pool_async(
        p: *mut sys::CUdeviceptr,
        bytes: usize,
        pool: *mut c_void,
        stream: sys::CUstream,
    ) -> sys::CUresult;
    #[link_name = "cuMemFreeAsync"]
    fn cu_mem_free_async(p: sys::CUdeviceptr, stream: sys::CUstream) -> sys::CUresult;
}
