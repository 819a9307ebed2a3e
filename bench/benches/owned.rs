//! The owning layer (`cuda_brand::owned`, issue 27) against the closure layer it wraps and
//! the raw driver calls under both, in one process: each row has an **owned** column (the
//! owning layer), a **branded** column (the same work through the closure layer's branded
//! values, in a blocking scope where there is stream work) and, where there is one, a
//! **raw** column (the same driver calls made directly through `cuda-driver-sys`). The three
//! run interleaved in rounds, the order rotating each round, round 0 a warm-up; the table
//! gives medians, the difference and the two ratios (above 1: the owning layer costs more).
//!
//! Everything runs in one `OwnedContext` of device 0's primary context, entered once for
//! the whole benchmark; its guard is the branded column's.
//!
//! * **The bind check**: `owned.bind(ctx)` (and `bind_mut`) + a trivial use (`len()`),
//!   against the same use of a branded `&DeviceBuffer` (goal: at most 2 ns per bind);
//!   `OwnedContext::enter` (push + pop) against `SharedContext::enter` and raw
//!   `cuCtxPushCurrent` + `cuCtxPopCurrent`.
//! * **Awaited batches**: 100 launches of the sample kernel `empty` in one batch
//!   (`Arc<OwnedStream>::submit`), awaited with the minimal executor below ([`block_on`]: a
//!   waker that unparks the thread, no runtime) or with `Pending::wait`, against the same
//!   100 launches in a blocking `Stream::scope` on the same stream (goal: at most 1.10x),
//!   and against 100 `cuLaunchKernel` + `cuStreamSynchronize`. The same with 1 launch per
//!   batch (awaited: the wake latency, a host function waking the thread). Then N = 1, 16,
//!   256 batches of 1 launch in flight at once on 4 streams (batch i on stream i mod 4; all
//!   submitted, then all awaited in order), against N blocking scopes one after another on
//!   the same streams, and against the N raw launches followed by one synchronization of
//!   each stream (the floor: nothing waits between launches).
//! * **Drops**: 1 KiB owned buffers dropped on a thread where their context is not current
//!   (the crate pushes it, frees, pops), against `DeviceBuffer` drops on their own thread
//!   (context current), against raw `cuMemFreeAsync` on the legacy stream (own thread), and
//!   against raw `cuCtxPushCurrent` + `cuMemFreeAsync` + `cuCtxPopCurrent` (the foreign
//!   thread), 100 per measurement, the allocations not timed.
//!
//! It checks what it can: every batch's result is `Ok` and gives its parts back, a
//! batch of `scale` launches with copies gives the right values (before and after the
//! rounds, awaited and waited for, 64 batches in flight on the 4 streams), and closing the
//! owned context at the end (the last handle) reports no error: no release failed, on any
//! thread. A wrong result panics with a message.
//!
//! `cd bench && cargo bench --bench owned [-- --out FILE.md]`; or build the binary where
//! cargo is (`cargo bench --no-run`) and run it with `--bench --out FILE.md` on the machine
//! with the GPU. Without a GPU it prints the driver's error and exits 0.

mod harness;

use std::ffi::c_void;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::sync::mpsc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer, OwnedKernel, OwnedStream, Pending};
use cuda_brand::{ContextGuard, Device, DeviceBuffer, Error, LaunchConfig, Out, samples};
use cuda_driver_sys as sys;
use harness::{median, per_op};

const ROUNDS: usize = 31;
/// `empty`'s launch: one block of 32 threads, on a 4-element buffer.
const CFG: LaunchConfig = LaunchConfig::linear(1, 32);
const LEN: usize = 4;
/// Streams the batches in flight are spread over.
const STREAMS: usize = 4;
/// The numbers of batches in flight at once.
const IN_FLIGHT: [usize; 3] = [1, 16, 256];
/// Buffers dropped per measurement, and their size.
const DROPS: usize = 100;
const DROP_BYTES: usize = 1024;

type Empty = (Out<f32>,);
type Scale = (Out<f32>, f32);
/// What a batch of `empty` launches owns: the buffer it writes (nothing) and the kernel.
type Launches = (OwnedDeviceBuffer<f32>, Arc<OwnedKernel<Empty>>);

#[track_caller]
fn ok(r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "a raw driver call failed");
}

// ---- the executor ------------------------------------------------------------------------

/// Wakes the thread that waits in [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread, parking it between polls: the smallest
/// executor there is (no runtime). A spurious unpark only costs one more poll.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

// ---- rows --------------------------------------------------------------------------------

type Measure<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// What a row is held to (the goals).
#[derive(Clone, Copy)]
enum Goal {
    /// owned − branded at most this many ns.
    Difference(f64),
    /// owned / branded at most this.
    Ratio(f64),
}

struct Row<'a> {
    name: String,
    goal: Option<Goal>,
    owned: Measure<'a>,
    branded: Measure<'a>,
    raw: Option<Measure<'a>>,
}

/// Runs every row `ROUNDS` times after a warm-up round, the three columns interleaved and
/// their order rotating each round; each row's medians (`NaN` for a column it lacks).
fn measure(rows: &mut [Row<'_>]) -> Vec<[f64; 3]> {
    let mut samples: Vec<[Vec<f64>; 3]> = rows.iter().map(|_| [vec![], vec![], vec![]]).collect();
    for round in 0..=ROUNDS {
        for (row, s) in rows.iter_mut().zip(samples.iter_mut()) {
            for k in 0..3 {
                let which = (k + round) % 3;
                let v = match which {
                    0 => (row.owned)(),
                    1 => (row.branded)(),
                    _ => match row.raw.as_mut() {
                        Some(f) => f(),
                        None => continue,
                    },
                };
                if round > 0 {
                    s[which].push(v); // round 0 is the warm-up
                }
            }
        }
    }
    samples
        .into_iter()
        .map(|s| s.map(|v| if v.is_empty() { f64::NAN } else { median(v) }))
        .collect()
}

fn ns(v: f64) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v >= 10_000.0 {
        format!("{:.1} µs", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0} ns")
    } else {
        format!("{v:.2} ns")
    }
}

/// The Markdown table: the three columns, owned − branded, owned / branded, owned / raw,
/// and the goal of the rows that have one.
fn table(rows: &[Row<'_>], medians: &[[f64; 3]]) -> String {
    let mut table = String::from(
        "| operation | owned | branded | raw driver | owned − branded | owned / branded | owned / raw | goal |\n|---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (row, &[owned, branded, raw]) in rows.iter().zip(medians) {
        let ratio = |b: f64| {
            if b.is_nan() {
                "n/a".to_string()
            } else {
                format!("{:.3}", owned / b)
            }
        };
        let goal = match row.goal {
            None => String::new(),
            Some(Goal::Difference(max)) => format!(
                "owned − branded ≤ {max} ns: {}",
                if owned - branded <= max {
                    "met"
                } else {
                    "NOT met"
                }
            ),
            Some(Goal::Ratio(max)) => format!(
                "owned / branded ≤ {max:.2}: {}",
                if owned / branded <= max {
                    "met"
                } else {
                    "NOT met"
                }
            ),
        };
        let diff = owned - branded;
        let diff = if diff.abs() >= 100.0 {
            format!("{diff:+.0} ns")
        } else {
            format!("{diff:+.2} ns")
        };
        table.push_str(&format!(
            "| {} | {} | {} | {} | {diff} | {} | {} | {goal} |\n",
            row.name,
            ns(owned),
            ns(branded),
            ns(raw),
            ratio(branded),
            ratio(raw),
        ));
    }
    table
}

// ---- the work ------------------------------------------------------------------------------

/// Queues `n` launches of `empty` on `stream` as one batch.
fn submit_launches(stream: &Arc<OwnedStream>, batch: Launches, n: usize) -> Pending<Launches> {
    stream.submit(batch, move |s, (d, empty)| {
        for _ in 0..n {
            s.launch(empty, CFG, (d,))?;
        }
        Ok(())
    })
}

/// A finished batch's parts, after checking its result.
#[track_caller]
fn done<B>((result, batch): (Result<(), Error>, B)) -> B {
    if let Err(e) = result {
        panic!("an awaited batch failed: {e}");
    }
    batch
}

/// `n` raw launches of `empty` on `stream` (the buffer at `p`, 4 elements).
///
/// # Safety
/// `f` is `empty`, `stream` a live stream of the current context, `p` 4 floats of it.
unsafe fn raw_launches(f: sys::CUfunction, stream: sys::CUstream, p: sys::CUdeviceptr, n: usize) {
    for _ in 0..n {
        let (mut p, mut len) = (p, LEN as u64);
        let mut params = [
            (&mut p as *mut sys::CUdeviceptr).cast::<c_void>(),
            (&mut len as *mut u64).cast(),
        ];
        // SAFETY: the caller's promise; the parameters match empty(float*, size_t).
        ok(unsafe {
            sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                32,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        });
    }
}

/// The values check: `batches` batches in flight on `streams` (batch i on stream i mod the
/// count), each copying 1.0s in, launching `scale` by 2 ten times and copying back, awaited
/// (or waited for, `wait`); every result must be 1024.
fn check_values(
    streams: &[Arc<OwnedStream>],
    scale: &Arc<OwnedKernel<Scale>>,
    bufs: &mut Vec<OwnedDeviceBuffer<f32>>,
    batches: usize,
    wait: bool,
) {
    assert!(bufs.len() >= batches);
    let pending: Vec<_> = bufs
        .drain(..batches)
        .enumerate()
        .map(|(i, buf)| {
            let batch = (buf, vec![1.0f32; LEN], Arc::clone(scale));
            streams[i % streams.len()].submit(batch, |s, (d, host, scale)| {
                s.copy_from_host_view(d, host.into_ref())?;
                for _ in 0..10 {
                    s.launch(scale, CFG, (d, 2.0))?;
                }
                s.copy_to_host_view(host, d.into_ref())
            })
        })
        .collect();
    for (i, p) in pending.into_iter().enumerate() {
        let (buf, host, _) = done(if wait { p.wait() } else { block_on(p) });
        assert_eq!(
            host,
            vec![1024.0f32; LEN],
            "batch {i} of {batches} (wait: {wait}): scale by 2, ten times, of 1.0 must give 1024 once the batch is done"
        );
        bufs.push(buf);
    }
}

// ---- the foreign thread ----------------------------------------------------------------------

/// What the foreign thread drops (and times).
enum Job {
    Owned(Vec<OwnedDeviceBuffer<u8>>),
    /// The context (as an address) and raw pool pointers to free in it.
    Raw(usize, Vec<sys::CUdeviceptr>),
}

/// A thread where no context is current: drops what it is sent, returns ns per drop.
fn foreign_thread() -> (
    mpsc::Sender<Job>,
    mpsc::Receiver<f64>,
    std::thread::JoinHandle<()>,
) {
    let (jobs, inbox) = mpsc::channel::<Job>();
    let (outbox, times) = mpsc::channel::<f64>();
    let worker = std::thread::spawn(move || {
        for job in inbox {
            let t = match job {
                Job::Owned(bufs) => {
                    let n = bufs.len();
                    let t = Instant::now();
                    drop(bufs);
                    t.elapsed().as_nanos() as f64 / n as f64
                }
                Job::Raw(ctx, ptrs) => {
                    let n = ptrs.len();
                    let ctx = ctx as sys::CUcontext;
                    let t = Instant::now();
                    for p in ptrs {
                        let mut popped = std::ptr::null_mut();
                        // SAFETY: the context is alive (the owned context's count, held by
                        // the main thread until this thread is joined); `p` is pool memory
                        // of it that nothing uses.
                        unsafe {
                            ok(sys::cuCtxPushCurrent_v2(ctx));
                            ok(cu_mem_free_async(p, std::ptr::null_mut()));
                            ok(sys::cuCtxPopCurrent_v2(&mut popped));
                        }
                        assert_eq!(popped, ctx, "the raw column popped another context");
                    }
                    t.elapsed().as_nanos() as f64 / n as f64
                }
            };
            if outbox.send(t).is_err() {
                return;
            }
        }
    });
    (jobs, times, worker)
}

// ---- main ------------------------------------------------------------------------------------

fn main() {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("owned: no benchmark without a GPU: {e}");
            return;
        }
    };
    let home = OwnedContext::primary(&device).unwrap_or_else(|e| {
        eprintln!("owned: {e}");
        std::process::exit(1);
    });
    if let Err(e) = home.enter(|ctx| run(ctx, &home, &device, out.as_deref())) {
        eprintln!("owned: {e}");
        std::process::exit(1);
    }
    // the last handle: the teardown's result covers every release that failed on any thread
    assert_eq!(
        home.handles(),
        1,
        "a handle of the owned context outlived the benchmark"
    );
    if let Err(e) = home.close() {
        panic!("closing the owned context reported an error: {e}");
    }
}

fn run(
    ctx: ContextGuard<'_>,
    home: &OwnedContext,
    device: &Device,
    out: Option<&str>,
) -> Result<(), Error> {
    assert!(home.is(ctx), "the entered guard is of the owned context");
    // SAFETY (of the raw handles here): the raw column uses them while their values live,
    // destroys none of them, and touches only memory of its own or memory no scope uses.
    let raw_ctx = unsafe { ctx.as_raw() };

    // ---- setup: the owned values, and their raw handles ---------------------------------
    let streams: Vec<Arc<OwnedStream>> = (0..STREAMS)
        .map(|_| Ok::<_, Error>(Arc::new(home.unbind(ctx, ctx.new_stream()?)?)))
        .collect::<Result<_, _>>()?;
    let module = Arc::new(home.unbind(ctx, ctx.module_from_ptx(samples::KERNELS_PTX)?)?);
    // SAFETY: empty(float *p, size_t p_len) touches nothing.
    let empty = Arc::new(unsafe { OwnedKernel::<Empty>::new(&module, "empty") }?);
    // SAFETY: scale(float *x, size_t x_len, float k) writes x[0..x_len] only.
    let scale = Arc::new(unsafe { OwnedKernel::<Scale>::new(&module, "scale") }?);
    let owned_buf = |len: usize| -> Result<OwnedDeviceBuffer<f32>, Error> {
        home.unbind(ctx, ctx.zeroed::<f32>(len)?)
    };
    let owned_bufs = |n: usize| {
        (0..n)
            .map(|_| owned_buf(LEN))
            .collect::<Result<Vec<_>, _>>()
    };

    // the branded views of the same stream and kernel
    let stream0 = streams[0].bind(ctx)?;
    let branded_streams = streams
        .iter()
        .map(|s| s.bind(ctx))
        .collect::<Result<Vec<_>, _>>()?;
    let branded_empty = empty.bind(ctx)?;
    // SAFETY: as for `raw_ctx`.
    let raw_streams: Vec<sys::CUstream> = branded_streams
        .iter()
        .map(|s| unsafe { s.as_raw() }.cast())
        .collect();
    // SAFETY: as for `raw_ctx`; the raw launches keep `empty`'s declaration.
    let raw_empty: sys::CUfunction = unsafe { branded_empty.function().as_raw() }.cast();
    let mut raw_buf: sys::CUdeviceptr = 0;
    // SAFETY: an out-pointer to a live local; the context is current.
    ok(unsafe { sys::cuMemAlloc_v2(&mut raw_buf, LEN * 4) });
    // SAFETY: as for `raw_ctx` (the crate's pool of the device lives as long as the process).
    let raw_pool = unsafe { cuda_brand::MemoryPool::of_device(ctx)?.as_raw() }.cast::<c_void>();
    // A live allocation, so that the 1 KiB frees meet a pool in use (as in overhead.rs).
    let _keep = ctx.zeroed::<u8>(1 << 20)?;

    // ---- the values check, before ----------------------------------------------------------
    let mut check_bufs = owned_bufs(64)?;
    check_values(&streams, &scale, &mut check_bufs, 64, false);
    check_values(&streams, &scale, &mut check_bufs, 64, true);
    check_values(&streams[..1], &scale, &mut check_bufs, 1, false);

    let (jobs, times, worker) = foreign_thread();
    let foreign = |job: Job| -> f64 {
        jobs.send(job).expect("the foreign thread is gone");
        times.recv().expect("the foreign thread is gone")
    };
    let foreign = &foreign;
    let shared = ctx.share();
    let (streams, empty) = (&streams, &empty);
    let (raw_streams, raw_stream0) = (&raw_streams, raw_streams[0]);
    let (branded_streams, branded_empty) = (&branded_streams, branded_empty);
    // counts every batch handed back, checked at the end
    let returned = std::cell::Cell::new(0usize);
    let returned = &returned;

    let mut rows: Vec<Row<'_>> = Vec::new();

    // ---- the bind check -------------------------------------------------------------------
    rows.push(Row {
        name: "bind + len(): `owned.bind(ctx)?.len()` / `(&DeviceBuffer).len()`".into(),
        goal: Some(Goal::Difference(2.0)),
        owned: Box::new({
            let buf = owned_buf(LEN)?;
            move || {
                per_op(1_000_000, || {
                    let b = black_box(&buf)
                        .bind(black_box(ctx))
                        .expect("bind refused the handle's own context");
                    black_box(b.len());
                })
            }
        }),
        branded: Box::new({
            let buf = ctx.zeroed::<f32>(LEN)?;
            move || {
                per_op(1_000_000, || {
                    black_box(ctx);
                    black_box(black_box(&buf).len());
                })
            }
        }),
        raw: None,
    });
    rows.push(Row {
        name: "bind_mut + len(): `owned.bind_mut(ctx)?.len()` / `(&mut DeviceBuffer).len()`".into(),
        goal: Some(Goal::Difference(2.0)),
        owned: Box::new({
            let mut buf = owned_buf(LEN)?;
            move || {
                per_op(1_000_000, || {
                    let b = black_box(&mut buf)
                        .bind_mut(black_box(ctx))
                        .expect("bind_mut refused the handle's own context");
                    black_box(b.len());
                })
            }
        }),
        branded: Box::new({
            let mut buf = ctx.zeroed::<f32>(LEN)?;
            move || {
                per_op(1_000_000, || {
                    black_box(ctx);
                    black_box(black_box(&mut buf).len());
                })
            }
        }),
        raw: None,
    });
    rows.push(Row {
        name: "enter (push+pop): `OwnedContext::enter` / `SharedContext::enter` / raw".into(),
        goal: None,
        owned: Box::new(move || {
            per_op(20_000, || {
                home
                    // SAFETY: the handle is only returned, for `black_box`.
                    .enter(|c| Ok::<_, Error>(unsafe { black_box(c).as_raw() }))
                    .expect("OwnedContext::enter");
            })
        }),
        branded: Box::new(move || {
            per_op(20_000, || {
                shared
                    // SAFETY: the handle is only returned, for `black_box`.
                    .enter(|c| Ok::<_, Error>(unsafe { black_box(c).as_raw() }))
                    .expect("SharedContext::enter");
            })
        }),
        raw: Some(Box::new(move || {
            per_op(20_000, || unsafe {
                let mut c = std::ptr::null_mut();
                ok(sys::cuCtxPushCurrent_v2(raw_ctx.cast()));
                ok(sys::cuCtxPopCurrent_v2(&mut c));
            })
        })),
    });

    // ---- awaited batches on one stream ----------------------------------------------------
    // (launches per batch, batches per measurement)
    for (launches, reps) in [(100usize, 20usize), (1, 200)] {
        for waited in [false, true] {
            let how = if waited {
                "`Pending::wait()`"
            } else {
                "awaited (`block_on`)"
            };
            let name = if launches == 1 {
                format!(
                    "1 launch per batch, {how}{}, per batch",
                    if waited { "" } else { ": the wake latency" }
                )
            } else {
                format!("{launches} launches of `empty` in one batch, {how}, per launch")
            };
            let per = if launches == 1 { 1.0 } else { launches as f64 };
            rows.push(Row {
                name,
                goal: (launches == 100).then_some(Goal::Ratio(1.10)),
                owned: Box::new({
                    let mut batch = Some((owned_buf(LEN)?, Arc::clone(empty)));
                    move || {
                        per_op(reps, || {
                            let b = batch.take().expect("the batch came back");
                            let p = submit_launches(&streams[0], b, launches);
                            batch = Some(done(if waited { p.wait() } else { block_on(p) }));
                            returned.set(returned.get() + 1);
                        }) / per
                    }
                }),
                branded: Box::new({
                    let mut buf = ctx.zeroed::<f32>(LEN)?;
                    move || {
                        per_op(reps, || {
                            stream0
                                .scope(|s| {
                                    let d = s.bind_mut(&mut buf);
                                    for _ in 0..launches {
                                        s.launch(branded_empty, CFG, (d,))?;
                                    }
                                    Ok::<_, Error>(())
                                })
                                .expect("the blocking scope failed");
                        }) / per
                    }
                }),
                raw: Some(Box::new(move || {
                    per_op(reps, || unsafe {
                        raw_launches(raw_empty, raw_stream0, raw_buf, launches);
                        ok(sys::cuStreamSynchronize(raw_stream0));
                    }) / per
                })),
            });
        }
    }

    // ---- batches in flight on 4 streams ----------------------------------------------------
    for n in IN_FLIGHT {
        // about 2 ms of work per measurement
        let reps = (200 / n).max(4);
        rows.push(Row {
            name: format!(
                "{n} batch{} of 1 launch in flight on {STREAMS} streams, all submitted, then all awaited, per batch (branded: {n} blocking scope{}; raw: the launches, then {STREAMS} syncs)",
                if n == 1 { "" } else { "es" },
                if n == 1 { "" } else { "s" },
            ),
            goal: None,
            owned: Box::new({
                let mut bufs = owned_bufs(n)?;
                move || {
                    per_op(reps, || {
                        let pending: Vec<_> = bufs
                            .drain(..)
                            .enumerate()
                            .map(|(i, buf)| {
                                submit_launches(&streams[i % STREAMS], (buf, Arc::clone(empty)), 1)
                            })
                            .collect();
                        for p in pending {
                            bufs.push(done(block_on(p)).0);
                            returned.set(returned.get() + 1);
                        }
                        assert_eq!(bufs.len(), n, "every batch gave its buffer back");
                    }) / n as f64
                }
            }),
            branded: Box::new({
                let mut bufs = (0..STREAMS)
                    .map(|_| ctx.zeroed::<f32>(LEN))
                    .collect::<Result<Vec<_>, _>>()?;
                move || {
                    per_op(reps, || {
                        for i in 0..n {
                            let k = i % STREAMS;
                            branded_streams[k]
                                .scope(|s| s.launch(branded_empty, CFG, (&mut bufs[k],)))
                                .expect("the blocking scope failed");
                        }
                    }) / n as f64
                }
            }),
            raw: Some(Box::new(move || {
                per_op(reps, || unsafe {
                    for i in 0..n {
                        raw_launches(raw_empty, raw_streams[i % STREAMS], raw_buf, 1);
                    }
                    for &s in raw_streams.iter() {
                        ok(sys::cuStreamSynchronize(s));
                    }
                }) / n as f64
            })),
        });
    }

    // ---- drops -------------------------------------------------------------------------------
    let owned_drop = move || {
        let bufs = (0..DROPS)
            .map(|_| {
                // SAFETY: never read.
                let b = unsafe { DeviceBuffer::<u8>::uninitialized(ctx, DROP_BYTES) }?;
                home.unbind(ctx, b)
            })
            .collect::<Result<Vec<_>, _>>()
            .expect("allocating the owned buffers");
        foreign(Job::Owned(bufs))
    };
    let branded_drop = move || {
        let bufs = (0..DROPS)
            // SAFETY: never read.
            .map(|_| unsafe { DeviceBuffer::<u8>::uninitialized(ctx, DROP_BYTES) })
            .collect::<Result<Vec<_>, _>>()
            .expect("allocating the buffers");
        let t = Instant::now();
        drop(bufs);
        t.elapsed().as_nanos() as f64 / DROPS as f64
    };
    let raw_alloc = move || -> Vec<sys::CUdeviceptr> {
        (0..DROPS)
            .map(|_| {
                let mut p = 0;
                // SAFETY: an out-pointer to a live local; the crate's pool of the device,
                // on the legacy stream of the current context.
                ok(unsafe {
                    cu_mem_alloc_from_pool_async(&mut p, DROP_BYTES, raw_pool, std::ptr::null_mut())
                });
                p
            })
            .collect()
    };
    rows.push(Row {
        name: format!(
            "drop of a {DROP_BYTES} B buffer: owned on a foreign thread / `DeviceBuffer` on its own thread / raw `cuMemFreeAsync` on its own thread"
        ),
        goal: None,
        owned: Box::new(owned_drop),
        branded: Box::new(branded_drop),
        raw: Some(Box::new(move || {
            let ptrs = raw_alloc();
            let t = Instant::now();
            for p in ptrs {
                // SAFETY: pool memory of the current context that nothing uses.
                ok(unsafe { cu_mem_free_async(p, std::ptr::null_mut()) });
            }
            t.elapsed().as_nanos() as f64 / DROPS as f64
        })),
    });
    rows.push(Row {
        name: "the same, raw on the foreign thread (`cuCtxPushCurrent` + `cuMemFreeAsync` + `cuCtxPopCurrent`)".into(),
        goal: None,
        owned: Box::new(owned_drop),
        branded: Box::new(branded_drop),
        raw: Some(Box::new(move || {
            foreign(Job::Raw(raw_ctx as usize, raw_alloc()))
        })),
    });

    // ---- rounds, checks, report ---------------------------------------------------------------
    let medians = measure(&mut rows);
    let text = table(&rows, &medians);
    drop(rows); // every owned handle of the rows is dropped here

    // every awaited batch came back: (1 + ROUNDS) rounds of each row's measurements
    let per_round = 2 * 20
        + 2 * 200
        + IN_FLIGHT
            .iter()
            .map(|&n| (200 / n).max(4) * n)
            .sum::<usize>();
    assert_eq!(
        returned.get(),
        (1 + ROUNDS) * per_round,
        "every submitted batch was handed back once"
    );
    check_values(streams, &scale, &mut check_bufs, 64, false);
    check_values(streams, &scale, &mut check_bufs, 64, true);
    drop(check_bufs);
    drop(jobs);
    worker.join().expect("the foreign thread panicked");

    let header = format!(
        "{} (driver CUDA {}), the owning layer, medians of {ROUNDS} rounds, the three interleaved; ratios above 1 mean the owning layer is slower\n\n",
        device.name()?,
        cuda_brand::driver_version()?
    );
    harness::emit(&format!("{header}{text}"), out);
    // SAFETY: allocated above, unused from here on.
    ok(unsafe { sys::cuMemFree_v2(raw_buf) });
    Ok(())
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
