//! SM partitions (issue 31): freedom from interference, measured, and what the partitions
//! cost.
//!
//! **Isolation.** The device's SMs are split into A (the rest: 116 on an H100) and B (16).
//! A runs a saturating kernel (`spin`, 1,056 blocks of 256 threads, `SATURATE_S` seconds of
//! clock per block); right after its launch, a short kernel (`spin`, 8 blocks of 256,
//! `SHORT_CYCLES` cycles) is launched in B and its completion latency (host time from the
//! launch call to the end of the wait on B's stream) is the "first" column; then `BUSY`
//! more short kernels while A still runs (median, p99); and `IDLE` short kernels with A idle
//! (median, p99). Three ways:
//!
//! * **plain streams**: two streams of one ordinary context (`with_context`); a short
//!   kernel there waits for A's, so "while busy" relaunches A before each of `PLAIN_BUSY`
//!   short kernels;
//! * **cuda-brand**: `with_partitions`, `sms.split(16)`, a partition stream each, the
//!   launches in scopes;
//! * **raw green contexts**: the same driver calls without the crate (cudarc 0.19's `sys`,
//!   which loads libcuda at run time: `cuDevSmResourceSplitByCount`, `cuGreenCtxCreate`,
//!   `cuGreenCtxStreamCreate`, `cuLaunchKernel`, `cuStreamSynchronize`).
//!
//! **Costs** (`ROUNDS` rounds, interleaved, medians): creating the two partitions and
//! tearing them down (with the primary context retained throughout, as the driver advises),
//! and 100 launches of `empty` on a partition's stream then the wait, by the crate and raw
//! (`cuLaunchKernel` with the same function on the same green stream).
//!
//! `cd bench && cargo bench --bench partitions [-- --out FILE.md]`. Without a GPU, or with a
//! driver without green contexts (CUDA 12.5 for their streams), it prints why and exits 0.

mod harness;

use std::ffi::c_void;
use std::time::Instant;

use cuda_brand::{
    ContextFlags, Device, DeviceAttribute, Error, LaunchConfig, Out, Stream, StreamFlags,
    with_context, with_partitions,
};
use cudarc::driver::sys as rc;
use harness::{emit, median};

const PTX: &str = include_str!("../../kernels/kernels.ptx");
/// SMs of partition B (the latency-critical one), as in the C probe (116 + 16).
const B_SMS: u32 = 16;
const SATURATE_BLOCKS: u32 = 1056;
const SATURATE_S: f64 = 0.5;
const SHORT_BLOCKS: u32 = 8;
const SHORT_CYCLES: i64 = 1_000;
const IDLE: usize = 300;
const BUSY: usize = 300;
const PLAIN_BUSY: usize = 5;
const ROUNDS: usize = 31;

#[track_caller]
fn ok(r: rc::CUresult) {
    assert_eq!(r, rc::CUresult::CUDA_SUCCESS);
}

/// Completion latencies, µs.
#[derive(Default)]
struct Latency {
    first: f64,
    idle: Vec<f64>,
    busy: Vec<f64>,
    /// Whether A's kernel was still running after the last busy measurement.
    a_still_busy: bool,
}

fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

fn micros(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64 / 1e3
}

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("partitions: no benchmark without a GPU: {e}");
            return;
        }
    };
    if let Err(e) = with_partitions(&device, |_| Ok::<_, Error>(())) {
        eprintln!("partitions: no benchmark without green contexts: {e}");
        return;
    }
    if let Err(e) = run(&device, out.as_deref()) {
        eprintln!("partitions: {e}");
        std::process::exit(1);
    }
}

fn run(device: &Device, out: Option<&str>) -> Result<(), Error> {
    let khz = device.attribute(DeviceAttribute::ClockRate)? as f64;
    let saturate = (SATURATE_S * khz * 1e3) as i64;
    let raw = raw_green(device, saturate);
    let ours = crate_partitions(device, saturate)?;
    let plain = plain_streams(device, saturate)?;
    let (create, launch) = costs(device)?;
    let mut text = format!(
        "{} (driver CUDA {}), SMs split {} + {B_SMS}; A: `spin` {SATURATE_BLOCKS} x 256 for {SATURATE_S} s of clock per block; B: `spin` {SHORT_BLOCKS} x 256, {SHORT_CYCLES} cycles; completion latency of B's kernel (launch to end of wait), µs\n\n",
        device.name()?,
        cuda_brand::driver_version()?,
        device.attribute(DeviceAttribute::MultiprocessorCount)? - B_SMS as i32,
    );
    text += "| B's short kernel | plain streams | cuda-brand partitions | raw green contexts | cuda-brand / raw |\n|---|---:|---:|---:|---:|\n";
    let row = |name: &str, p: f64, o: f64, r: f64| {
        format!("| {name} | {p:.1} | {o:.1} | {r:.1} | {:.3} |\n", o / r)
    };
    text += &row(
        "first, queued right after A's saturating kernel",
        plain.first,
        ours.first,
        raw.first,
    );
    text += &row(
        &format!(
            "median while A saturates ({BUSY}; plain: {PLAIN_BUSY}, A relaunched before each)"
        ),
        median(plain.busy.clone()),
        median(ours.busy.clone()),
        median(raw.busy.clone()),
    );
    text += &row(
        "p99 while A saturates (plain: the slowest)",
        p99(plain.busy.clone()),
        p99(ours.busy.clone()),
        p99(raw.busy.clone()),
    );
    text += &row(
        &format!("median, A idle ({IDLE})"),
        median(plain.idle.clone()),
        median(ours.idle.clone()),
        median(raw.idle.clone()),
    );
    text += &row(
        "p99, A idle",
        p99(plain.idle.clone()),
        p99(ours.idle.clone()),
        p99(raw.idle.clone()),
    );
    text += &format!(
        "| median while saturated / median idle | {:.2} | {:.2} | {:.2} | |\n",
        median(plain.busy.clone()) / median(plain.idle.clone()),
        median(ours.busy.clone()) / median(ours.idle.clone()),
        median(raw.busy.clone()) / median(raw.idle.clone()),
    );
    text += &format!(
        "\nA still running after the last short kernel: cuda-brand {}, raw {} (if not, the busy columns are partly idle).\n\n",
        ours.a_still_busy, raw.a_still_busy
    );
    text += &format!(
        "Costs, medians of {ROUNDS} rounds, interleaved:\n\n| operation | cuda-brand | raw | cuda-brand / raw |\n|---|---:|---:|---:|\n"
    );
    text += &format!(
        "| create the two partitions (split, 2 green contexts, enter), then tear them down | {:.1} µs | {:.1} µs | {:.3} |\n",
        create.0 / 1e3,
        create.1 / 1e3,
        create.0 / create.1
    );
    text += &format!(
        "| launch of `empty` on a partition stream, 100 per wait | {:.0} ns | {:.0} ns | {:.3} |\n",
        launch.0,
        launch.1,
        launch.0 / launch.1
    );
    emit(&text, out);
    Ok(())
}

/// Times one short kernel: `launch` queues it, `wait` waits for B's stream.
fn time_short(mut launch_and_wait: impl FnMut()) -> f64 {
    let t = Instant::now();
    launch_and_wait();
    micros(t)
}

fn crate_partitions(device: &Device, saturate: i64) -> Result<Latency, Error> {
    with_partitions(device, |sms| {
        let (b_part, a_part) = sms.split(B_SMS)?;
        a_part.enter(|a| {
            b_part.enter(|b| {
                let (ma, mb) = (a.module_from_ptx(PTX)?, b.module_from_ptx(PTX)?);
                // SAFETY: spin(long long cycles) touches no memory.
                let spin_a = unsafe { ma.kernel::<(i64,)>("spin") }?;
                // SAFETY: as above.
                let spin_b = unsafe { mb.kernel::<(i64,)>("spin") }?;
                let (sa, sb) = (a.new_stream()?, b.new_stream()?);
                let (big, small) = (
                    LaunchConfig::linear(SATURATE_BLOCKS, 256),
                    LaunchConfig::linear(SHORT_BLOCKS, 256),
                );
                let short = || {
                    time_short(|| {
                        sb.scope(|s| s.launch(&spin_b, small, (SHORT_CYCLES,)))
                            .unwrap()
                    })
                };
                sa.scope(|s| s.launch(&spin_a, small, (SHORT_CYCLES,)))?; // warm-up
                short();
                let mut m = Latency {
                    idle: (0..IDLE).map(|_| short()).collect(),
                    ..Latency::default()
                };
                sa.scope(|s| {
                    s.launch(&spin_a, big, (saturate,))?;
                    m.first = short();
                    m.busy = (0..BUSY).map(|_| short()).collect();
                    m.a_still_busy = !sa.is_idle()?;
                    Ok::<_, Error>(())
                })?;
                Ok(m)
            })
        })
    })
}

fn plain_streams(device: &Device, saturate: i64) -> Result<Latency, Error> {
    with_context(device, ContextFlags::default(), |ctx| {
        let module = ctx.module_from_ptx(PTX)?;
        // SAFETY: spin(long long cycles) touches no memory.
        let spin = unsafe { module.kernel::<(i64,)>("spin") }?;
        let (sa, sb) = (
            Stream::new(ctx, StreamFlags::NonBlocking)?,
            Stream::new(ctx, StreamFlags::NonBlocking)?,
        );
        let (big, small) = (
            LaunchConfig::linear(SATURATE_BLOCKS, 256),
            LaunchConfig::linear(SHORT_BLOCKS, 256),
        );
        let short = || {
            time_short(|| {
                sb.scope(|s| s.launch(&spin, small, (SHORT_CYCLES,)))
                    .unwrap()
            })
        };
        short();
        let mut m = Latency {
            idle: (0..IDLE).map(|_| short()).collect(),
            ..Latency::default()
        };
        for k in 0..=PLAIN_BUSY {
            sa.scope(|s| {
                s.launch(&spin, big, (saturate,))?;
                let t = short();
                if k == 0 {
                    m.first = t;
                } else {
                    m.busy.push(t);
                }
                Ok::<_, Error>(())
            })?;
        }
        Ok(m)
    })
}

/// A green context over `resource`, its `CUcontext` form and a stream of it.
struct RawGreen {
    green: rc::CUgreenCtx,
    ctx: rc::CUcontext,
    stream: rc::CUstream,
}

/// # Safety
/// `resource` is a part of a split of `dev`'s SM resource, not yet made a green context.
unsafe fn raw_green_ctx(resource: &mut rc::CUdevResource, dev: rc::CUdevice) -> RawGreen {
    let mut desc = std::ptr::null_mut();
    let (mut green, mut ctx, mut stream) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    // SAFETY: the caller's promise; out-pointers are live locals.
    unsafe {
        ok(rc::cuDevResourceGenerateDesc(&mut desc, resource, 1));
        ok(rc::cuGreenCtxCreate(
            &mut green,
            desc,
            dev,
            rc::CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM as u32,
        ));
        ok(rc::cuCtxFromGreenCtx(&mut ctx, green));
        ok(rc::cuGreenCtxStreamCreate(&mut stream, green, 1, 0));
    }
    RawGreen { green, ctx, stream }
}

/// The device's SMs split by raw calls: (B, A = the rest).
fn raw_split(dev: rc::CUdevice) -> (rc::CUdevResource, rc::CUdevResource) {
    // SAFETY: all-zero bytes are a valid (invalid-typed) resource for the driver to fill.
    let zeroed = || unsafe { std::mem::zeroed::<rc::CUdevResource>() };
    let (mut all, mut b, mut a) = (zeroed(), zeroed(), zeroed());
    let mut groups = 1;
    // SAFETY: out-pointers are live locals; `all` comes from the device.
    unsafe {
        ok(rc::cuDeviceGetDevResource(
            dev,
            &mut all,
            rc::CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM,
        ));
        ok(rc::cuDevSmResourceSplitByCount(
            &mut b,
            &mut groups,
            &all,
            &mut a,
            0,
            B_SMS,
        ));
    }
    (b, a)
}

/// A module of `PTX` and its `spin`, loaded with `g`'s context current.
fn raw_spin(g: &RawGreen) -> rc::CUfunction {
    let ptx = std::ffi::CString::new(PTX).unwrap();
    let (mut module, mut f) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: the context is alive; the image is a NUL-terminated PTX; out-pointers live.
    unsafe {
        ok(rc::cuCtxPushCurrent_v2(g.ctx));
        ok(rc::cuModuleLoadData(&mut module, ptx.as_ptr().cast()));
        ok(rc::cuModuleGetFunction(&mut f, module, c"spin".as_ptr()));
        let mut popped = std::ptr::null_mut();
        ok(rc::cuCtxPopCurrent_v2(&mut popped));
    }
    f
}

/// # Safety
/// `f` is `spin` of a module of `s`'s context.
unsafe fn raw_launch(f: rc::CUfunction, s: rc::CUstream, blocks: u32, cycles: i64) {
    let mut c = cycles;
    let mut params = [(&mut c as *mut i64).cast::<c_void>()];
    // SAFETY: the caller's promise; `params` holds one live i64.
    unsafe {
        ok(rc::cuLaunchKernel(
            f,
            blocks,
            1,
            1,
            256,
            1,
            1,
            0,
            s,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        ))
    };
}

fn raw_green(device: &Device, saturate: i64) -> Latency {
    let dev = device.as_raw();
    let (mut b_res, mut a_res) = raw_split(dev);
    // SAFETY: two disjoint parts of one split, each made a green context once.
    let (a, b) = unsafe {
        (
            raw_green_ctx(&mut a_res, dev),
            raw_green_ctx(&mut b_res, dev),
        )
    };
    let (fa, fb) = (raw_spin(&a), raw_spin(&b));
    // SAFETY (every block below): `fa`/`fb` are `spin` of `a`'s/`b`'s modules, launched on
    // their own green streams, which live until the destroys at the end.
    let short = || {
        time_short(|| unsafe {
            raw_launch(fb, b.stream, SHORT_BLOCKS, SHORT_CYCLES);
            ok(rc::cuStreamSynchronize(b.stream));
        })
    };
    unsafe { raw_launch(fa, a.stream, SHORT_BLOCKS, SHORT_CYCLES) };
    short();
    let mut m = Latency {
        idle: (0..IDLE).map(|_| short()).collect(),
        ..Latency::default()
    };
    unsafe { raw_launch(fa, a.stream, SATURATE_BLOCKS, saturate) };
    m.first = short();
    m.busy = (0..BUSY).map(|_| short()).collect();
    // SAFETY: the stream is alive.
    m.a_still_busy = unsafe { rc::cuStreamQuery(a.stream) } == rc::CUresult::CUDA_ERROR_NOT_READY;
    for g in [a, b] {
        // SAFETY: nothing of `g` is used afterwards; its work is waited for first.
        unsafe {
            ok(rc::cuStreamSynchronize(g.stream));
            ok(rc::cuStreamDestroy_v2(g.stream));
            ok(rc::cuGreenCtxDestroy(g.green));
        }
    }
    m
}

/// Nanoseconds, (cuda-brand, raw).
type Pair = (f64, f64);

/// Creating and tearing down the two partitions, and a launch on a partition stream.
fn costs(device: &Device) -> Result<(Pair, Pair), Error> {
    let dev = device.as_raw();
    let mut primary = std::ptr::null_mut();
    // SAFETY: retained for the measurement (not made current), released below.
    unsafe { ok(rc::cuDevicePrimaryCtxRetain(&mut primary, dev)) };
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        let t = Instant::now();
        with_partitions(device, |sms| {
            let (b, a) = sms.split(B_SMS)?;
            a.enter(|_a| b.enter(|_b| Ok::<_, Error>(())))
        })?;
        let o = t.elapsed().as_nanos() as f64;
        let t = Instant::now();
        let (mut b_res, mut a_res) = raw_split(dev);
        for res in [&mut a_res, &mut b_res] {
            let (mut desc, mut green, mut ctx) = (
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            // SAFETY: one green context per part; destroyed at once, after a push and pop
            // (what `enter` does) and a synchronize.
            unsafe {
                ok(rc::cuDevResourceGenerateDesc(&mut desc, res, 1));
                ok(rc::cuGreenCtxCreate(&mut green, desc, dev, 1));
                ok(rc::cuCtxFromGreenCtx(&mut ctx, green));
                ok(rc::cuCtxPushCurrent_v2(ctx));
                ok(rc::cuCtxSynchronize());
                let mut popped = std::ptr::null_mut();
                ok(rc::cuCtxPopCurrent_v2(&mut popped));
                ok(rc::cuGreenCtxDestroy(green));
            }
        }
        let r = t.elapsed().as_nanos() as f64;
        if round > 0 {
            ours.push(o);
            raw.push(r);
        }
    }
    let create = (median(ours), median(raw));
    let launch = launch_costs(device)?;
    // SAFETY: balances the retain above.
    unsafe { ok(rc::cuDevicePrimaryCtxRelease_v2(dev)) };
    Ok((create, launch))
}

/// 100 launches of `empty` then the wait, by the crate's scope and by `cuLaunchKernel` on
/// the same green stream with the same function; ns per launch.
fn launch_costs(device: &Device) -> Result<(f64, f64), Error> {
    with_partitions(device, |sms| {
        let (b, _a) = sms.split(B_SMS)?;
        b.enter(|p| {
            let module = p.module_from_ptx(PTX)?;
            // SAFETY: empty(float*, size_t) touches nothing.
            let empty = unsafe { module.kernel::<(Out<f32>,)>("empty") }?;
            let stream = p.new_stream()?;
            let mut dev = p.zeroed::<f32>(4)?;
            // SAFETY: raw launches of `empty` on this stream, which touches no memory (its
            // pointer is read only for a length of u64::MAX), waited for before anything is
            // dropped.
            let (raw_f, raw_s) = unsafe {
                (
                    empty.function().as_raw().cast::<rc::CUfunc_st>(),
                    stream.as_raw().cast::<rc::CUstream_st>(),
                )
            };
            let raw_d = 0u64;
            let cfg = LaunchConfig::linear(1, 32);
            let (mut ours, mut raw) = (Vec::new(), Vec::new());
            for round in 0..=ROUNDS {
                let t = Instant::now();
                for _ in 0..20 {
                    stream.scope(|s| {
                        let d = s.bind_mut(&mut dev);
                        for _ in 0..100 {
                            s.launch(&empty, cfg, (d,))?;
                        }
                        Ok::<_, Error>(())
                    })?;
                }
                let o = t.elapsed().as_nanos() as f64 / 2000.0;
                let t = Instant::now();
                for _ in 0..20 {
                    for _ in 0..100 {
                        let (mut ptr, mut n) = (raw_d, 4u64);
                        let mut params = [
                            (&mut ptr as *mut u64).cast::<c_void>(),
                            (&mut n as *mut u64).cast(),
                        ];
                        // SAFETY: as above; `params` holds two live u64.
                        unsafe {
                            ok(rc::cuLaunchKernel(
                                raw_f,
                                1,
                                1,
                                1,
                                32,
                                1,
                                1,
                                0,
                                raw_s,
                                params.as_mut_ptr(),
                                std::ptr::null_mut(),
                            ))
                        };
                    }
                    // SAFETY: the stream is alive.
                    unsafe { ok(rc::cuStreamSynchronize(raw_s)) };
                }
                let r = t.elapsed().as_nanos() as f64 / 2000.0;
                if round > 0 {
                    ours.push(o);
                    raw.push(r);
                }
            }
            Ok((median(ours), median(raw)))
        })
    })
}
