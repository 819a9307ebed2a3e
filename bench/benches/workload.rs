//! A whole program, not one call: rounds of "allocate two inputs and an output, copy the
//! inputs in, launch vector_add, copy the output out, verify, free", for n cycling through
//! 1 Ki, 4 Ki, 16 Ki and 64 Ki `f32`, written the way each crate's README teaches:
//!
//! * **cuda-brand, buffers**: `ctx.from_slice` twice, `ctx.zeroed`, one stream scope for the
//!   launch, `to_vec` (each buffer operation is complete when it returns);
//! * **cuda-brand, one scope**: everything queued in one stream scope (`alloc_from_slice`
//!   twice, `alloc_zeroed`, the launch, `copy_to_vec` into a new `Vec`), one synchronization
//!   at its end;
//! * **cudarc**: `alloc_zeros` and `clone_htod` on a stream, `launch`, `clone_dtoh`, one
//!   `synchronize`.
//!
//! On 1 thread, and on 16 threads sharing two contexts (cuda-brand: two contexts of device
//! 0, eight threads each entering one through `SharedContext::enter`, each thread with its
//! own stream; cudarc: its context of device 0, each thread with its own stream). Rounds
//! per second over `SECONDS` per measurement. A repeat measures the three styles one after
//! the other, in an order that rotates from repeat to repeat; `REPEATS` repeats. The table
//! gives each style's median rate and, as the ratios, the median over the repeats of each
//! repeat's own ratio: a paired comparison, so that a drift of the machine between repeats
//! (rates of one style differ by up to a fifth between runs of one process) moves both
//! sides of a ratio alike. Every round's result is verified.
//!
//! `cd bench && cargo bench --bench workload [-- --out FILE.md]`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cuda_brand::prelude::*;
use cuda_brand::{ContextGuard, SharedContext};
use cudarc::driver as rc;
use harness::{median, vector_add_inputs as inputs, verify_vector_add as verify};

mod harness;

const PTX: &str = include_str!("../../kernels/kernels.ptx");
const SIZES: [usize; 4] = [1 << 10, 1 << 12, 1 << 14, 1 << 16];
const SECONDS: f64 = 0.5;
const REPEATS: usize = 15;

/// Rounds per second of `threads` threads, each running `work(thread, keep_going, count)`:
/// it sets itself up, then runs rounds while `keep_going()`, calling `count()` after each.
/// A thread's work: its index, "keep going?", and "one more round done".
type Work<'a> = dyn Fn(usize, &dyn Fn() -> bool, &dyn Fn()) + Sync + 'a;

fn rate(threads: usize, work: &Work<'_>) -> f64 {
    let stop = AtomicBool::new(false);
    let ready = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let counted = std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, done, ready) = (&stop, &done, &ready);
            s.spawn(move || {
                let started = std::cell::Cell::new(false);
                let keep_going = || {
                    if !started.replace(true) {
                        ready.fetch_add(1, Ordering::SeqCst);
                    }
                    !stop.load(Ordering::Relaxed)
                };
                work(t, &keep_going, &|| {
                    done.fetch_add(1, Ordering::Relaxed);
                });
            });
        }
        // measure from the moment every thread has set itself up
        while ready.load(Ordering::SeqCst) < threads as u64 {
            std::thread::yield_now();
        }
        let before = done.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs_f64(SECONDS));
        let after = done.load(Ordering::SeqCst);
        stop.store(true, Ordering::Relaxed);
        after - before
    });
    counted as f64 / SECONDS
}

/// One round in the buffers style, on `stream` of the context `ctx`.
fn buffers_round<'ctx>(
    ctx: ContextGuard<'ctx>,
    stream: &Stream<'ctx>,
    add: &cuda_brand::Kernel<'_, 'ctx, (In<f32>, In<f32>, Out<f32>)>,
    host: &(Vec<f32>, Vec<f32>),
) -> Result<(), Error> {
    let (ha, hb) = host;
    let a = ctx.from_slice(ha)?;
    let b = ctx.from_slice(hb)?;
    let mut c = ctx.zeroed::<f32>(ha.len())?;
    let config = LaunchConfig::linear(ha.len().div_ceil(256) as u32, 256);
    stream.scope(|s| s.launch(add, config, (&a, &b, &mut c)))?;
    verify(ha, hb, &c.to_vec()?);
    Ok(())
}

/// One round in the one-scope style.
fn scope_round<'ctx>(
    stream: &Stream<'ctx>,
    add: &cuda_brand::Kernel<'_, 'ctx, (In<f32>, In<f32>, Out<f32>)>,
    host: &(Vec<f32>, Vec<f32>),
) -> Result<(), Error> {
    let (ha, hb) = host;
    let mut out = Vec::new();
    let config = LaunchConfig::linear(ha.len().div_ceil(256) as u32, 256);
    stream.scope(|s| {
        let (a, b) = (s.alloc_from_slice(ha)?, s.alloc_from_slice(hb)?);
        let c = s.alloc_zeroed::<f32>(ha.len())?;
        s.launch(add, config, (a, b, c))?;
        s.copy_to_vec(&mut out, c.into_ref())
    })?;
    verify(ha, hb, &out);
    Ok(())
}

fn cudarc_round(
    stream: &std::sync::Arc<rc::CudaStream>,
    add: &rc::CudaFunction,
    host: &(Vec<f32>, Vec<f32>),
) {
    use rc::PushKernelArg;
    let (ha, hb) = host;
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

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("workload: no benchmark without a GPU: {e}");
            return;
        }
    };
    let hosts: Vec<(Vec<f32>, Vec<f32>)> = SIZES.iter().map(|&n| inputs(n)).collect();
    // cudarc makes its context current on this thread when created (cuCtxSetCurrent, which
    // replaces the top of the stack): create it before ours are pushed on top of it.
    let rctx = rc::CudaContext::new(0).expect("cudarc context");
    let result = with_context(&device, ContextFlags::default(), |c0| {
        with_context(&device, ContextFlags::default(), |c1| {
            run(c0.share(), c1.share(), &rctx, &hosts, out.as_deref())
        })
    });
    if let Err(e) = result {
        eprintln!("workload: {e}");
        std::process::exit(1);
    }
}

/// cuda-brand: each thread enters the context of its half, makes its stream and kernel
/// once, then runs rounds.
fn ours(
    c0: SharedContext<'_>,
    c1: SharedContext<'_>,
    threads: usize,
    hosts: &[(Vec<f32>, Vec<f32>)],
    one_scope: bool,
) -> f64 {
    rate(threads, &|t, keep_going, count| match t % 2 {
        0 => worker(c0, hosts, one_scope, keep_going, count),
        _ => worker(c1, hosts, one_scope, keep_going, count),
    })
}

fn worker(
    shared: SharedContext<'_>,
    hosts: &[(Vec<f32>, Vec<f32>)],
    one_scope: bool,
    keep_going: &dyn Fn() -> bool,
    count: &dyn Fn(),
) {
    shared
        .enter(|ctx| {
            let stream = ctx.new_stream()?;
            let module = ctx.module_from_ptx(PTX)?;
            // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
            // stays below all three lengths.
            let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
            let mut i = 0;
            while keep_going() {
                let host = &hosts[i % hosts.len()];
                match one_scope {
                    true => scope_round(&stream, &add, host)?,
                    false => buffers_round(ctx, &stream, &add, host)?,
                }
                count();
                i += 1;
            }
            Ok::<_, Error>(())
        })
        .unwrap()
}

fn theirs(
    rctx: &std::sync::Arc<rc::CudaContext>,
    threads: usize,
    hosts: &[(Vec<f32>, Vec<f32>)],
) -> f64 {
    rate(threads, &|_, keep_going, count| {
        let stream = rctx.new_stream().unwrap();
        let module = rctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX)).unwrap();
        let add = module.load_function("vector_add").unwrap();
        let mut i = 0;
        while keep_going() {
            cudarc_round(&stream, &add, &hosts[i % hosts.len()]);
            count();
            i += 1;
        }
    })
}

fn run(
    c0: SharedContext<'_>,
    c1: SharedContext<'_>,
    rctx: &std::sync::Arc<rc::CudaContext>,
    hosts: &[(Vec<f32>, Vec<f32>)],
    out: Option<&str>,
) -> Result<(), Error> {
    let mut table = String::new();
    let name = Device::get(0)?.name()?;
    table.push_str(&format!(
        "{name} (driver CUDA {}), rounds/s, medians of {REPEATS} repeats of {SECONDS} s per style (the order rotating); ratios: medians of each repeat's own ratio; n cycles through 1 Ki, 4 Ki, 16 Ki, 64 Ki f32; every result verified\n\n",
        cuda_brand::driver_version()?
    ));
    table.push_str("| threads | cuda-brand, buffers | cuda-brand, one scope | cudarc | buffers / cudarc | one scope / cudarc |\n|---:|---:|---:|---:|---:|---:|\n");
    for threads in [1, 16] {
        // rates of buffers, one scope, cudarc, per repeat
        let mut rates = Vec::with_capacity(REPEATS);
        for repeat in 0..REPEATS {
            let mut r = [0.0; 3];
            for k in 0..3 {
                let style = (repeat + k) % 3;
                r[style] = match style {
                    0 => ours(c0, c1, threads, hosts, false),
                    1 => ours(c0, c1, threads, hosts, true),
                    _ => theirs(rctx, threads, hosts),
                };
            }
            rates.push(r);
        }
        let med = |f: &dyn Fn(&[f64; 3]) -> f64| median(rates.iter().map(f).collect());
        let row = format!(
            "| {threads} | {:.0} | {:.0} | {:.0} | {:.3} | {:.3} |\n",
            med(&|r| r[0]),
            med(&|r| r[1]),
            med(&|r| r[2]),
            med(&|r| r[0] / r[2]),
            med(&|r| r[1] / r[2]),
        );
        print!("{row}");
        table.push_str(&row);
    }
    if let Some(path) = out {
        std::fs::write(path, table).expect("writing the table");
    }
    Ok(())
}
