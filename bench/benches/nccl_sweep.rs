//! All-reduce bandwidth of the crate's NCCL communicator against raw NCCL calls, in the same
//! processes: `f32` sums from 8 B to 1 GiB, bus bandwidth as `nccl-tests` reports it.
//!
//! Run it as N ranks, one per GPU, with a launcher's variables (one process without them):
//!
//! ```text
//! cargo bench --no-run                   # where cargo is; then, on the GPU machine:
//! bash scripts/launch-ranks 2 -- .gpu-bundle/benches/nccl_sweep --bench [--out FILE.md]
//! ```
//!
//! The columns, interleaved (crate, raw, raw, crate, ...) in 5 rounds per size, medians:
//!
//! * **cuda-brand**: the communicator of `Communicator::from_env` (a non-blocking control
//!   communicator made within a deadline, and the blocking communicator split from it that
//!   runs the operations), `Communicator::all_reduce` queued `k` times in one
//!   `Communicator::scope_within` of a stream of the crate, on buffers of the crate: every
//!   operation checked (lengths, types, the communicator's state), the scope's end polling
//!   the stream and NCCL's asynchronous error.
//! * **raw NCCL**: a second communicator made with raw calls (`ncclGetUniqueId` on rank 0,
//!   the id broadcast over the first, `ncclCommInitRank`: a blocking communicator, as a C
//!   program makes it), `ncclAllReduce` queued `k` times on a stream of `cuStreamCreate` on
//!   buffers of `cuMemAlloc`, then `cuStreamSynchronize`. NCCL is opened with `dlopen`
//!   (the file `CUDA_BRAND_NCCL_LIBRARY` names, else `libnccl.so.2`), as the crate opens it.
//!
//! `k` is chosen per size so that a measurement moves about 4 GiB (at least 5, at most
//! 200). Bus bandwidth = bytes / time per all-reduce · 2 (n - 1) / n. Every rank checks the
//! last result of both columns (each element the sum over the ranks of `rank + 1`), and
//! rank 0 prints the table.

#![allow(clippy::missing_safety_doc)]

mod harness;

use std::ffi::{c_int, c_void};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuda_brand::nccl::{Communicator, ReduceOp, World};
use cuda_brand::{ContextGuard, Stream, with_primary_context};
use cuda_driver_sys as cu;

const ROUNDS: usize = 5;
const WITHIN: Duration = Duration::from_secs(60);
const SMALLEST: usize = 8;
const LARGEST: usize = 1 << 30;

#[repr(C)]
#[derive(Clone, Copy)]
struct UniqueId([u8; 128]);

/// NCCL's entry points, opened by hand: the raw column.
struct Nccl {
    _lib: libloading::Library,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> c_int,
    comm_init_rank: unsafe extern "C" fn(*mut *mut c_void, c_int, UniqueId, c_int) -> c_int,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        *mut c_void,
        cu::CUstream,
    ) -> c_int,
    comm_destroy: unsafe extern "C" fn(*mut c_void) -> c_int,
}

/// `ncclFloat32` and `ncclSum` of `nccl.h`.
const NCCL_FLOAT32: c_int = 7;
const NCCL_SUM: c_int = 0;

impl Nccl {
    fn open() -> Nccl {
        let file = std::env::var("CUDA_BRAND_NCCL_LIBRARY").unwrap_or("libnccl.so.2".into());
        // SAFETY: NCCL's initialisers are safe to run; the symbols' types are nccl.h's.
        unsafe {
            let lib = libloading::Library::new(&file).expect("opening NCCL");
            Nccl {
                get_unique_id: *lib.get(b"ncclGetUniqueId\0").unwrap(),
                comm_init_rank: *lib.get(b"ncclCommInitRank\0").unwrap(),
                all_reduce: *lib.get(b"ncclAllReduce\0").unwrap(),
                comm_destroy: *lib.get(b"ncclCommDestroy\0").unwrap(),
                _lib: lib,
            }
        }
    }
}

fn nccl_ok(what: &str, r: c_int) {
    assert_eq!(r, 0, "{what} returned ncclResult_t {r}");
}

fn cu_ok(what: &str, r: cu::CUresult) {
    assert_eq!(r, cu::CUresult::CUDA_SUCCESS, "{what} returned {r:?}");
}

fn main() -> ExitCode {
    let out = std::env::args().skip_while(|a| a != "--out").nth(1);
    let world = World::from_env().expect("the launcher's variables");
    let device = world.device().expect("this rank's device");
    let run = with_primary_context(&device, |ctx| sweep(ctx, &world));
    match run {
        Ok(table) => {
            if world.rank() == 0 {
                let text = format!(
                    "{} ranks, one process each ({}), NCCL {}; {}\n\n{table}",
                    world.size(),
                    world,
                    cuda_brand::nccl::version().expect("NCCL's version"),
                    gpu_name(),
                );
                harness::emit(&text, out.as_deref());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rank {}: {e}", world.rank());
            ExitCode::FAILURE
        }
    }
}

fn gpu_name() -> String {
    let d = cuda_brand::Device::get(0).expect("device 0");
    d.name().unwrap_or_default()
}

/// The raw column's communicator: made with raw calls, its id broadcast over `comm`.
fn raw_comm<'ctx>(
    ctx: ContextGuard<'ctx>,
    nccl: &Nccl,
    comm: &Communicator<'ctx>,
    stream: &Stream<'ctx>,
) -> *mut c_void {
    let mut id = UniqueId([0; 128]);
    if comm.rank() == 0 {
        // SAFETY: `id` is a valid out-pointer.
        nccl_ok("ncclGetUniqueId", unsafe { (nccl.get_unique_id)(&mut id) });
    }
    let mut bytes = ctx.from_slice(&id.0).expect("upload");
    comm.scope_within(stream, WITHIN, |s| {
        comm.broadcast_in_place(s, &mut bytes, 0)
    })
    .expect("broadcasting the raw communicator's id");
    id.0.copy_from_slice(&bytes.to_vec().expect("download"));
    let mut raw = std::ptr::null_mut();
    // SAFETY: every rank passes the same id and world size, its own rank; the device's
    // primary context is current (inside `with_primary_context`).
    nccl_ok("ncclCommInitRank", unsafe {
        (nccl.comm_init_rank)(&mut raw, comm.ranks() as c_int, id, comm.rank() as c_int)
    });
    raw
}

fn sweep<'ctx>(ctx: ContextGuard<'ctx>, world: &World) -> cuda_brand::Result<String> {
    let comm = Communicator::from_world(ctx, world, WITHIN)?;
    let n = comm.ranks();
    let stream = ctx.new_stream()?;
    let nccl = Nccl::open();
    let raw = raw_comm(ctx, &nccl, &comm, &stream);
    let mut raw_stream = std::ptr::null_mut();
    // SAFETY: the primary context is current.
    cu_ok("cuStreamCreate", unsafe {
        cu::cuStreamCreate(&mut raw_stream, 0)
    });

    let largest = LARGEST / 4;
    let mine = vec![(comm.rank() + 1) as f32; largest];
    let src = ctx.from_slice(&mine)?;
    let mut dst = ctx.zeroed::<f32>(largest)?;
    let (mut raw_src, mut raw_dst) = (0, 0);
    // SAFETY: the primary context is current; out-pointers valid; `mine` holds `LARGEST` bytes.
    unsafe {
        cu_ok("cuMemAlloc", cu::cuMemAlloc_v2(&mut raw_src, LARGEST));
        cu_ok("cuMemAlloc", cu::cuMemAlloc_v2(&mut raw_dst, LARGEST));
        cu_ok(
            "cuMemcpyHtoD",
            cu::cuMemcpyHtoD_v2(raw_src, mine.as_ptr().cast(), LARGEST),
        );
    }
    drop(mine);
    let want = (n * (n + 1) / 2) as f32;
    // one rank moves nothing between GPUs: its row shows the algorithm bandwidth
    let bus = if n > 1 {
        2.0 * (n as f64 - 1.0) / n as f64
    } else {
        1.0
    };

    let mut table = String::from(
        "| size | k | cuda-brand time | raw NCCL time | cuda-brand bus bandwidth | raw NCCL bus bandwidth | cuda-brand / raw (bandwidth) |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut bytes = SMALLEST;
    while bytes <= LARGEST {
        let count = bytes / 4;
        let k = (4usize << 30).div_ceil(bytes).clamp(5, 200);
        let crate_run = |dst: &mut cuda_brand::DeviceBuffer<'ctx, f32>| -> f64 {
            let t = Instant::now();
            comm.scope_within(&stream, WITHIN, |s| {
                let d = s.bind_mut(&mut dst[..count]);
                for _ in 0..k {
                    comm.all_reduce(s, d, &src[..count], ReduceOp::Sum)?;
                }
                Ok::<_, cuda_brand::Error>(())
            })
            .expect("the crate's all-reduces");
            t.elapsed().as_secs_f64() / k as f64
        };
        let raw_run = || -> f64 {
            let t = Instant::now();
            for _ in 0..k {
                // SAFETY: both buffers hold `LARGEST` bytes; the same operation on every rank.
                nccl_ok("ncclAllReduce", unsafe {
                    (nccl.all_reduce)(
                        raw_src as *const c_void,
                        raw_dst as *mut c_void,
                        count,
                        NCCL_FLOAT32,
                        NCCL_SUM,
                        raw,
                        raw_stream,
                    )
                });
            }
            // SAFETY: our stream.
            cu_ok("cuStreamSynchronize", unsafe {
                cu::cuStreamSynchronize(raw_stream)
            });
            t.elapsed().as_secs_f64() / k as f64
        };
        // a warm-up of each, then the rounds, the order alternating
        crate_run(&mut dst);
        raw_run();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            if round % 2 == 0 {
                ours.push(crate_run(&mut dst));
                theirs.push(raw_run());
            } else {
                theirs.push(raw_run());
                ours.push(crate_run(&mut dst));
            }
        }
        // both columns' results: every element the sum of the ranks' values
        let got = dst[..count].to_vec()?;
        assert!(got.iter().all(|&x| x == want), "crate: {bytes} B wrong");
        let mut back = vec![0f32; count];
        // SAFETY: `back` holds `bytes`; the raw stream is idle.
        cu_ok("cuMemcpyDtoH", unsafe {
            cu::cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), raw_dst, bytes)
        });
        assert!(back.iter().all(|&x| x == want), "raw: {bytes} B wrong");
        let (a, b) = (harness::median(ours), harness::median(theirs));
        let (bw_a, bw_b) = (bytes as f64 / a * bus / 1e9, bytes as f64 / b * bus / 1e9);
        table += &format!(
            "| {} | {k} | {} | {} | {bw_a:.2} GB/s | {bw_b:.2} GB/s | {:.3} |\n",
            size(bytes),
            time(a),
            time(b),
            bw_a / bw_b
        );
        bytes *= 2;
    }
    // SAFETY: ours; nothing queued uses them any more (the stream synchronized).
    unsafe {
        nccl_ok("ncclCommDestroy", (nccl.comm_destroy)(raw));
        cu_ok("cuMemFree", cu::cuMemFree_v2(raw_src));
        cu_ok("cuMemFree", cu::cuMemFree_v2(raw_dst));
        cu_ok("cuStreamDestroy", cu::cuStreamDestroy_v2(raw_stream));
    }
    comm.finalize()?;
    Ok(table)
}

fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn time(seconds: f64) -> String {
    if seconds >= 1e-3 {
        format!("{:.3} ms", seconds * 1e3)
    } else {
        format!("{:.1} µs", seconds * 1e6)
    }
}
