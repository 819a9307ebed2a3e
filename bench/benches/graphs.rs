//! Graphs and host functions three ways in one process: this crate, the same driver calls
//! made directly through `cuda-driver-sys` (the floor), and cudarc 0.19.10's capture
//! (`CudaStream::begin_capture` / `end_capture`, `CudaGraph::launch`). The three run
//! interleaved in rounds (the order rotating each round), and the table reports medians.
//!
//! The workload: 100 tiny dependent kernels (`add_one_f32` on 256 floats, one block, all on
//! one buffer), queued as 100 launches, or captured once and replayed as one graph. The
//! target is the crate's replay within 1.05x of a raw `cuGraphLaunch`.
//!
//! Also: the enqueue cost of a graph launch (one-kernel graphs, 100 per sync), a host
//! function queued and run (100 per sync; cudarc has none), and one driver call through the
//! crate, which checks the host-function flag first (`cuDriverGetVersion`, which does no
//! work: the check's cost is what shows).
//!
//! `cd bench && cargo bench --bench graphs [-- --out FILE.md]`. Without a GPU it prints the
//! driver's error and exits 0.

use std::ffi::c_void;
use std::hint::black_box;
use std::time::Instant;

use cuda_brand::with_primary_context;
use cuda_brand::{ContextGuard, Device, Error, LaunchConfig, Module, Out, Stream, StreamFlags};
use cuda_driver_sys as sys;
use cudarc::driver as rc;

const PTX: &str = include_str!("../../tests/kernels/graphs.ptx");
const ROUNDS: usize = 31;
const KERNELS: usize = 100;
const N: usize = 256;

#[track_caller]
fn ok(r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

type Measure<'a> = Box<dyn FnMut() -> f64 + 'a>;

struct Row<'a> {
    name: &'static str,
    ours: Measure<'a>,
    raw: Measure<'a>,
    cudarc: Option<Measure<'a>>,
}

/// Times `n` runs of `f`, in ns per run.
fn per_op(n: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

// Newer than the bindings (CUDA 11.4), linked like the rest of the raw column.
unsafe extern "C" {
    #[link_name = "cuGraphInstantiateWithFlags"]
    fn cu_graph_instantiate_with_flags(
        exec: *mut sys::CUgraphExec,
        graph: sys::CUgraph,
        flags: u64,
    ) -> sys::CUresult;
}

/// The raw column's host function: does nothing.
unsafe extern "C" fn nothing(_: *mut c_void) {}

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("graphs: no benchmark without a GPU: {e}");
            return;
        }
    };
    let result = with_primary_context(&device, |ctx| run(ctx, &device, out.as_deref()));
    if let Err(e) = result {
        eprintln!("graphs: {e}");
        std::process::exit(1);
    }
}

/// Captures `count` launches of `f` on `x` with raw driver calls and instantiates them.
fn raw_graph(
    f: sys::CUfunction,
    x: sys::CUdeviceptr,
    stream: sys::CUstream,
    count: usize,
) -> sys::CUgraphExec {
    let mut n = N as u64;
    let mut x = x;
    let mut params = [
        (&mut x as *mut sys::CUdeviceptr).cast::<c_void>(),
        (&mut n as *mut u64).cast::<c_void>(),
    ];
    let mut graph = std::ptr::null_mut();
    let mut exec = std::ptr::null_mut();
    // SAFETY: a live stream, function and buffer of the current context; the parameters
    // match add_one_f32(float*, size_t).
    unsafe {
        ok(sys::cuStreamBeginCapture_v2(
            stream,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        ));
        for _ in 0..count {
            ok(sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                N as u32,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            ));
        }
        ok(sys::cuStreamEndCapture(stream, &mut graph));
        ok(cu_graph_instantiate_with_flags(&mut exec, graph, 0));
        ok(sys::cuGraphDestroy(graph));
    }
    exec
}

fn run(ctx: ContextGuard<'_>, device: &Device, out: Option<&str>) -> Result<(), Error> {
    // SAFETY (of the raw handles here): the raw column uses them while their values live,
    // destroys none of them, and launches only on memory that no scope uses meanwhile.
    let raw_ctx = unsafe { ctx.as_raw() }.cast();
    // cudarc on the same (primary) context. Its event tracking would record events on the
    // capturing stream (cudarc's own test turns it off for capture), so it is off, for its
    // launches too.
    let rctx = rc::CudaContext::new(0).expect("cudarc context");
    // SAFETY: every cudarc buffer here is used on one stream only.
    unsafe { rctx.disable_event_tracking() };
    let rstream = rctx.new_stream().expect("cudarc stream");
    let rmodule = rctx
        .load_module(cudarc::nvrtc::Ptx::from_src(PTX))
        .expect("cudarc module");
    let radd = rmodule
        .load_function("add_one_f32")
        .expect("cudarc add_one_f32");
    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });

    let module = Module::from_ptx(ctx, PTX)?;
    // SAFETY: add_one_f32(float*, size_t) writes only x[0..x_len].
    let add = unsafe { module.kernel::<(Out<f32>,)>("add_one_f32") }?;
    let config = LaunchConfig::linear(1, N as u32);
    let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
    // SAFETY: as for `raw_ctx`.
    let raw_stream = unsafe { stream.as_raw() }.cast();
    // SAFETY: as for `raw_ctx`; the raw launches keep `add_one_f32`'s declaration.
    let raw_add = unsafe { add.function().as_raw() }.cast();

    // ---- the graphs ---------------------------------------------------------------------
    let launched = std::cell::RefCell::new(ctx.zeroed::<f32>(N)?);
    let (mut g100, mut g1) = (ctx.zeroed::<f32>(N)?, ctx.zeroed::<f32>(N)?);
    let owned100 = ctx
        .capture(|g| {
            let x = g.bind_mut(&mut g100);
            for _ in 0..KERNELS {
                g.launch(&add, config, (x,))?;
            }
            Ok(())
        })?
        .0
        .instantiate()?;
    let owned1 = ctx
        .capture(|g| g.launch(&add, config, (&mut g1,)))?
        .0
        .instantiate()?;

    let (mut raw_x, mut raw_g100, mut raw_g1): (
        sys::CUdeviceptr,
        sys::CUdeviceptr,
        sys::CUdeviceptr,
    ) = (0, 0, 0);
    // SAFETY: out-pointers are live locals; the primary context is current.
    unsafe {
        ok(sys::cuMemAlloc_v2(&mut raw_x, N * 4));
        ok(sys::cuMemAlloc_v2(&mut raw_g100, N * 4));
        ok(sys::cuMemAlloc_v2(&mut raw_g1, N * 4));
    }
    let mut capture_stream = std::ptr::null_mut();
    // SAFETY: an out-pointer to a live local.
    ok(unsafe { sys::cuStreamCreate(&mut capture_stream, 1) });
    let raw_exec100 = raw_graph(raw_add, raw_g100, capture_stream, KERNELS);
    let raw_exec1 = raw_graph(raw_add, raw_g1, capture_stream, 1);

    let rcfg = rc::LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (N as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let n64 = N as u64;
    let mut rx = rstream.alloc_zeros::<f32>(N).expect("cudarc alloc");
    let (mut rg100, mut rg1) = (
        rstream.alloc_zeros::<f32>(N).expect("cudarc alloc"),
        rstream.alloc_zeros::<f32>(N).expect("cudarc alloc"),
    );
    rstream.synchronize().expect("cudarc sync");
    let rcapture = |buf: &mut rc::CudaSlice<f32>, count: usize| {
        use rc::PushKernelArg;
        rstream
            .begin_capture(rc::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .expect("cudarc begin_capture");
        for _ in 0..count {
            let mut b = rstream.launch_builder(&radd);
            b.arg(&mut *buf).arg(&n64);
            // SAFETY: add_one_f32(float*, size_t) writes only x[0..x_len].
            unsafe { b.launch(rcfg) }.expect("cudarc launch");
        }
        rstream
            .end_capture(rc::sys::CUgraphInstantiate_flags(0))
            .expect("cudarc end_capture")
            .expect("cudarc graph")
    };
    let rgraph100 = rcapture(&mut rg100, KERNELS);
    let rgraph1 = rcapture(&mut rg1, 1);
    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });

    let (st, rs, radd, add) = (&stream, &rstream, &radd, &add);
    let (exec100, exec1, rgraph100, rgraph1) = (&owned100, &owned1, &rgraph100, &rgraph1);
    let launched = &launched;

    let mut rows: Vec<Row<'_>> = vec![
        Row {
            name: "100 dependent tiny kernels as 100 launches, + sync",
            ours: Box::new(move || {
                per_op(20, || {
                    let mut x = launched.borrow_mut();
                    st.scope(|s| {
                        let x = s.bind_mut(&mut *x);
                        for _ in 0..KERNELS {
                            s.launch(add, config, (x,))?;
                        }
                        Ok::<_, Error>(())
                    })
                    .unwrap();
                })
            }),
            raw: Box::new(move || {
                let mut n = N as u64;
                let mut x = raw_x;
                let mut params = [
                    (&mut x as *mut sys::CUdeviceptr).cast::<c_void>(),
                    (&mut n as *mut u64).cast::<c_void>(),
                ];
                per_op(20, || unsafe {
                    for _ in 0..KERNELS {
                        ok(sys::cuLaunchKernel(
                            raw_add,
                            1,
                            1,
                            1,
                            N as u32,
                            1,
                            1,
                            0,
                            raw_stream,
                            params.as_mut_ptr(),
                            std::ptr::null_mut(),
                        ));
                    }
                    ok(sys::cuStreamSynchronize(raw_stream));
                })
            }),
            cudarc: Some(Box::new(move || {
                use rc::PushKernelArg;
                per_op(20, || {
                    for _ in 0..KERNELS {
                        let mut b = rs.launch_builder(radd);
                        b.arg(&mut rx).arg(&n64);
                        // SAFETY: add_one_f32(float*, size_t) writes only x[0..x_len].
                        unsafe { b.launch(rcfg) }.unwrap();
                    }
                    rs.synchronize().unwrap();
                })
            })),
        },
        Row {
            name: "the same 100 kernels as one graph replay, + sync",
            ours: Box::new(move || per_op(20, || st.scope(|s| exec100.launch(s)).unwrap())),
            raw: Box::new(move || {
                per_op(20, || unsafe {
                    ok(sys::cuGraphLaunch(raw_exec100, raw_stream));
                    ok(sys::cuStreamSynchronize(raw_stream));
                })
            }),
            cudarc: Some(Box::new(move || {
                // cudarc replays on the stream it captured on
                per_op(20, || {
                    rgraph100.launch().unwrap();
                    rs.synchronize().unwrap();
                })
            })),
        },
        Row {
            name: "graph launch, one-kernel graph, 100 per sync (per launch)",
            ours: Box::new(move || {
                per_op(20, || {
                    st.scope(|s| {
                        for _ in 0..100 {
                            exec1.launch(s)?;
                        }
                        Ok::<_, Error>(())
                    })
                    .unwrap()
                }) / 100.0
            }),
            raw: Box::new(move || {
                per_op(20, || unsafe {
                    for _ in 0..100 {
                        ok(sys::cuGraphLaunch(raw_exec1, raw_stream));
                    }
                    ok(sys::cuStreamSynchronize(raw_stream));
                }) / 100.0
            }),
            cudarc: Some(Box::new(move || {
                per_op(20, || {
                    for _ in 0..100 {
                        rgraph1.launch().unwrap();
                    }
                    rs.synchronize().unwrap();
                }) / 100.0
            })),
        },
        Row {
            name: "host function queued and run, 100 per sync (per function)",
            ours: Box::new(move || {
                per_op(20, || {
                    st.scope(|s| {
                        for _ in 0..100 {
                            s.host_fn(|| {
                                black_box(());
                            })?;
                        }
                        Ok::<_, Error>(())
                    })
                    .unwrap()
                }) / 100.0
            }),
            raw: Box::new(move || {
                per_op(20, || unsafe {
                    for _ in 0..100 {
                        ok(sys::cuLaunchHostFunc(
                            raw_stream,
                            Some(nothing),
                            std::ptr::null_mut(),
                        ));
                    }
                    ok(sys::cuStreamSynchronize(raw_stream));
                }) / 100.0
            }),
            cudarc: None,
        },
        Row {
            name: "one driver call (cuDriverGetVersion), with the host-function check",
            ours: Box::new(|| {
                per_op(100_000, || {
                    black_box(cuda_brand::driver_version().unwrap());
                })
            }),
            raw: Box::new(|| {
                per_op(100_000, || {
                    let mut v = 0;
                    // SAFETY: an out-pointer to a live local.
                    ok(unsafe { sys::cuDriverGetVersion(&mut v) });
                    black_box(v);
                })
            }),
            cudarc: None,
        },
    ];

    // ---- rounds ------------------------------------------------------------------------
    let mut samples: Vec<[Vec<f64>; 3]> = rows.iter().map(|_| [vec![], vec![], vec![]]).collect();
    for round in 0..=ROUNDS {
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
                // the current context must be ours again whatever cudarc did
                ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });
                if round > 0 {
                    s[which].push(v); // round 0 is the warm-up
                }
            }
        }
    }

    // ---- check and report ----------------------------------------------------------------
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    drop(rows);
    // every replay and launch added one per kernel: the buffers hold whole numbers of runs
    let replays = (ROUNDS + 1) * 20;
    drop((owned100, owned1)); // the graphs' buffers are the host's again
    assert_eq!(
        g100.to_vec()?[0],
        (replays * KERNELS) as f32,
        "every replay ran its 100 kernels"
    );
    assert_eq!(g1.to_vec()?[0], (replays * 100) as f32);

    let mut table = String::new();
    table.push_str(
        "| operation | cuda-brand | raw driver | cudarc | cuda-brand / raw | cuda-brand / cudarc |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (name, s) in names.iter().zip(samples) {
        let [ours, raw, theirs] = s.map(|v| if v.is_empty() { f64::NAN } else { median(v) });
        let fmt = |v: f64| {
            if v.is_nan() {
                "n/a".to_string()
            } else if v >= 10_000.0 {
                format!("{:.1} µs", v / 1000.0)
            } else {
                format!("{v:.1} ns")
            }
        };
        let ratio = |a: f64, b: f64| {
            if b.is_nan() {
                "n/a".to_string()
            } else {
                format!("{:.3}", a / b)
            }
        };
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            name,
            fmt(ours),
            fmt(raw),
            fmt(theirs),
            ratio(ours, raw),
            ratio(ours, theirs)
        ));
    }
    let header = format!(
        "{} (driver CUDA {}), medians of {ROUNDS} rounds, the three interleaved; ratios above 1 mean cuda-brand is slower; cudarc with event tracking off (needed for its capture); target: the graph replay row within 1.050 of raw\n\n",
        device.name()?,
        cuda_brand::driver_version()?
    );
    print!("{header}{table}");
    if let Some(path) = out {
        std::fs::write(path, format!("{header}{table}")).expect("writing the table");
        eprintln!("table written to {path}");
    }
    // SAFETY: made above, unused from here on.
    unsafe {
        ok(sys::cuGraphExecDestroy(raw_exec100));
        ok(sys::cuGraphExecDestroy(raw_exec1));
        ok(sys::cuStreamDestroy_v2(capture_stream));
        ok(sys::cuMemFree_v2(raw_x));
        ok(sys::cuMemFree_v2(raw_g100));
        ok(sys::cuMemFree_v2(raw_g1));
    }
    Ok(())
}
