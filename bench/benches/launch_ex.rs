//! Launch overhead with launch attributes: the crate's `s.launch` with a configuration
//! carrying a thread-block cluster, a priority or a cooperative launch (through
//! `cuLaunchKernelEx`, each attribute checked first), against the same `cuLaunchKernelEx`
//! call made directly, and against cudarc where it has the launch (cooperative only:
//! `launch_cooperative`, which calls `cuLaunchCooperativeKernel`). Same method as
//! `overhead.rs`: the columns interleaved in rounds, the order rotating each round,
//! medians reported; 100 launches of an empty kernel per stream synchronization.
//!
//! `cd bench && cargo bench --bench launch_ex [-- --out FILE.md]`. Needs a device of
//! compute capability 9.0 (the kernels are `kernels/launch_ex_sm90.ptx`: clusters need
//! sm_90) and a CUDA 12.0 driver (launch priorities); without them it says so and exits 0.
//! The target: cuda-brand / raw at most 1.05 on every row.

use std::ffi::{c_uint, c_void};
use std::hint::black_box;
use std::time::Instant;

use cuda_brand::{
    ContextGuard, Device, DeviceBuffer, Error, LaunchConfig, Module, Out, Stream, StreamFlags,
    with_primary_context,
};
use cuda_driver_sys as sys;
use cudarc::driver as rc;

const PTX: &str = include_str!("../../kernels/launch_ex_sm90.ptx");
const ROUNDS: usize = 31;
const PER_SYNC: usize = 100;

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

// cuda.h's launch structures (CUDA 11.8+), newer than cuda-driver-sys.
#[repr(C)]
#[derive(Clone, Copy)]
struct LaunchAttribute {
    id: c_uint,
    pad: [u8; 4],
    value: [u8; 64],
}

#[repr(C)]
struct LaunchConfigEx {
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    stream: sys::CUstream,
    attrs: *mut LaunchAttribute,
    num_attrs: c_uint,
}

unsafe extern "C" {
    #[link_name = "cuLaunchKernelEx"]
    fn cu_launch_kernel_ex(
        config: *const LaunchConfigEx,
        f: sys::CUfunction,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> sys::CUresult;
}

const COOPERATIVE: c_uint = 2;
const CLUSTER_DIMENSION: c_uint = 4;
const PRIORITY: c_uint = 8;

fn attribute(id: c_uint, words: &[u32]) -> LaunchAttribute {
    let mut value = [0u8; 64];
    for (i, w) in words.iter().enumerate() {
        value[4 * i..4 * i + 4].copy_from_slice(&w.to_ne_bytes());
    }
    LaunchAttribute {
        id,
        pad: [0; 4],
        value,
    }
}

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("launch_ex: no benchmark without a GPU: {e}");
            return;
        }
    };
    let cc = device.compute_capability().expect("compute capability");
    let version = cuda_brand::driver_version().expect("driver version");
    if cc.major < 9 || version < 12000 {
        eprintln!(
            "launch_ex: needs compute capability 9.0 and a CUDA 12.0 driver; this is {cc}, \
             driver {version}"
        );
        return;
    }
    let result = with_primary_context(&device, |ctx| run(ctx, &device, out.as_deref()));
    if let Err(e) = result {
        eprintln!("launch_ex: {e}");
        std::process::exit(1);
    }
}

fn run(ctx: ContextGuard<'_>, device: &Device, out: Option<&str>) -> Result<(), Error> {
    let rctx = rc::CudaContext::new(0).expect("cudarc context");
    let rstream = rctx.new_stream().expect("cudarc stream");
    // SAFETY (of the raw handles here): the raw column uses them while their values live,
    // destroys none of them, and launches only on memory that no scope uses meanwhile.
    let raw_ctx = unsafe { ctx.as_raw() }.cast();

    let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
    // SAFETY: as for `raw_ctx`.
    let raw_stream = unsafe { stream.as_raw() }.cast();
    let module = Module::from_ptx(ctx, PTX)?;
    // SAFETY: empty_ex(float*, size_t) touches nothing.
    let empty = unsafe { module.kernel::<(Out<f32>,)>("empty_ex") }?;
    // SAFETY: as for `raw_ctx`; `empty_ex` touches nothing.
    let raw_empty = unsafe { empty.function().as_raw() }.cast();
    let rmodule = rctx
        .load_module(cudarc::nvrtc::Ptx::from_src(PTX))
        .expect("cudarc module");
    let rempty = rmodule.load_function("empty_ex").expect("cudarc empty_ex");
    let priority = ctx.stream_priority_range()?.greatest;
    let mut raw_small: sys::CUdeviceptr = 0;
    ok(unsafe { sys::cuMemAlloc_v2(&mut raw_small, 16) });
    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });

    let (st, empty, rs, rempty) = (&stream, &empty, &rstream, &rempty);

    // One row: the crate launches `config`; raw calls cuLaunchKernelEx with `attrs`.
    let row = |name: &'static str,
               config: LaunchConfig,
               attrs: Vec<LaunchAttribute>,
               cooperative_cudarc: bool|
     -> Result<Row<'_>, Error> {
        let mut dev4 = DeviceBuffer::<f32>::zeroed(ctx, 4)?;
        let ours: Measure<'_> = Box::new(move || {
            per_op(20, || {
                st.scope(|s| {
                    let d = s.bind_mut(&mut dev4);
                    for _ in 0..PER_SYNC {
                        s.launch(empty, config, (d,))?;
                    }
                    Ok::<_, Error>(())
                })
                .unwrap()
            }) / PER_SYNC as f64
        });
        let raw: Measure<'_> = Box::new(move || {
            let mut attrs = attrs.clone();
            per_op(20, || unsafe {
                for _ in 0..PER_SYNC {
                    let (mut p, mut n) = (raw_small, 4u64);
                    let mut params = [
                        (&mut p as *mut u64).cast::<c_void>(),
                        (&mut n as *mut u64).cast(),
                    ];
                    let ex = LaunchConfigEx {
                        grid: config.grid,
                        block: config.block,
                        shared_mem_bytes: config.shared_mem_bytes,
                        stream: raw_stream,
                        attrs: attrs.as_mut_ptr(),
                        num_attrs: attrs.len() as c_uint,
                    };
                    ok(cu_launch_kernel_ex(
                        &ex,
                        raw_empty,
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    ));
                }
                ok(sys::cuStreamSynchronize(raw_stream));
            }) / PER_SYNC as f64
        });
        let cudarc: Option<Measure<'_>> = if cooperative_cudarc {
            let mut rdev4 = rs.alloc_zeros::<f32>(4).expect("cudarc alloc");
            Some(Box::new(move || {
                use rc::PushKernelArg;
                let cfg = rc::LaunchConfig {
                    grid_dim: (config.grid[0], config.grid[1], config.grid[2]),
                    block_dim: (config.block[0], config.block[1], config.block[2]),
                    shared_mem_bytes: 0,
                };
                let n = 4u64;
                per_op(20, || {
                    for _ in 0..PER_SYNC {
                        let mut b = rs.launch_builder(rempty);
                        b.arg(&mut rdev4).arg(&n);
                        // SAFETY: empty_ex(float*, size_t) touches nothing.
                        unsafe { b.launch_cooperative(cfg) }.unwrap();
                    }
                    rs.synchronize().unwrap();
                }) / PER_SYNC as f64
            }))
        } else {
            None
        };
        Ok(Row {
            name,
            ours,
            raw,
            cudarc,
        })
    };

    let plain = LaunchConfig::linear(2, 32);
    let mut rows = vec![
        row(
            "no attributes (crate: cuLaunchKernel; raw: cuLaunchKernelEx, 0 attributes)",
            plain,
            vec![],
            false,
        )?,
        row(
            "cluster 2x1x1, grid 2",
            plain.with_cluster([2, 1, 1]),
            vec![attribute(CLUSTER_DIMENSION, &[2, 1, 1])],
            false,
        )?,
        row(
            "priority (the context's highest)",
            plain.with_priority(priority),
            vec![attribute(PRIORITY, &[priority as u32])],
            false,
        )?,
        row(
            "cooperative, grid 2",
            plain.with_cooperative(),
            vec![attribute(COOPERATIVE, &[1])],
            true,
        )?,
        row(
            "cluster 2x1x1 + priority, grid 2",
            plain.with_cluster([2, 1, 1]).with_priority(priority),
            vec![
                attribute(PRIORITY, &[priority as u32]),
                attribute(CLUSTER_DIMENSION, &[2, 1, 1]),
            ],
            false,
        )?,
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
                    s[which].push(black_box(v)); // round 0 is the warm-up
                }
            }
        }
    }

    // ---- report ------------------------------------------------------------------------
    let mut table = String::new();
    table.push_str(
        "| launch (empty kernel, 1 slice, 100 per sync) | cuda-brand | raw cuLaunchKernelEx | cudarc | cuda-brand / raw | cuda-brand / cudarc |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (row, s) in rows.iter().zip(samples) {
        let [ours, raw, theirs] = s.map(|v| if v.is_empty() { f64::NAN } else { median(v) });
        let fmt = |v: f64| match v.is_nan() {
            true => "n/a".to_string(),
            false => format!("{v:.0} ns"),
        };
        let ratio = |a: f64, b: f64| match b.is_nan() {
            true => "n/a".to_string(),
            false => format!("{:.3}", a / b),
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
    let header = format!(
        "{} (driver CUDA {}), medians of {ROUNDS} rounds, the three interleaved; ratios above 1 mean cuda-brand is slower\n\n",
        device.name()?,
        cuda_brand::driver_version()?
    );
    print!("{header}{table}");
    if let Some(path) = out {
        std::fs::write(path, format!("{header}{table}")).expect("writing the table");
        eprintln!("table written to {path}");
    }
    drop(rows);
    ok(unsafe { sys::cuMemFree_v2(raw_small) });
    Ok(())
}
