//! The phases cost nothing where a program runs: the same work queued in a scope of a
//! preallocated stream (the run phase of `with_phases`), in a scope of a plain stream of
//! the same context, and with raw driver calls, interleaved (order rotating), `ROUNDS`
//! rounds, medians:
//!
//! * 100 launches of an empty kernel on a 4-element buffer, then the wait (ns per launch);
//! * a 4 KiB copy to the device and back through pinned memory, then the wait (ns per
//!   round trip).
//!
//! `cd bench && cargo bench --bench phases [-- --out FILE.md]`. Without a GPU it prints the
//! driver's error and exits 0.

use std::ffi::c_void;
use std::time::Instant;

use cuda_brand::phase::StreamKind;
use cuda_brand::{
    ContextFlags, DeviceBuffer, Error, Kernel, LaunchConfig, Out, PinnedBuffer, Stream,
    with_phases, with_raw_context,
};
use cuda_driver_sys as sys;

const PTX: &str = include_str!("../../kernels/kernels.ptx");
const ROUNDS: usize = 31;

#[track_caller]
fn ok(r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

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

/// 100 launches of `empty` on `dev`, then the scope's wait.
fn launches<'ctx, K: StreamKind>(
    stream: &Stream<'ctx, K>,
    empty: &Kernel<'_, 'ctx, (Out<f32>,)>,
    dev: &mut DeviceBuffer<'ctx, f32>,
) {
    let cfg = LaunchConfig::linear(1, 32);
    stream
        .scope(|s| {
            let d = s.bind_mut(dev);
            for _ in 0..100 {
                s.launch(empty, cfg, (d,))?;
            }
            Ok::<_, Error>(())
        })
        .unwrap();
}

/// 4 KiB to the device and back through pinned memory, then the scope's wait.
fn round_trip<'ctx, K: StreamKind>(
    stream: &Stream<'ctx, K>,
    pinned: &mut PinnedBuffer<'_, u32>,
    dev: &mut DeviceBuffer<'ctx, u32>,
) {
    stream
        .scope(|s| {
            let d = s.bind_mut(dev);
            let (up, down) = pinned.split_at_mut(512);
            s.copy_from_host(d.slice(..512), &*up)?;
            s.copy_to_host(down, d.slice(..512).into_ref())
        })
        .unwrap();
}

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match cuda_brand::Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("phases: no benchmark without a GPU: {e}");
            return;
        }
    };
    let result = with_phases(&device, ContextFlags::default(), |phases| {
        let ((stream, module, mut dev4, mut dev_u32), run) = phases.setup(|ctx| {
            Ok::<_, Error>((
                ctx.new_stream()?,
                ctx.module_from_ptx(PTX)?,
                ctx.zeroed::<f32>(4)?,
                ctx.zeroed::<u32>(1024)?,
            ))
        })?;
        // SAFETY: empty(float*, size_t) touches nothing.
        let empty = unsafe { module.kernel::<(Out<f32>,)>("empty") }?;
        // SAFETY (of the raw handles and addresses here): the raw column uses them while
        // their values live, destroys and frees none of them, and touches the buffers only
        // outside the scopes of the other columns.
        let raw_ctx = unsafe { run.as_raw() }.cast();
        // The plain column: a plain guard of the same context (and the pinned buffer both
        // columns use, since pinned memory is made with a plain guard).
        let measure = |plain: cuda_brand::ContextGuard<'_>| {
            let plain_stream = plain.new_stream()?;
            let mut plain_dev4 = plain.zeroed::<f32>(4)?;
            let mut plain_dev_u32 = plain.zeroed::<u32>(1024)?;
            let mut host = plain.pinned_zeroed::<u32>(1024)?;
            let plain_module = plain.module_from_ptx(PTX)?;
            // SAFETY: as above.
            let plain_empty = unsafe { plain_module.kernel::<(Out<f32>,)>("empty") }?;
            // SAFETY: as for `raw_ctx`.
            let (raw_stream, raw_empty, raw_dev4, raw_dev) = unsafe {
                (
                    stream.as_raw(),
                    empty.function().as_raw(),
                    dev4.as_device_ptr(),
                    dev_u32.as_device_ptr(),
                )
            };
            let host_ptr = host.as_mut_ptr();
            let mut rows = [
                [Vec::new(), Vec::new(), Vec::new()],
                [Vec::new(), Vec::new(), Vec::new()],
            ];
            for round in 0..ROUNDS {
                for k in 0..3 {
                    let which = (k + round) % 3;
                    let launch = match which {
                        0 => per_op(20, || launches(&stream, &empty, &mut dev4)) / 100.0,
                        1 => {
                            per_op(20, || {
                                launches(&plain_stream, &plain_empty, &mut plain_dev4)
                            }) / 100.0
                        }
                        _ => {
                            per_op(20, || {
                                for _ in 0..100 {
                                    let (mut p, mut n) = (raw_dev4, 4u64);
                                    let mut params = [
                                        (&mut p as *mut u64).cast::<c_void>(),
                                        (&mut n as *mut u64).cast(),
                                    ];
                                    // SAFETY: empty(float*, size_t) on a live stream.
                                    ok(unsafe {
                                        sys::cuLaunchKernel(
                                            raw_empty.cast(),
                                            1,
                                            1,
                                            1,
                                            32,
                                            1,
                                            1,
                                            0,
                                            raw_stream.cast(),
                                            params.as_mut_ptr(),
                                            std::ptr::null_mut(),
                                        )
                                    });
                                }
                                // SAFETY: a live stream.
                                ok(unsafe { sys::cuStreamSynchronize(raw_stream.cast()) });
                            }) / 100.0
                        }
                    };
                    rows[0][which].push(launch);
                    let trip = match which {
                        0 => per_op(200, || round_trip(&stream, &mut host, &mut dev_u32)),
                        1 => per_op(200, || {
                            round_trip(&plain_stream, &mut host, &mut plain_dev_u32)
                        }),
                        _ => per_op(200, || {
                            // SAFETY: 2 KiB each way between live pinned and device
                            // memory on a live stream, then its wait.
                            unsafe {
                                ok(sys::cuMemcpyHtoDAsync_v2(
                                    raw_dev,
                                    host_ptr.cast(),
                                    2048,
                                    raw_stream.cast(),
                                ));
                                ok(sys::cuMemcpyDtoHAsync_v2(
                                    host_ptr.add(512).cast(),
                                    raw_dev,
                                    2048,
                                    raw_stream.cast(),
                                ));
                                ok(sys::cuStreamSynchronize(raw_stream.cast()));
                            }
                        }),
                    };
                    rows[1][which].push(trip);
                }
            }
            let name = device.name()?;
            let mut table = format!(
                "{name} (driver CUDA {}), ns, medians of {ROUNDS} interleaved rounds\n\n| operation | run phase | plain | raw | run phase / raw | plain / raw |\n|---|---:|---:|---:|---:|---:|\n",
                cuda_brand::driver_version()?
            );
            for (label, r) in [
                "one launch (100, then the wait)",
                "4 KiB round trip, pinned",
            ]
            .iter()
            .zip(rows)
            {
                let [p, q, raw] = r.map(median);
                table.push_str(&format!(
                    "| {label} | {p:.0} | {q:.0} | {raw:.0} | {:.3} | {:.3} |\n",
                    p / raw,
                    q / raw
                ));
            }
            print!("{table}");
            if let Some(path) = &out {
                std::fs::write(path, table).expect("writing the table");
            }
            Ok::<_, Error>(())
        };
        // SAFETY: the phased context is alive for this whole closure, and nothing pops it.
        unsafe { with_raw_context(raw_ctx, measure) }
    });
    if let Err(e) = result {
        eprintln!("phases: {e}");
        std::process::exit(1);
    }
}
