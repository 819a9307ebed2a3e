//! One data-parallel step, the way training programs run it: each rank computes its part of
//! a gradient, the ranks all-reduce it (NCCL), and each checks the sum it got. The same
//! binary runs as one process on one GPU and as N processes on N GPUs or machines:
//!
//! ```text
//! cargo build --release --example nccl_data_parallel --features nccl
//! target/release/examples/nccl_data_parallel                          # one process
//! torchrun --nproc-per-node=8 --no-python target/release/examples/nccl_data_parallel
//! torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=node01:29400 \
//!     --no-python target/release/examples/nccl_data_parallel          # on each machine
//! srun --nodes=2 --ntasks-per-node=8 --gpus-per-task=1 target/release/examples/nccl_data_parallel
//! mpirun -np 8 target/release/examples/nccl_data_parallel            # one machine
//! ```
//!
//! (`CUDA_BRAND_NCCL_LIBRARY` names the NCCL library if it is not on the loader's path.)
//! `World::from_env` reads the launcher's variables (none: a world of one), `World::device`
//! picks the GPU by local rank, and `Communicator::from_env` makes the communicator within a
//! deadline: a missing rank, a wrong world size or a taken port is an error, not a hang.
//!
//! Each rank fills a gradient of 64 Mi `f32` with `(rank + 1) · g(i)`, `g(i) = (i mod 1024)
//! / 2`; the sum over `n` ranks is `n (n + 1) / 2 · g(i)`, exact in `f32` (every partial
//! sum is a multiple of 0.5 below 2²³), so every element is checked for equality. Then five
//! timed all-reduces, each in a bounded scope (`Communicator::scope_within`: a peer that
//! dies aborts the communicator and fails the step instead of hanging it), and the
//! bandwidths as `nccl-tests` reports them: algorithm bandwidth = bytes / time, bus
//! bandwidth = algorithm bandwidth · 2 (n - 1) / n. Then a sub-communicator
//! (`Communicator::split`): all ranks in one colour, numbered in reverse (key `n - 1 -
//! rank`), each checking its new rank and an all-reduce of its old one. Exits 0 (printing
//! `OK`) when every rank's sum is right, 1 otherwise; without a GPU or NCCL it says so and
//! exits 0.
//!
//! Two arguments for trying what happens when a rank dies: `--for SECONDS` repeats the
//! timed all-reduces until that much time has passed (kill one rank meanwhile), and
//! `--step-within SECONDS` sets each step's deadline (60 s otherwise). The surviving ranks
//! then end with an error naming the timeout or NCCL's error, within that deadline, instead
//! of hanging; `scripts/launch-ranks 2 --kill 1:5 -- ... --for 30 --step-within 10` does
//! exactly that on one machine.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuda_brand::nccl::{Communicator, ReduceOp, World};
use cuda_brand::{Error, ErrorCode, with_primary_context};

/// Elements of the gradient: 64 Mi `f32`, 256 MiB.
const N: usize = 64 << 20;
/// Timed all-reduces.
const ITERATIONS: usize = 5;
/// How long the ranks may take to meet.
const MEET_WITHIN: Duration = Duration::from_secs(120);

/// What the command line asks for.
struct Args {
    /// Repeat the timed steps until this much time has passed.
    run_for: Duration,
    /// Each step's deadline.
    step_within: Duration,
}

impl Args {
    fn parse() -> Result<Args, String> {
        let mut args = Args {
            run_for: Duration::ZERO,
            step_within: Duration::from_secs(60),
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            let seconds = |v: Option<String>| {
                v.and_then(|v| v.parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(Duration::from_secs_f64)
                    .ok_or(format!("{arg} takes a number of seconds"))
            };
            match arg.as_str() {
                "--for" => args.run_for = seconds(it.next())?,
                "--step-within" => args.step_within = seconds(it.next())?,
                _ => return Err(format!("unknown argument {arg} (--for S, --step-within S)")),
            }
        }
        Ok(args)
    }
}

/// `g(i)`: this element's share of a gradient, before the rank's factor.
fn g(i: usize) -> f32 {
    (i % 1024) as f32 * 0.5
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let world = match World::from_env() {
        Ok(world) => world,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&world, &args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) if skipped(&e) => {
            println!(
                "rank {}: no GPU or no NCCL here, so no step to run: {e}",
                world.rank()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rank {}: error: {e}", world.rank());
            ExitCode::FAILURE
        }
    }
}

/// Whether `e` says that this machine cannot run the example at all.
fn skipped(e: &Error) -> bool {
    matches!(
        e.code(),
        ErrorCode::NoDevice
            | ErrorCode::DriverNotFound
            | ErrorCode::NcclNotFound
            | ErrorCode::NcclTooOld
    )
}

/// The step on this rank: `Ok(true)` when its sum is right.
fn run(world: &World, args: &Args) -> cuda_brand::Result<bool> {
    let device = world.device()?;
    with_primary_context(&device, |ctx| {
        let start = Instant::now();
        let comm = Communicator::from_env(ctx, MEET_WITHIN)?;
        let (rank, n) = (comm.rank(), comm.ranks());
        if rank == 0 {
            println!(
                "{} ranks ({world}); NCCL {}; met in {:.1?}",
                n,
                cuda_brand::nccl::version()?,
                start.elapsed()
            );
        }
        // this rank's part of the gradient, computed on the host and uploaded
        let factor = (rank + 1) as f32;
        let partial: Vec<f32> = (0..N).map(|i| factor * g(i)).collect();
        let src = ctx.from_slice(&partial)?;
        drop(partial);
        let mut sum = ctx.zeroed::<f32>(N)?;
        let stream = ctx.new_stream()?;
        // a warm-up, then the timed steps; the result of the last is checked below
        let mut times = Vec::with_capacity(ITERATIONS);
        let started = Instant::now();
        while times.len() <= ITERATIONS || started.elapsed() < args.run_for {
            let t = Instant::now();
            let step = comm.scope_within(&stream, args.step_within, |s| {
                comm.all_reduce(s, &mut sum, &src, ReduceOp::Sum)
            });
            if let Err(e) = step {
                eprintln!(
                    "rank {rank}: step {} failed after {:.1?} (deadline {:?}): {e}",
                    times.len(),
                    t.elapsed(),
                    args.step_within
                );
                return Err(e);
            }
            times.push(t.elapsed());
        }
        times.remove(0);
        let steps = times.len();
        let ranks_sum = (n * (n + 1) / 2) as f32;
        let got = sum.to_vec()?;
        let wrong = (0..N).filter(|&i| got[i] != ranks_sum * g(i)).count();
        if wrong > 0 {
            let i = (0..N).find(|&i| got[i] != ranks_sum * g(i)).unwrap_or(0);
            eprintln!(
                "rank {rank}: {wrong} of {N} elements wrong, the first {i}: {} instead of {}",
                got[i],
                ranks_sum * g(i)
            );
        } else {
            println!("rank {rank} of {n}: all {N} elements equal {ranks_sum} · g(i)");
        }
        if rank == 0 {
            let best = times.iter().min().copied().unwrap_or_default();
            let mean = times.iter().sum::<Duration>() / steps as u32;
            let bytes = (N * std::mem::size_of::<f32>()) as f64;
            let algbw = bytes / mean.as_secs_f64() / 1e9;
            let busbw = algbw * 2.0 * (n as f64 - 1.0) / n as f64;
            println!(
                "all-reduce of {} MiB f32 (sum), {steps} times: mean {:.3} ms, best {:.3} ms",
                bytes as usize >> 20,
                mean.as_secs_f64() * 1e3,
                best.as_secs_f64() * 1e3
            );
            println!("algorithm bandwidth {algbw:.1} GB/s, bus bandwidth {busbw:.1} GB/s");
        }
        let sub_ok = sub_communicator(ctx, &comm, &stream, args.step_within)?;
        comm.finalize()?;
        let wrong = wrong + usize::from(!sub_ok);
        if rank == 0 && wrong == 0 {
            println!("OK");
        }
        Ok(wrong == 0)
    })
}

/// All ranks in one colour, numbered in reverse: checks the new rank and an all-reduce of
/// the old ranks (their sum, `n (n - 1) / 2`, on every rank).
fn sub_communicator<'ctx>(
    ctx: cuda_brand::ContextGuard<'ctx>,
    comm: &Communicator<'ctx>,
    stream: &cuda_brand::Stream<'ctx>,
    within: Duration,
) -> cuda_brand::Result<bool> {
    let (rank, n) = (comm.rank(), comm.ranks());
    let Some(sub) = comm.split(Some(0), (n - 1 - rank) as u32)? else {
        eprintln!("rank {rank}: colour 0 gave no communicator");
        return Ok(false);
    };
    let mut x = ctx.from_slice(&[rank as f64; 4])?;
    sub.scope_within(stream, within, |s| {
        sub.all_reduce_in_place(s, &mut x, ReduceOp::Sum)
    })?;
    let want = (n * (n - 1) / 2) as f64;
    let got = x.to_vec()?;
    let ok = sub.rank() == n - 1 - rank && sub.ranks() == n && got == [want; 4];
    println!(
        "rank {rank}: sub-communicator rank {} of {} (want {} of {n}), all-reduce of the old ranks {:?} (want {want}): {}",
        sub.rank(),
        sub.ranks(),
        n - 1 - rank,
        got[0],
        if ok { "ok" } else { "WRONG" }
    );
    sub.finalize()?;
    Ok(ok)
}
