//! Every operation three ways in one process: this crate, the same driver calls made
//! directly through `cuda-driver-sys` (the floor), and cudarc. The three run interleaved in
//! rounds (the order rotating each round), and the table reports medians.
//!
//! `cd bench && cargo bench --bench overhead [-- --out FILE.md]`; or build the binary
//! where cargo is (`cargo bench --no-run`) and run it with `--bench --out FILE.md` on the
//! machine with the GPU.
//! Without a GPU it prints the driver's error and exits 0, so `cargo bench` stays usable.

use std::ffi::c_void;
use std::hint::black_box;
use std::time::Instant;

use cuda_brand::{
    ContextGuard, Device, DeviceBuffer, Error, Event, EventFlags, In, LaunchConfig, Module, Out,
    PinnedBuffer, Stream, StreamFlags, with_primary_context, with_raw_context,
};
use cuda_driver_sys as sys;
use cudarc::driver as rc;

const PTX: &str = include_str!("../../kernels/kernels.ptx");
const ROUNDS: usize = 31;

#[track_caller]
fn ok(r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

/// What a measurement is: nanoseconds per operation (lower is better) or GB/s.
#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Ns,
    GBps,
}

type Measure<'a> = Box<dyn FnMut() -> f64 + 'a>;

struct Row<'a> {
    name: &'static str,
    unit: Unit,
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

/// Times one run of `f` moving `bytes`, in GB/s.
fn bandwidth(bytes: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    bytes as f64 / t.elapsed().as_secs_f64() / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("overhead: no benchmark without a GPU: {e}");
            return;
        }
    };
    let result = with_primary_context(&device, |ctx| run(ctx, &device, out.as_deref()));
    if let Err(e) = result {
        eprintln!("overhead: {e}");
        std::process::exit(1);
    }
}

fn run(ctx: ContextGuard<'_>, device: &Device, out: Option<&str>) -> Result<(), Error> {
    // cudarc on the same (primary) context, so all three share one context.
    let rctx = rc::CudaContext::new(0).expect("cudarc context");
    let rstream = rctx.new_stream().expect("cudarc stream");
    // Re-assert our context as current (cudarc binds the same primary context).
    // SAFETY (of the raw handles here): the raw column uses them while their values live,
    // destroys none of them, and touches only memory of its own or memory no scope uses.
    let raw_ctx = unsafe { ctx.as_raw() }.cast();

    // ---- shared setup --------------------------------------------------------------
    let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
    // SAFETY: as for `raw_ctx`.
    let raw_stream = unsafe { stream.as_raw() }.cast();
    let module = Module::from_ptx(ctx, PTX)?;
    // SAFETY: empty(float*, size_t) touches nothing; empty8 likewise with 8 parameters.
    let empty = unsafe { module.kernel::<(Out<f32>,)>("empty") }?;
    // SAFETY: as above.
    let empty8 = unsafe { module.kernel::<(Out<f32>, Out<f32>, In<f32>, In<f32>)>("empty8") }?;
    // SAFETY: as for `raw_ctx`; the raw launches keep the kernels' declarations.
    let (raw_empty, raw_empty8) = unsafe {
        (
            empty.function().as_raw().cast(),
            empty8.function().as_raw().cast(),
        )
    };
    let rmodule = rctx
        .load_module(cudarc::nvrtc::Ptx::from_src(PTX))
        .expect("cudarc module");
    let rempty = rmodule.load_function("empty").expect("cudarc empty");
    let rempty8 = rmodule.load_function("empty8").expect("cudarc empty8");

    // A live allocation, so that 1 KiB alloc/free measures the allocator, not the first
    // mapping (docs/c/facts/costs.c measures both: docs/c/facts/costs.out, part 3).
    let _keep = DeviceBuffer::<u8>::zeroed(ctx, 1 << 20)?;
    // SAFETY: as for `raw_ctx` (the crate's pool of the device lives as long as the process).
    let raw_pool = unsafe { cuda_brand::MemoryPool::of_device(ctx)?.as_raw() }.cast::<c_void>();
    let mut raw_small: sys::CUdeviceptr = 0;
    ok(unsafe { sys::cuMemAlloc_v2(&mut raw_small, 16) });

    let (mut ev_a, mut ev_b, mut ev_rec) = (
        Event::new(ctx, EventFlags::new())?,
        Event::new(ctx, EventFlags::new())?,
        Event::new(ctx, EventFlags::new())?,
    );
    // two records to time, and an event of their kind for the record row
    let (rec_a, rec_b) = (ev_a.record(&stream)?, ev_b.record(&stream)?);
    stream.synchronize()?;
    // SAFETY: as for `raw_ctx`; the raw column records only `ev_rec`, of which no proof lives.
    let (raw_ev_a, raw_ev_b, raw_ev_rec) = unsafe {
        (
            rec_a.as_raw().cast(),
            rec_b.as_raw().cast(),
            ev_rec.as_raw().cast(),
        )
    };
    let rev_a = rstream
        .record_event(Some(sys_rc_timing()))
        .expect("cudarc event");
    let rev_b = rstream
        .record_event(Some(sys_rc_timing()))
        .expect("cudarc event");
    rstream.synchronize().expect("cudarc sync");

    const BIG: usize = 256 << 20;
    let pinned = PinnedBuffer::<u8>::zeroed(ctx, BIG)?;
    let pinned_back = std::cell::RefCell::new(PinnedBuffer::<u8>::zeroed(ctx, BIG)?);
    let big = std::cell::RefCell::new(DeviceBuffer::<u8>::zeroed(ctx, BIG)?);
    let (mut raw_pinned, mut raw_big): (*mut c_void, sys::CUdeviceptr) = (std::ptr::null_mut(), 0);
    ok(unsafe { sys::cuMemHostAlloc(&mut raw_pinned, BIG, 0) });
    ok(unsafe { sys::cuMemAlloc_v2(&mut raw_big, BIG) });
    // SAFETY: written before it is read (a host-to-device copy of zeroed pinned memory).
    let rpinned =
        std::cell::RefCell::new(unsafe { rctx.alloc_pinned::<u8>(BIG) }.expect("cudarc pinned"));
    let rbig = std::cell::RefCell::new(rstream.alloc_zeros::<u8>(BIG).expect("cudarc alloc"));
    let (pinned, pinned_back, big, rpinned, rbig) = (&pinned, &pinned_back, &big, &rpinned, &rbig);
    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });

    let shared = ctx.share();
    let dev = device.as_raw();
    // references for `move` closures, which each own their buffers
    let (st, rs, empty, empty8, rempty, rempty8) =
        (&stream, &rstream, &empty, &empty8, &rempty, &rempty8);
    let (rev_a, rev_b) = (&rev_a, &rev_b);
    let one_kib = 1024;

    let mut rows: Vec<Row<'_>> = vec![
        Row {
            name: "with_primary_context (retained), enter+leave",
            unit: Unit::Ns,
            ours: Box::new(|| {
                per_op(2000, || {
                    // SAFETY: the handle is only returned, for `black_box`.
                    with_primary_context(device, |c| {
                        Ok::<_, Error>(unsafe { black_box(c).as_raw() })
                    })
                    .unwrap();
                })
            }),
            raw: Box::new(move || {
                per_op(2000, || unsafe {
                    let mut c = std::ptr::null_mut();
                    ok(sys::cuDevicePrimaryCtxRetain(&mut c, dev));
                    ok(sys::cuCtxPushCurrent_v2(c));
                    ok(sys::cuCtxSynchronize());
                    ok(sys::cuCtxPopCurrent_v2(&mut c));
                    ok(sys::cuDevicePrimaryCtxRelease(dev));
                })
            }),
            cudarc: Some(Box::new(|| {
                per_op(2000, || {
                    let c = rc::CudaContext::new(0).unwrap();
                    c.synchronize().unwrap();
                    drop(black_box(c));
                })
            })),
        },
        Row {
            name: "SharedContext::enter (push+pop)",
            unit: Unit::Ns,
            ours: Box::new(move || {
                per_op(20000, || {
                    shared
                        // SAFETY: the handle is only returned, for `black_box`.
                        .enter(|c| Ok::<_, Error>(unsafe { black_box(c).as_raw() }))
                        .unwrap();
                })
            }),
            raw: Box::new(move || {
                per_op(20000, || unsafe {
                    let mut c = std::ptr::null_mut();
                    ok(sys::cuCtxPushCurrent_v2(raw_ctx));
                    ok(sys::cuCtxPopCurrent_v2(&mut c));
                })
            }),
            cudarc: Some(Box::new(|| {
                per_op(20000, || rctx.bind_to_thread().unwrap())
            })),
        },
        Row {
            name: "with_raw_context on an existing context",
            unit: Unit::Ns,
            // SAFETY: the primary context is retained for the whole benchmark.
            ours: Box::new(move || {
                per_op(20000, || unsafe {
                    with_raw_context(raw_ctx.cast(), |c| Ok::<_, Error>(black_box(c).as_raw()))
                        .unwrap();
                })
            }),
            raw: Box::new(move || {
                per_op(20000, || unsafe {
                    let mut c = std::ptr::null_mut();
                    ok(sys::cuCtxPushCurrent_v2(raw_ctx));
                    ok(sys::cuCtxPopCurrent_v2(&mut c));
                })
            }),
            cudarc: None,
        },
        Row {
            name: "alloc+free 1 KiB, DeviceBuffer (raw: pool alloc+free on the legacy stream)",
            unit: Unit::Ns,
            // SAFETY: never read.
            ours: Box::new(move || {
                per_op(1000, || {
                    drop(black_box(
                        unsafe { DeviceBuffer::<u8>::uninitialized(ctx, one_kib) }.unwrap(),
                    ))
                })
            }),
            // the same driver calls: the crate's pool, the context's legacy stream
            raw: Box::new(move || {
                per_op(1000, || unsafe {
                    let mut p = 0;
                    ok(cu_mem_alloc_from_pool_async(
                        &mut p,
                        one_kib,
                        raw_pool,
                        std::ptr::null_mut(),
                    ));
                    ok(cu_mem_free_async(black_box(p), std::ptr::null_mut()));
                })
            }),
            // SAFETY: never read. (cudarc allocates from the stream's pool when it can.)
            cudarc: Some(Box::new(|| {
                per_op(1000, || {
                    drop(black_box(unsafe { rstream.alloc::<u8>(one_kib) }.unwrap()))
                })
            })),
        },
        Row {
            name: "alloc+free 1 KiB, stream-ordered (100 per sync)",
            unit: Unit::Ns,
            ours: Box::new(|| {
                per_op(10, || {
                    stream
                        .scope(|s| {
                            for _ in 0..100 {
                                // SAFETY: never read.
                                black_box(unsafe { s.alloc::<u8>(one_kib) }?);
                            }
                            Ok::<_, Error>(())
                        })
                        .unwrap()
                }) / 100.0
            }),
            raw: Box::new(move || {
                per_op(10, || unsafe {
                    let mut ptrs = [0; 100];
                    for p in &mut ptrs {
                        ok(cu_mem_alloc_from_pool_async(
                            p, one_kib, raw_pool, raw_stream,
                        ));
                    }
                    ok(sys::cuStreamSynchronize(raw_stream));
                    for p in ptrs {
                        ok(cu_mem_free_async(p, raw_stream));
                    }
                }) / 100.0
            }),
            cudarc: Some(Box::new(|| {
                per_op(10, || {
                    // SAFETY: never read.
                    let v: Vec<_> = (0..100)
                        .map(|_| unsafe { rstream.alloc::<u8>(one_kib) }.unwrap())
                        .collect();
                    rstream.synchronize().unwrap();
                    drop(black_box(v));
                }) / 100.0
            })),
        },
        Row {
            name: "4 B host-to-device + device-to-host, synchronous",
            unit: Unit::Ns,
            ours: Box::new({
                let mut small = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
                move || {
                    let mut back = [0u32];
                    per_op(2000, || {
                        small.copy_from_host(&[7]).unwrap();
                        small.copy_to_host(&mut back).unwrap();
                    })
                }
            }),
            raw: Box::new(move || {
                let (x, mut back) = (7u32, 0u32);
                per_op(2000, || unsafe {
                    ok(sys::cuMemcpyHtoD_v2(
                        raw_small,
                        (&x as *const u32).cast(),
                        4,
                    ));
                    ok(sys::cuMemcpyDtoH_v2(
                        (&mut back as *mut u32).cast(),
                        raw_small,
                        4,
                    ));
                })
            }),
            cudarc: Some(Box::new({
                let mut rsmall = rs.alloc_zeros::<u32>(1).expect("cudarc alloc");
                move || {
                    let mut back = [0u32];
                    per_op(2000, || {
                        rs.memcpy_htod(&[7u32], &mut rsmall).unwrap();
                        rs.memcpy_dtoh(&rsmall, &mut back).unwrap();
                        rs.synchronize().unwrap();
                    })
                }
            })),
        },
        Row {
            name: "the same, raw made complete (+ cuStreamSynchronize(NULL) after the copy to the device)",
            unit: Unit::Ns,
            ours: Box::new({
                let mut small = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
                move || {
                    let mut back = [0u32];
                    per_op(2000, || {
                        small.copy_from_host(&[7]).unwrap();
                        small.copy_to_host(&mut back).unwrap();
                    })
                }
            }),
            raw: Box::new(move || {
                let (x, mut back) = (7u32, 0u32);
                per_op(2000, || unsafe {
                    ok(sys::cuMemcpyHtoD_v2(
                        raw_small,
                        (&x as *const u32).cast(),
                        4,
                    ));
                    ok(sys::cuStreamSynchronize(std::ptr::null_mut()));
                    ok(sys::cuMemcpyDtoH_v2(
                        (&mut back as *mut u32).cast(),
                        raw_small,
                        4,
                    ));
                })
            }),
            cudarc: None,
        },
        Row {
            name: "4 B async host-to-device + stream sync",
            unit: Unit::Ns,
            ours: Box::new({
                let mut dev = DeviceBuffer::<f32>::zeroed(ctx, 1)?;
                move || {
                    let x = [1.0f32];
                    per_op(2000, || {
                        st.scope(|s| s.copy_from_host(&mut dev, &x)).unwrap()
                    })
                }
            }),
            raw: Box::new(move || {
                let x = 1.0f32;
                per_op(2000, || unsafe {
                    ok(sys::cuMemcpyHtoDAsync_v2(
                        raw_small,
                        (&x as *const f32).cast(),
                        4,
                        raw_stream,
                    ));
                    ok(sys::cuStreamSynchronize(raw_stream));
                })
            }),
            cudarc: Some(Box::new({
                let mut rdev = rs.alloc_zeros::<f32>(1).expect("cudarc alloc");
                move || {
                    let x = [1.0f32];
                    per_op(2000, || {
                        rs.memcpy_htod(&x, &mut rdev).unwrap();
                        rs.synchronize().unwrap();
                    })
                }
            })),
        },
        Row {
            name: "launch, empty kernel, 1 slice (2 params), 100 per sync",
            unit: Unit::Ns,
            ours: Box::new({
                let mut dev4 = DeviceBuffer::<f32>::zeroed(ctx, 4)?;
                move || {
                    let cfg = LaunchConfig::linear(1, 32);
                    per_op(20, || {
                        st.scope(|s| {
                            let d = s.bind_mut(&mut dev4);
                            for _ in 0..100 {
                                s.launch(empty, cfg, (d,))?;
                            }
                            Ok::<_, Error>(())
                        })
                        .unwrap()
                    }) / 100.0
                }
            }),
            raw: Box::new(move || {
                per_op(20, || unsafe {
                    for _ in 0..100 {
                        let (mut p, mut n) = (raw_small, 4u64);
                        let mut params = [
                            (&mut p as *mut u64).cast::<c_void>(),
                            (&mut n as *mut u64).cast(),
                        ];
                        ok(sys::cuLaunchKernel(
                            raw_empty,
                            1,
                            1,
                            1,
                            32,
                            1,
                            1,
                            0,
                            raw_stream,
                            params.as_mut_ptr(),
                            std::ptr::null_mut(),
                        ));
                    }
                    ok(sys::cuStreamSynchronize(raw_stream));
                }) / 100.0
            }),
            cudarc: Some(Box::new({
                let mut rdev4 = rs.alloc_zeros::<f32>(4).expect("cudarc alloc");
                move || {
                    use rc::PushKernelArg;
                    let cfg = rc::LaunchConfig {
                        grid_dim: (1, 1, 1),
                        block_dim: (32, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    let n = 4u64;
                    per_op(20, || {
                        for _ in 0..100 {
                            let mut b = rs.launch_builder(rempty);
                            b.arg(&mut rdev4).arg(&n);
                            // SAFETY: empty(float*, size_t) touches nothing.
                            unsafe { b.launch(cfg) }.unwrap();
                        }
                        rs.synchronize().unwrap();
                    }) / 100.0
                }
            })),
        },
        Row {
            name: "launch, empty kernel, 4 slices (8 params), 100 per sync",
            unit: Unit::Ns,
            ours: Box::new({
                let mut dev4 = DeviceBuffer::<f32>::zeroed(ctx, 4)?;
                let mut other = DeviceBuffer::<f32>::zeroed(ctx, 4)?;
                // four distinct buffers, as cudarc's column has: an `Out` may not overlap
                // another argument
                let (in1, in2) = (
                    DeviceBuffer::<f32>::zeroed(ctx, 4)?,
                    DeviceBuffer::<f32>::zeroed(ctx, 4)?,
                );
                move || {
                    let cfg = LaunchConfig::linear(1, 32);
                    per_op(20, || {
                        st.scope(|s| {
                            let (a, b) = (s.bind_mut(&mut dev4), s.bind_mut(&mut other));
                            for _ in 0..100 {
                                s.launch(empty8, cfg, (a, b, &in1, &in2))?;
                            }
                            Ok::<_, Error>(())
                        })
                        .unwrap()
                    }) / 100.0
                }
            }),
            raw: Box::new(move || {
                per_op(20, || unsafe {
                    for _ in 0..100 {
                        let mut v = [raw_small, 4u64, raw_small, 4, raw_small, 4, raw_small, 4];
                        let mut params = [std::ptr::null_mut::<c_void>(); 8];
                        for (p, x) in params.iter_mut().zip(v.iter_mut()) {
                            *p = (x as *mut u64).cast();
                        }
                        ok(sys::cuLaunchKernel(
                            raw_empty8,
                            1,
                            1,
                            1,
                            32,
                            1,
                            1,
                            0,
                            raw_stream,
                            params.as_mut_ptr(),
                            std::ptr::null_mut(),
                        ));
                    }
                    ok(sys::cuStreamSynchronize(raw_stream));
                }) / 100.0
            }),
            cudarc: Some(Box::new({
                let (mut a, mut b2) = (
                    rs.alloc_zeros::<f32>(4).expect("alloc"),
                    rs.alloc_zeros::<f32>(4).expect("alloc"),
                );
                let (c, d) = (
                    rs.alloc_zeros::<f32>(4).expect("alloc"),
                    rs.alloc_zeros::<f32>(4).expect("alloc"),
                );
                move || {
                    use rc::PushKernelArg;
                    let cfg = rc::LaunchConfig {
                        grid_dim: (1, 1, 1),
                        block_dim: (32, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    let n = 4u64;
                    per_op(20, || {
                        for _ in 0..100 {
                            let mut b = rs.launch_builder(rempty8);
                            b.arg(&mut a)
                                .arg(&n)
                                .arg(&mut b2)
                                .arg(&n)
                                .arg(&c)
                                .arg(&n)
                                .arg(&d)
                                .arg(&n);
                            // SAFETY: empty8 touches nothing.
                            unsafe { b.launch(cfg) }.unwrap();
                        }
                        rs.synchronize().unwrap();
                    }) / 100.0
                }
            })),
        },
        Row {
            name: "stream synchronize, idle",
            unit: Unit::Ns,
            ours: Box::new(|| per_op(5000, || stream.synchronize().unwrap())),
            raw: Box::new(move || {
                per_op(5000, || ok(unsafe { sys::cuStreamSynchronize(raw_stream) }))
            }),
            cudarc: Some(Box::new(|| per_op(5000, || rstream.synchronize().unwrap()))),
        },
        Row {
            name: "event record (batches of 200 on an idle stream)",
            unit: Unit::Ns,
            ours: Box::new(|| {
                stream.synchronize().unwrap();
                per_op(200, || {
                    let _ = ev_rec.record(&stream).unwrap();
                })
            }),
            raw: Box::new(move || {
                ok(unsafe { sys::cuStreamSynchronize(raw_stream) });
                per_op(200, || {
                    ok(unsafe { sys::cuEventRecord(raw_ev_rec, raw_stream) })
                })
            }),
            cudarc: Some(Box::new(|| {
                rstream.synchronize().unwrap();
                per_op(200, || rev_b.record(&rstream).unwrap())
            })),
        },
        Row {
            name: "event elapsed time",
            unit: Unit::Ns,
            ours: Box::new(|| {
                stream.synchronize().unwrap();
                per_op(20000, || {
                    black_box(rec_a.elapsed(&rec_b).unwrap());
                })
            }),
            raw: Box::new(move || {
                ok(unsafe { sys::cuStreamSynchronize(raw_stream) });
                per_op(20000, || unsafe {
                    let mut ms = 0.0;
                    ok(sys::cuEventElapsedTime(&mut ms, raw_ev_a, raw_ev_b));
                    black_box(ms);
                })
            }),
            cudarc: Some(Box::new(|| {
                rstream.synchronize().unwrap();
                per_op(20000, || {
                    black_box(rev_a.elapsed_ms(rev_b).unwrap());
                })
            })),
        },
        Row {
            name: "256 MiB host-to-device from pinned memory",
            unit: Unit::GBps,
            ours: Box::new(move || {
                let mut big = big.borrow_mut();
                bandwidth(BIG, || {
                    st.scope(|s| s.copy_from_host(&mut **big, pinned)).unwrap()
                })
            }),
            raw: Box::new(move || {
                bandwidth(BIG, || unsafe {
                    ok(sys::cuMemcpyHtoDAsync_v2(
                        raw_big, raw_pinned, BIG, raw_stream,
                    ));
                    ok(sys::cuStreamSynchronize(raw_stream));
                })
            }),
            cudarc: Some(Box::new(|| {
                let (pinned, mut big) = (rpinned.borrow(), rbig.borrow_mut());
                bandwidth(BIG, || {
                    rs.memcpy_htod(&*pinned, &mut *big).unwrap();
                    rs.synchronize().unwrap();
                })
            })),
        },
        Row {
            name: "256 MiB device-to-host into pinned memory",
            unit: Unit::GBps,
            ours: Box::new(move || {
                let (big, mut back) = (big.borrow(), pinned_back.borrow_mut());
                bandwidth(BIG, || {
                    st.scope(|s| s.copy_to_host(&mut back, &**big)).unwrap()
                })
            }),
            raw: Box::new(move || {
                bandwidth(BIG, || unsafe {
                    ok(sys::cuMemcpyDtoHAsync_v2(
                        raw_pinned, raw_big, BIG, raw_stream,
                    ));
                    ok(sys::cuStreamSynchronize(raw_stream));
                })
            }),
            cudarc: Some(Box::new(|| {
                let (mut pinned, big) = (rpinned.borrow_mut(), rbig.borrow());
                bandwidth(BIG, || {
                    rs.memcpy_dtoh(&*big, &mut *pinned).unwrap();
                    rs.synchronize().unwrap();
                })
            })),
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

    // ---- report ------------------------------------------------------------------------
    let mut table = String::new();
    table.push_str(
        "| operation | cuda-brand | raw driver | cudarc | cuda-brand / raw | cuda-brand / cudarc |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (row, s) in rows.iter().zip(samples) {
        let [ours, raw, theirs] = s.map(|v| if v.is_empty() { f64::NAN } else { median(v) });
        let fmt = |v: f64| match (v.is_nan(), row.unit) {
            (true, _) => "n/a".to_string(),
            (false, Unit::Ns) => format!("{v:.0} ns"),
            (false, Unit::GBps) => format!("{v:.1} GB/s"),
        };
        // a ratio above 1 is always "cuda-brand costs more"
        let ratio = |a: f64, b: f64| match (b.is_nan(), row.unit) {
            (true, _) => "n/a".to_string(),
            (false, Unit::Ns) => format!("{:.3}", a / b),
            (false, Unit::GBps) => format!("{:.3}", b / a),
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
        "{} (driver CUDA {}), medians of {ROUNDS} rounds, the three interleaved; ratios above 1 mean cuda-brand is slower (for GB/s: inverse bandwidth)\n\n",
        device.name()?,
        cuda_brand::driver_version()?
    );
    print!("{header}{table}");
    if let Some(path) = out {
        std::fs::write(path, format!("{header}{table}")).expect("writing the table");
        eprintln!("table written to {path}");
    }
    ok(unsafe { sys::cuMemFree_v2(raw_small) });
    ok(unsafe { sys::cuMemFree_v2(raw_big) });
    ok(unsafe { sys::cuMemFreeHost(raw_pinned) });
    drop(rows);
    Ok(())
}

fn sys_rc_timing() -> rc::sys::CUevent_flags {
    rc::sys::CUevent_flags::CU_EVENT_DEFAULT
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
