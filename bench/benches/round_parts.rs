//! Where a round of `workload`'s buffers style and of its one-scope style spends its time,
//! step by step, on 1 thread, against the same steps of cudarc's round: microseconds per
//! step, medians of 5 runs of `ROUNDS` rounds, per size. Written to find the 1-thread
//! losses (issue 28). In the one-scope round every step up to the download is a call inside
//! the scope's closure ("upload a" includes opening the scope), and "free" is the scope's
//! end (its synchronization and frees).
//!
//! `cd bench && cargo bench --bench round_parts [-- --out FILE.md]`.

use std::time::Instant;

use cuda_brand::prelude::*;
use cudarc::driver as rc;
use harness::{median, vector_add_inputs as inputs, verify_vector_add as verify};

mod harness;

const PTX: &str = include_str!("../../kernels/kernels.ptx");
const SIZES: [usize; 4] = [1 << 10, 1 << 12, 1 << 14, 1 << 16];
const ROUNDS: usize = 2000;
const RUNS: usize = 5;
const STEPS: [&str; 7] = [
    "upload a",
    "upload b",
    "zeroed c",
    "launch",
    "download",
    "free",
    "whole round",
];

/// Microseconds per step, `ROUNDS` rounds of `round`, which fills the step times.
fn measure(mut round: impl FnMut(&mut [f64; 7])) -> [f64; 7] {
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let mut t = [0.0; 7];
        for _ in 0..ROUNDS {
            round(&mut t);
        }
        runs.push(t.map(|x| x * 1e6 / ROUNDS as f64));
    }
    std::array::from_fn(|i| median(runs.iter().map(|r| r[i]).collect()))
}

/// Adds one round's step times to `t`: the six steps between the seven instants `ts`,
/// and the whole round.
fn add_steps(t: &mut [f64; 7], ts: [Instant; 7]) {
    for i in 0..6 {
        t[i] += (ts[i + 1] - ts[i]).as_secs_f64();
    }
    t[6] += (ts[6] - ts[0]).as_secs_f64();
}

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("round_parts: no benchmark without a GPU: {e}");
            return;
        }
    };
    let rctx = rc::CudaContext::new(0).expect("cudarc context");
    let rstream = rctx.new_stream().unwrap();
    let rmodule = rctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX)).unwrap();
    let radd = rmodule.load_function("vector_add").unwrap();
    let mut table = String::from(
        "µs per step, 1 thread, medians of 5 runs of 2000 rounds\n\n| n (f32) | step | cuda-brand, buffers | cuda-brand, one scope | cudarc |\n|---:|---|---:|---:|---:|\n",
    );
    let result = with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let module = ctx.module_from_ptx(PTX)?;
        // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
        // stays below all three lengths.
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        for n in SIZES {
            let (ha, hb) = inputs(n);
            let config = LaunchConfig::linear(n.div_ceil(256) as u32, 256);
            let ours = measure(|t| {
                let t0 = Instant::now();
                let a = ctx.from_slice(&ha).unwrap();
                let t1 = Instant::now();
                let b = ctx.from_slice(&hb).unwrap();
                let t2 = Instant::now();
                let mut c = ctx.zeroed::<f32>(n).unwrap();
                let t3 = Instant::now();
                stream
                    .scope(|s| s.launch(&add, config, (&a, &b, &mut c)))
                    .unwrap();
                let t4 = Instant::now();
                let out = c.to_vec().unwrap();
                let t5 = Instant::now();
                drop((a, b, c));
                let t6 = Instant::now();
                verify(&ha, &hb, &out);
                add_steps(t, [t0, t1, t2, t3, t4, t5, t6]);
            });
            let one_scope = measure(|t| {
                let mut ts = [Instant::now(); 7];
                let mut out = Vec::new();
                ts[0] = Instant::now();
                stream
                    .scope(|s| {
                        let a = s.alloc_from_slice(&ha)?;
                        ts[1] = Instant::now();
                        let b = s.alloc_from_slice(&hb)?;
                        ts[2] = Instant::now();
                        let c = s.alloc_zeroed::<f32>(n)?;
                        ts[3] = Instant::now();
                        s.launch(&add, config, (a, b, c))?;
                        ts[4] = Instant::now();
                        s.copy_to_vec(&mut out, c.into_ref())?;
                        ts[5] = Instant::now();
                        Ok::<_, Error>(())
                    })
                    .unwrap();
                ts[6] = Instant::now();
                verify(&ha, &hb, &out);
                add_steps(t, ts);
            });
            // cudarc binds its context to the calling thread (cuCtxSetCurrent): on a
            // thread of its own, as in `workload`
            let theirs = std::thread::scope(|sc| {
                sc.spawn(|| {
                    measure(|t| {
                        use rc::PushKernelArg;
                        let t0 = Instant::now();
                        let a = rstream.clone_htod(&ha).unwrap();
                        let t1 = Instant::now();
                        let b = rstream.clone_htod(&hb).unwrap();
                        let t2 = Instant::now();
                        let mut c = rstream.alloc_zeros::<f32>(n).unwrap();
                        let t3 = Instant::now();
                        let cfg = rc::LaunchConfig {
                            grid_dim: (n.div_ceil(256) as u32, 1, 1),
                            block_dim: (256, 1, 1),
                            shared_mem_bytes: 0,
                        };
                        let len = n as u64;
                        let mut l = rstream.launch_builder(&radd);
                        l.arg(&a).arg(&len).arg(&b).arg(&len).arg(&mut c).arg(&len);
                        // SAFETY: as above.
                        unsafe { l.launch(cfg) }.unwrap();
                        let t4 = Instant::now();
                        let out = rstream.clone_dtoh(&c).unwrap();
                        rstream.synchronize().unwrap();
                        let t5 = Instant::now();
                        drop((a, b, c));
                        let t6 = Instant::now();
                        verify(&ha, &hb, &out);
                        add_steps(t, [t0, t1, t2, t3, t4, t5, t6]);
                    })
                })
                .join()
                .unwrap()
            });
            for (i, step) in STEPS.iter().enumerate() {
                table.push_str(&format!(
                    "| {n} | {step} | {:.2} | {:.2} | {:.2} |\n",
                    ours[i], one_scope[i], theirs[i]
                ));
            }
        }
        Ok::<_, Error>(())
    });
    if let Err(e) = result {
        eprintln!("round_parts: {e}");
        std::process::exit(1);
    }
    print!("{table}");
    if let Some(path) = out {
        std::fs::write(path, &table).expect("write the table");
    }
}
