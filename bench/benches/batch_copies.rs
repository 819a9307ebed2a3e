//! Does the driver's own batched copy make the crate's staging unnecessary? Synchronous
//! copies between the device and pageable host memory (plain `Vec`s of `f32`), 512 KiB to
//! 256 MiB, four ways in one process, interleaved:
//!
//! * **staging**: cuda-brand's `copy_from_host` / `copy_to_host` with its default features
//!   (large copies staged through page-locked memory the context keeps,
//!   `src/memory/staging/`);
//! * **driver**: `cuMemcpyHtoD` / `cuMemcpyDtoH`, the driver's synchronous path for pageable
//!   memory (what the crate does without the `staging` feature), followed by
//!   `cuStreamSynchronize(NULL)` for uploads so that the copy is complete;
//! * **batch**: `cuMemcpyBatchAsync` (CUDA 12.8) of the whole copy as one operation, with
//!   the source access order `CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL` (the source may be
//!   reused when the call returns) on a non-blocking stream, then `cuStreamSynchronize`;
//! * **batch, 4 MiB pieces**: the same call with the copy split into 4 MiB copies of one
//!   batch.
//!
//! The decision rule (issue 47): if the driver's batched path comes within 10 % of the
//! staging at 64 MiB and up, for uploads and for downloads, it replaces the staging. The
//! report ends with that verdict, from these figures.
//!
//! The entry point is taken with `cuGetProcAddress` at CUDA version 12080, the ABI of
//! CUDA 12.8 (with its `failIdx` argument), which every later driver keeps under that
//! version. A driver without it prints why and exits 0.
//!
//! `cd bench && cargo bench --bench batch_copies [-- --out FILE.md]`, or the built binary
//! with `--bench --out FILE.md` on the machine with the GPU.

use std::ffi::{c_int, c_uint, c_void};
use std::time::{Duration, Instant};

use cuda_brand::{ContextGuard, Device, DeviceBuffer, Error, with_primary_context};
use cuda_driver_sys as sys;

const SIZES: [usize; 7] = [
    512 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
    128 << 20,
    256 << 20,
];
const ROUNDS: usize = 11;
const PIECE: usize = 4 << 20;
const WAYS: [&str; 4] = ["staging", "driver", "batch", "batch, 4 MiB pieces"];

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy)]
struct MemLocation {
    kind: c_int,
    id: c_int,
}

/// `CUmemcpyAttributes` (CUDA 12.8).
#[repr(C)]
#[derive(Clone, Copy)]
struct MemcpyAttributes {
    src_access_order: c_int,
    src_loc_hint: MemLocation,
    dst_loc_hint: MemLocation,
    flags: c_uint,
}

const CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL: c_int = 2;
const CU_MEM_LOCATION_TYPE_DEVICE: c_int = 1;
const CU_MEM_LOCATION_TYPE_HOST: c_int = 2;

/// `cuMemcpyBatchAsync` at CUDA 12.8's ABI.
type BatchFn = unsafe extern "C" fn(
    dsts: *mut sys::CUdeviceptr,
    srcs: *mut sys::CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    attrs: *mut MemcpyAttributes,
    attrs_idxs: *mut usize,
    num_attrs: usize,
    fail_idx: *mut usize,
    stream: sys::CUstream,
) -> sys::CUresult;

unsafe extern "C" {
    #[link_name = "cuGetProcAddress"]
    fn cu_get_proc_address(
        symbol: *const std::ffi::c_char,
        pfn: *mut *mut c_void,
        cuda_version: c_int,
        flags: u64,
    ) -> sys::CUresult;
}

#[track_caller]
fn ok(r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

fn iters(bytes: usize) -> usize {
    ((64 << 20) / bytes).clamp(2, 100)
}

fn timed(n: usize, mut op: impl FnMut()) -> f64 {
    let mut total = Duration::ZERO;
    for _ in 0..n {
        let t = Instant::now();
        op();
        total += t.elapsed();
    }
    total.as_secs_f64() / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One batched copy of `bytes` from `src` to `dst`, split into copies of at most `piece`
/// bytes, complete when it returns.
///
/// # Safety
///
/// `dst` and `src` are valid for `bytes` bytes (one of them device memory of the current
/// context, the other host memory), and `stream` is a stream of the current context.
unsafe fn batch(
    f: BatchFn,
    stream: sys::CUstream,
    dst: u64,
    src: u64,
    bytes: usize,
    piece: usize,
    upload: bool,
) {
    let n = bytes.div_ceil(piece);
    let mut dsts: Vec<u64> = (0..n).map(|i| dst + (i * piece) as u64).collect();
    let mut srcs: Vec<u64> = (0..n).map(|i| src + (i * piece) as u64).collect();
    let mut sizes: Vec<usize> = (0..n).map(|i| piece.min(bytes - i * piece)).collect();
    let (host, device) = (
        MemLocation {
            kind: CU_MEM_LOCATION_TYPE_HOST,
            id: 0,
        },
        MemLocation {
            kind: CU_MEM_LOCATION_TYPE_DEVICE,
            id: 0,
        },
    );
    let mut attrs = MemcpyAttributes {
        src_access_order: CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL,
        src_loc_hint: if upload { host } else { device },
        dst_loc_hint: if upload { device } else { host },
        flags: 0,
    };
    let mut idx = 0usize;
    let mut failed = usize::MAX;
    // SAFETY: the arrays hold `n` entries each, one attribute applies from copy 0; the
    // caller promises the memory and the stream.
    unsafe {
        ok(f(
            dsts.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            n,
            &mut attrs,
            &mut idx,
            1,
            &mut failed,
            stream,
        ));
        ok(sys::cuStreamSynchronize(stream));
    }
}

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("batch_copies: no benchmark without a GPU: {e}");
            return;
        }
    };
    if let Err(e) = with_primary_context(&device, |ctx| run(ctx, &device, out.as_deref())) {
        eprintln!("batch_copies: {e}");
        std::process::exit(1);
    }
}

fn run(ctx: ContextGuard<'_>, device: &Device, out: Option<&str>) -> Result<(), Error> {
    // SAFETY: the raw column uses the context while it lives and destroys nothing of it.
    let raw_ctx = unsafe { ctx.as_raw() }.cast();
    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });
    let mut pfn: *mut c_void = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name and a place for the pointer.
    let found = unsafe { cu_get_proc_address(c"cuMemcpyBatchAsync".as_ptr(), &mut pfn, 12080, 0) };
    if found != sys::CUresult::CUDA_SUCCESS || pfn.is_null() {
        println!("batch_copies: this driver has no cuMemcpyBatchAsync ({found:?})");
        return Ok(());
    }
    // SAFETY: the driver's entry point of that name at CUDA 12.8's ABI, which `BatchFn` is.
    let f: BatchFn = unsafe { std::mem::transmute::<*mut c_void, BatchFn>(pfn) };
    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: creates a non-blocking stream (flag 1) in the current context.
    ok(unsafe { sys::cuStreamCreate(&mut stream, 1) });

    // rows: (direction, bytes, medians per way)
    let mut rows: Vec<(&str, usize, [f64; 4])> = Vec::new();
    for bytes in SIZES {
        let n = bytes / 4;
        let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut back = vec![0f32; n];
        let mut ours = DeviceBuffer::from_slice(ctx, &host)?;
        let mut raw: sys::CUdeviceptr = 0;
        ok(unsafe { sys::cuMemAlloc_v2(&mut raw, bytes) });
        let it = iters(bytes);
        for upload in [true, false] {
            let mut samples: [Vec<f64>; 4] = Default::default();
            for round in 0..=ROUNDS {
                for k in 0..4 {
                    let way = (k + round) % 4;
                    let (hp, hq) = (host.as_ptr() as u64, back.as_mut_ptr() as u64);
                    let t = match (way, upload) {
                        (0, true) => timed(it, || ours.copy_from_host(&host).unwrap()),
                        (0, false) => timed(it, || ours.copy_to_host(&mut back).unwrap()),
                        (1, true) => timed(it, || unsafe {
                            ok(sys::cuMemcpyHtoD_v2(raw, host.as_ptr().cast(), bytes));
                            ok(sys::cuStreamSynchronize(std::ptr::null_mut()));
                        }),
                        (1, false) => timed(it, || unsafe {
                            ok(sys::cuMemcpyDtoH_v2(hq as *mut c_void, raw, bytes));
                        }),
                        // SAFETY (of the four batches): `raw` and the host vectors hold
                        // `bytes` bytes, `stream` is of the current context.
                        (w, true) => {
                            let piece = if w == 2 { bytes } else { PIECE };
                            timed(it, || unsafe {
                                batch(f, stream, raw, hp, bytes, piece, true)
                            })
                        }
                        (w, false) => {
                            let piece = if w == 2 { bytes } else { PIECE };
                            timed(it, || unsafe {
                                batch(f, stream, hq, raw, bytes, piece, false)
                            })
                        }
                    };
                    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });
                    if round > 0 {
                        samples[way].push(t);
                    }
                }
            }
            let dir = if upload { "upload" } else { "download" };
            rows.push((dir, bytes, samples.map(median)));
        }
        // the batched download really wrote the values
        back.fill(-1.0);
        // SAFETY: as above.
        unsafe {
            batch(
                f,
                stream,
                back.as_mut_ptr() as u64,
                raw,
                bytes,
                PIECE,
                false,
            )
        };
        assert!(
            back.iter().zip(&host).all(|(a, b)| a == b),
            "batched copies lost values"
        );
        ok(unsafe { sys::cuMemFree_v2(raw) });
        eprintln!("batch_copies: {} done", size_name(bytes));
    }
    ok(unsafe { sys::cuStreamDestroy_v2(stream) });

    let report = report(device, &rows)?;
    print!("{report}");
    if let Some(path) = out {
        std::fs::write(path, &report).expect("writing the tables");
        eprintln!("tables written to {path}");
    }
    Ok(())
}

fn size_name(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b => format!("{} KiB", b >> 10),
    }
}

fn gbps(seconds: f64, bytes: usize) -> String {
    format!("{:.2}", bytes as f64 / seconds / 1e9)
}

fn report(device: &Device, rows: &[(&str, usize, [f64; 4])]) -> Result<String, Error> {
    let mut s = format!(
        "{} (driver CUDA {}); GB/s (10^9 bytes per second), medians of {ROUNDS} rounds, the \
         four ways interleaved; batch / staging is a ratio of times (above 1: the batch is \
         slower)\n\n| direction | size | {} | {} | {} | {} | batch / staging | pieces / staging |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
        device.name()?,
        cuda_brand::driver_version()?,
        WAYS[0],
        WAYS[1],
        WAYS[2],
        WAYS[3],
    );
    let mut worst: [f64; 2] = [0.0; 2];
    for &(dir, bytes, t) in rows {
        let best_batch = t[2].min(t[3]);
        if bytes >= 64 << 20 {
            let w = &mut worst[usize::from(dir == "download")];
            *w = w.max(best_batch / t[0]);
        }
        s.push_str(&format!(
            "| {dir} | {} | {} | {} | {} | {} | {:.3} | {:.3} |\n",
            size_name(bytes),
            gbps(t[0], bytes),
            gbps(t[1], bytes),
            gbps(t[2], bytes),
            gbps(t[3], bytes),
            t[2] / t[0],
            t[3] / t[0],
        ));
    }
    let within = worst.iter().all(|&w| w <= 1.10);
    s.push_str(&format!(
        "\nAt 64 MiB and up, the better batched form takes at most {:.3} × the staging's time \
         for uploads and {:.3} × for downloads: {}.\n",
        worst[0],
        worst[1],
        if within {
            "within 10 % both ways, so the driver's path replaces the staging"
        } else {
            "not within 10 % both ways, so the staging stays"
        }
    ));
    Ok(s)
}
