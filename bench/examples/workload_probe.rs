//! Where does the one-scope workload round spend its time, on one thread? A diagnostic for
//! BENCHMARKS.md: the round of `benches/workload.rs` ("allocate two inputs and an output,
//! copy in, launch vector_add, copy out, verify, free"; n cycling through 1 Ki … 64 Ki
//! f32), written several ways, interleaved, medians of rounds per second:
//!
//! * `brand`: the README's one-scope style (`alloc_from_slice`, `alloc_zeroed`, the launch,
//!   `copy_to_vec` into a new `Vec`) on a created context (`with_context`);
//! * `brand, primary`: the same on the device's primary context;
//! * `brand, zeroed out`: the previous style: `alloc` and `copy_from_host`, `copy_to_host`
//!   into a new `vec![0.0; n]`;
//! * `raw`: the same driver calls made directly (`cuMemAllocAsync` from the device's
//!   default pool, two `cuMemcpyHtoDAsync`, `cuMemsetD8Async`, `cuLaunchKernel`,
//!   `cuMemcpyDtoHAsync` into a new zeroed `Vec`, three `cuMemFreeAsync`,
//!   `cuStreamSynchronize`) on the created context;
//! * `raw, primary`: those calls on the primary context;
//! * `cudarc`: the workload benchmark's cudarc round.
//!
//! `cargo run --release --example workload_probe -p cuda-brand-bench`.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use cuda_brand::prelude::*;
use cuda_brand::{ContextGuard, Kernel};
use cuda_driver_sys as sys;
use cudarc::driver as rc;

unsafe extern "C" {
    fn cuMemAllocAsync(p: *mut u64, bytes: usize, s: sys::CUstream) -> u32;
    fn cuMemFreeAsync(p: u64, s: sys::CUstream) -> u32;
}

const PTX: &str = include_str!("../../kernels/kernels.ptx");
const SIZES: [usize; 4] = [1 << 10, 1 << 12, 1 << 14, 1 << 16];
const SECONDS: f64 = 1.0;
const REPEATS: usize = 7;

fn verify(a: &[f32], b: &[f32], c: &[f32]) {
    assert_eq!(c.len(), a.len());
    for i in 0..c.len() {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
}

/// Rounds per second of `round(i)` over `SECONDS`.
fn rate(mut round: impl FnMut(usize)) -> f64 {
    for i in 0..20 {
        round(i);
    }
    let t = Instant::now();
    let mut i = 0;
    while t.elapsed() < Duration::from_secs_f64(SECONDS) {
        round(i);
        i += 1;
    }
    i as f64 / t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

type Hosts = Vec<(Vec<f32>, Vec<f32>)>;

fn brand_round<'ctx>(
    stream: &Stream<'ctx>,
    add: &Kernel<'_, 'ctx, (In<f32>, In<f32>, Out<f32>)>,
    (ha, hb): &(Vec<f32>, Vec<f32>),
    out: &mut Vec<f32>,
    fresh: bool,
) {
    let config = LaunchConfig::linear(ha.len().div_ceil(256) as u32, 256);
    if fresh {
        // the README's style
        *out = Vec::new();
        stream
            .scope(|s| {
                let (a, b) = (s.alloc_from_slice(ha)?, s.alloc_from_slice(hb)?);
                let c = s.alloc_zeroed::<f32>(ha.len())?;
                s.launch(add, config, (a, b, c))?;
                s.copy_to_vec(out, c)
            })
            .unwrap();
    } else {
        // the previous style: a zeroed output, written by copy_to_host
        *out = vec![0.0f32; ha.len()];
        stream
            .scope(|s| {
                // SAFETY: written by the copies below before the kernel reads them.
                let (a, b) = unsafe { (s.alloc::<f32>(ha.len())?, s.alloc::<f32>(hb.len())?) };
                s.copy_from_host(a, ha)?;
                s.copy_from_host(b, hb)?;
                let c = s.alloc_zeroed::<f32>(ha.len())?;
                s.launch(add, config, (a, b, c))?;
                s.copy_to_host(out, c)
            })
            .unwrap();
    }
    verify(ha, hb, out);
}

/// The raw round on `stream` with `f` = vector_add; the context is current.
fn raw_round(stream: sys::CUstream, f: sys::CUfunction, (ha, hb): &(Vec<f32>, Vec<f32>)) {
    let ok = |r: u32| assert_eq!(r, 0);
    let n = ha.len();
    let bytes = n * 4;
    let mut out = vec![0.0f32; n];
    let (mut a, mut b, mut c) = (0u64, 0u64, 0u64);
    // SAFETY: plain driver calls on a live stream of the current context; every pointer
    // and length matches; the stream is synchronized before the host memory is used or
    // dropped.
    unsafe {
        ok(cuMemAllocAsync(&mut a, bytes, stream));
        ok(cuMemAllocAsync(&mut b, bytes, stream));
        ok(sys::cuMemcpyHtoDAsync_v2(a, ha.as_ptr().cast(), bytes, stream) as u32);
        ok(sys::cuMemcpyHtoDAsync_v2(b, hb.as_ptr().cast(), bytes, stream) as u32);
        ok(cuMemAllocAsync(&mut c, bytes, stream));
        ok(sys::cuMemsetD8Async(c, 0, bytes, stream) as u32);
        let mut len = n as u64;
        let (mut pa, mut pb, mut pc) = (a, b, c);
        let mut params: [*mut c_void; 6] = [
            (&mut pa as *mut u64).cast(),
            (&mut len as *mut u64).cast(),
            (&mut pb as *mut u64).cast(),
            (&mut len as *mut u64).cast(),
            (&mut pc as *mut u64).cast(),
            (&mut len as *mut u64).cast(),
        ];
        ok(sys::cuLaunchKernel(
            f,
            n.div_ceil(256) as u32,
            1,
            1,
            256,
            1,
            1,
            0,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        ) as u32);
        ok(sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), c, bytes, stream) as u32);
        ok(sys::cuStreamSynchronize(stream) as u32);
        for p in [a, b, c] {
            ok(cuMemFreeAsync(p, stream));
        }
    }
    verify(ha, hb, &out);
}

fn cudarc_round(
    stream: &std::sync::Arc<rc::CudaStream>,
    add: &rc::CudaFunction,
    (ha, hb): &(Vec<f32>, Vec<f32>),
) {
    use rc::PushKernelArg;
    let n = ha.len();
    let a = stream.clone_htod(ha).unwrap();
    let b = stream.clone_htod(hb).unwrap();
    let mut c = stream.alloc_zeros::<f32>(n).unwrap();
    let cfg = rc::LaunchConfig {
        grid_dim: (n.div_ceil(256) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let len = n as u64;
    let mut l = stream.launch_builder(add);
    l.arg(&a).arg(&len).arg(&b).arg(&len).arg(&mut c).arg(&len);
    // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t).
    unsafe { l.launch(cfg) }.unwrap();
    let out = stream.clone_dtoh(&c).unwrap();
    stream.synchronize().unwrap();
    verify(ha, hb, &out);
}

const NAMES: [&str; 6] = [
    "brand",
    "brand, primary",
    "brand, zeroed out",
    "raw",
    "raw, primary",
    "cudarc",
];

fn main() -> Result<(), Error> {
    let device = Device::get(0)?;
    let hosts: Hosts = SIZES
        .iter()
        .map(|&n| {
            (
                (0..n).map(|i| i as f32).collect(),
                (0..n).map(|i| (2 * i) as f32 + 0.5).collect(),
            )
        })
        .collect();
    let rctx = rc::CudaContext::new(0).expect("cudarc context");
    let rstream = rctx.new_stream().unwrap();
    let rmodule = rctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX)).unwrap();
    let radd = rmodule.load_function("vector_add").unwrap();
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); NAMES.len()];
    for rep in 0..REPEATS {
        for k in 0..NAMES.len() {
            let which = (k + rep) % NAMES.len();
            let r = match which {
                0 | 2 | 3 => with_context(&device, ContextFlags::default(), |ctx| {
                    measure_ours(ctx, &hosts, which)
                })?,
                1 | 4 => with_primary_context(&device, |ctx| {
                    measure_ours(ctx, &hosts, if which == 1 { 0 } else { 3 })
                })?,
                _ => {
                    rctx.bind_to_thread().unwrap();
                    rate(|i| cudarc_round(&rstream, &radd, &hosts[i % hosts.len()]))
                }
            };
            results[which].push(r);
        }
    }
    let name = device.name()?;
    println!(
        "{name} (driver CUDA {}): rounds/s, median of {REPEATS} × {SECONDS} s, 1 thread",
        cuda_brand::driver_version()?
    );
    let cudarc = median(results[5].clone());
    for (name, r) in NAMES.iter().zip(results) {
        let m = median(r);
        println!("{name:>18}: {m:>8.0}  ({:.3} × cudarc)", m / cudarc);
    }
    Ok(())
}

/// `which`: 0 = brand, 2 = brand in the previous style, 3 = raw.
fn measure_ours(ctx: ContextGuard<'_>, hosts: &Hosts, which: usize) -> Result<f64, Error> {
    let stream = ctx.new_stream()?;
    let module = ctx.module_from_ptx(PTX)?;
    // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t) stays
    // below all three lengths.
    let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
    let mut out = Vec::new();
    Ok(match which {
        0 => rate(|i| brand_round(&stream, &add, &hosts[i % hosts.len()], &mut out, true)),
        2 => rate(|i| brand_round(&stream, &add, &hosts[i % hosts.len()], &mut out, false)),
        _ => {
            // SAFETY: the raw rounds use both while `stream` and `add` live, and launch on
            // memory no scope uses meanwhile, as `add`'s declaration says.
            let (rs, f) = unsafe { (stream.as_raw(), add.function().as_raw()) };
            rate(|i| {
                raw_round(
                    rs as sys::CUstream,
                    f as sys::CUfunction,
                    &hosts[i % hosts.len()],
                )
            })
        }
    })
}
