//! NCCL collectives (feature `nccl`): all-reduce, broadcast, reduce, all-gather,
//! reduce-scatter, send and receive between GPUs, with the brand of each rank's context.
//!
//! NCCL is loaded at run time, like the driver: `libnccl.so.2` (then `libnccl.so`), or the
//! file `CUDA_BRAND_NCCL_LIBRARY` names. Building needs nothing. PyTorch's CUDA wheels ship
//! NCCL: point the variable at `<site-packages>/nvidia/nccl/lib/libnccl.so.2`, which
//!
//! ```text
//! python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))'
//! ```
//!
//! prints. NCCL 2.12 or newer is needed, and 2.18 or newer for the communicators of
//! [`Communicator::from_world`] and [`Communicator::from_env`] (their non-blocking
//! initialisation and `ncclCommSplit`); without it every call is an error with
//! [`ErrorCode::NcclNotFound`](crate::ErrorCode::NcclNotFound) (or
//! [`NcclTooOld`](crate::ErrorCode::NcclTooOld)) saying what was tried.
//!
//! # Three ways to make communicators
//!
//! * **One process, several GPUs**: [`Clique::new`] (`ncclCommInitAll`) makes every rank at
//!   once; each rank is then claimed inside its device's context with
//!   [`Clique::communicator`], as a [`Communicator<'ctx>`](Communicator) of that context.
//! * **One process per GPU, started by a launcher** (`torchrun`, `srun`, `mpirun`, or
//!   nothing: one process): [`Communicator::from_env`] reads the [`World`] from the
//!   launcher's variables, and the ranks meet at rank 0's machine, within a deadline (see
//!   [below](#across-processes-and-machines)). Safe: one rank per process.
//! * **By hand**: one rank makes a [`UniqueId`] (128 bytes), ships its bytes to the others,
//!   and every rank joins with the `unsafe` [`Communicator::init_rank`]
//!   (`ncclCommInitRank`), promising that the ranks agree.
//!
//! A communicator spanning processes can be [`split`](Communicator::split) into
//! sub-communicators (`ncclCommSplit`), branded like it, and ended with
//! [`finalize`](Communicator::finalize) or [`abort`](Communicator::abort).
//!
//! NCCL works in each device's *primary* context (it calls `cudaSetDevice`), so
//! communicators are made with guards of [`with_primary_context`](crate::with_primary_context);
//! another context is refused.
//!
//! # Operations
//!
//! Every operation is a method of the [`Communicator`] taking a stream scope of its
//! context, like any asynchronous work: `comm.all_reduce(s, &mut dst, &src, ReduceOp::Sum)`
//! (the scope, then the buffers, destination before source, as every copy of the crate;
//! NCCL's C API has the source first, and a swapped call does not compile). Element
//! types map to NCCL's through the sealed [`NcclType`] (`i8`, `u8`, `i32`, `u32`, `i64`,
//! `u64`, `f32`, `f64`). Operations that read one buffer and write another take two
//! distinct borrows; the ones that read and write one buffer are the `_in_place` forms
//! (`comm.all_reduce_in_place(s, &mut buf, op)`). Several operations queued together (one thread
//! driving several GPUs, a send and a receive at once) go in a [`group`].
//!
//! ```no_run
//! use cuda_brand::nccl::{Clique, ReduceOp};
//! use cuda_brand::{Device, with_primary_context};
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let devices = Device::all()?;
//!     let clique = Clique::new(&devices)?;
//!     // one thread per GPU, each in its own primary context
//!     std::thread::scope(|t| {
//!         let workers: Vec<_> = devices
//!             .iter()
//!             .map(|device| {
//!                 let clique = &clique;
//!                 t.spawn(move || {
//!                     with_primary_context(device, |ctx| {
//!                         let comm = clique.communicator(ctx)?;
//!                         let mut grads = ctx.from_slice(&[comm.rank() as f32; 1024])?;
//!                         ctx.new_stream()?.scope(|s| comm.all_reduce_in_place(s, &mut grads, ReduceOp::Sum))?;
//!                         comm.async_error()?;
//!                         Ok::<_, cuda_brand::Error>(grads.to_vec()?[0])
//!                     })
//!                 })
//!             })
//!             .collect();
//!         let n = devices.len() as f32;
//!         for w in workers {
//!             assert_eq!(w.join().unwrap()?, n * (n - 1.0) / 2.0); // 0 + 1 + ... + (n - 1)
//!         }
//!         Ok(())
//!     })
//! }
//! ```
//!
//! # What the brand adds
//!
//! NCCL's C API takes a communicator, raw device pointers, counts and a stream, and trusts
//! all of them. Each rule below is a compile error (pinned by `ui-tests/nccl/`) or a check
//! made before NCCL is called:
//!
//! 1. **A communicator lives inside its context.** `Communicator<'ctx>` carries the brand
//!    of the context it was claimed or created in: it cannot be returned from the
//!    `with_primary_context` closure, so it is destroyed (or handed back to its clique)
//!    before the context goes. In C, nothing stops `ncclCommDestroy` running after the
//!    context's resources are gone.
//! 2. **One context per operation.** The communicator, the scope's stream and every buffer
//!    of an operation share one `'ctx`: a buffer of device 1 given to device 0's rank, or a
//!    communicator used on another context's stream, does not compile. With several
//!    devices, each rank is claimed inside its own device's context, so each has its own
//!    brand; the [`Clique`] that made them carries none (it only hands ranks out, each at
//!    most once at a time).
//! 3. **Buffers stay borrowed until the GPU is done.** A scope borrows the communicator and
//!    every buffer of an operation until it has synchronized its stream, exactly as for a
//!    copy or a launch: dropping, reading or writing `dst` while an all-reduce may still
//!    write it does not compile.
//! 4. **In place or out of place is in the types.** `comm.all_reduce(s, &mut dst, &src, op)`
//!    takes a shared and an exclusive borrow, so `src` and `dst` cannot be one buffer;
//!    `comm.all_reduce_in_place(s, &mut buf, op)` is the form that reads and writes one.
//!    Two views of one bound buffer that overlap (which the borrow checker cannot see) are
//!    refused before NCCL is called.
//! 5. **Lengths are checked before NCCL.** `src` and `dst` of an all-reduce, broadcast or
//!    reduce have equal lengths; an all-gather's destination is `ranks × n` for an `n`
//!    source, a reduce-scatter's source `ranks × n` for an `n` destination; roots and peers
//!    are ranks of the communicator. NCCL takes one count and trusts the buffers to hold
//!    what it implies.
//! 6. **Element types are NCCL's.** [`NcclType`] is sealed: only the eight types whose
//!    `ncclDataType_t` the crate knows can be reduced or sent, so a count is never
//!    multiplied by the wrong size.
//! 7. **A group cannot be left open, and its scopes outlive it.** [`group`] is a closure:
//!    its operations are queued when the closure returns (`ncclGroupStart` ... `ncclGroupEnd`
//!    around them), and the scopes they use must have been opened outside it, so every
//!    scope synchronizes *after* NCCL has queued the group's work. A scope opened inside the
//!    group does not compile: it would end, and release its buffers, before the group's
//!    work was even queued. Inside one group, no operation may write memory another touches
//!    (NCCL may run them concurrently).
//! 8. **The ranks agree, or cannot reach each other's buffers.** NCCL matches each rank's
//!    operation with its peers' by order and trusts the counts to match; a peer with a
//!    larger count can write past this rank's buffer where it writes it directly (ranks of
//!    one process: `P2P/direct pointer`). For a [`Clique`] the crate sees every rank and
//!    checks each operation against the peers' operation at the same place, before NCCL
//!    sees it. [`Communicator::from_world`] puts one rank per process, where no peer writes
//!    this rank's buffers (see [below](#across-processes-and-machines)). For
//!    [`Communicator::init_rank`] agreeing is the one promise of its `unsafe`.
//!
//! What the brand does not cover: a rank that never issues its side of an operation leaves
//! its peers waiting on the GPU, and a plain scope's synchronization never returns. Run the
//! work in [`Communicator::scope_within`], which aborts the communicator
//! (`ncclCommAbort`) when NCCL reports an asynchronous error or the deadline passes, and so
//! fails instead of hanging; or poll [`Communicator::async_error`] between operations.
//!
//! # Across processes and machines
//!
//! Launchers start one process per GPU and tell each its place in the environment:
//! `torchrun` (and every launcher that sets PyTorch's `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `MASTER_ADDR`, `MASTER_PORT`), Open MPI's `mpirun`, Slurm's `srun`. [`World::from_env`]
//! reads them (the table in [`World`] says which, in which order, and what each error
//! names); [`World::device`] picks the GPU by local rank; [`Communicator::from_env`] makes
//! the communicator:
//!
//! ```no_run
//! use std::time::Duration;
//! use cuda_brand::nccl::{Communicator, ReduceOp, World};
//! use cuda_brand::with_primary_context;
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let world = World::from_env()?; // one process alone: rank 0 of 1
//!     with_primary_context(&world.device()?, |ctx| {
//!         let comm = Communicator::from_env(ctx, Duration::from_secs(60))?;
//!         let mut grads = ctx.from_slice(&vec![comm.rank() as f32; 1 << 20])?;
//!         let stream = ctx.new_stream()?;
//!         comm.scope_within(&stream, Duration::from_secs(30), |s| {
//!             comm.all_reduce_in_place(s, &mut grads, ReduceOp::Sum)
//!         })?;
//!         comm.finalize()
//!     })
//! }
//! ```
//!
//! runs unchanged as `./train`, as `torchrun --nproc-per-node=8 --no-python ./train` on
//! one machine or with `--nnodes`, `--rdzv-endpoint` on several, as `srun --ntasks-per-node=8
//! --gpus-per-task=1 ./train`, and as `mpirun -np 16 -x MASTER_ADDR=node01 ./train`
//! (`examples/nccl_data_parallel.rs` is such a program).
//!
//! **Who does what.** NCCL is the engine: its bootstrap connects the ranks, and its kernels
//! and proxy threads move the data. The crate only gets every rank the same 128-byte
//! [`UniqueId`] to start it with: NCCL derives it from `NCCL_COMM_ID` (`host:port`) when
//! this process's environment has it, and otherwise rank 0 makes it and hands it to the
//! others over one TCP connection each at `MASTER_ADDR:MASTER_PORT` (every interface of
//! rank 0's machine listens on that port while the ranks meet; 29500 unless the launcher
//! says otherwise). The exchange checks what it can see: the ranks' world sizes agree, no
//! rank is given twice, every rank is from 0 to size - 1.
//!
//! **Deadlines.** Nothing waits forever. `from_world`'s `within` bounds the whole making of
//! the communicator (the exchange and NCCL's non-blocking initialisation,
//! `ncclCommInitRankConfig` polled with `ncclCommGetAsyncError`): a rank that never
//! arrives, a wrong world size, a taken port, an unreachable master are each an error
//! naming the cause before the deadline ([`ErrorCode::NcclTimeout`](crate::ErrorCode::NcclTimeout),
//! [`NcclRendezvous`](crate::ErrorCode::NcclRendezvous), or NCCL's own code), and a
//! communicator NCCL had started is aborted. The same `within` bounds each later call's
//! background work (a split, the finalize). [`Communicator::scope_within`]'s `within`
//! bounds the scope's work on the GPU:
//! a peer that died (NCCL's asynchronous error) or a deadline that passed aborts the
//! communicator, which ends its kernels; the scope returns an error, and the communicator
//! refuses every call after ([`NcclAborted`](crate::ErrorCode::NcclAborted)).
//!
//! **Two communicators of NCCL's behind one.** The communicator NCCL initialises under the
//! deadline is non-blocking (its calls return `ncclInProgress` and finish in a thread of
//! NCCL's, which is what lets the crate poll them against the deadline and abort them).
//! NCCL runs every call of such a communicator that way, operations included: a thread
//! per operation, about 55 µs each (measured on two H100s with NCCL 2.28.9; 0.23 of raw
//! NCCL's bus bandwidth for a 1 MiB all-reduce). So it is kept as a *control*
//! communicator (initialisation, splits, finalize), and right after it is made it is split
//! (`ncclCommSplit`, every rank in its place, under the same deadline) into a blocking
//! communicator that runs every operation and group, queued from the calling thread as raw
//! NCCL's are. A split makes such a pair again; an abort, a finalize and a drop end both.
//! The blocking half gives up one bound: the first operation of each algorithm also
//! connects the ranks (NCCL's runtime connection), a call that waits for a peer that never
//! issues the operation.
//!
//! **What the brand guarantees, per process.** Each process has its own contexts and its
//! own brands: within the process, everything above holds as for a clique (one context per
//! operation, buffers borrowed until the GPU is done, lengths checked against this rank's
//! counts). Across processes the crate sees nothing: that the ranks issue the same
//! operations with the same counts is the program's to keep (every rank runs the same
//! code), and when they do not, the results are wrong or the ranks wait, which the
//! deadlines turn into errors. It is not memory unsafety: NCCL's peers in other processes
//! write only NCCL's own staging buffers of this process, never its user buffers, unless a
//! buffer is registered with NCCL (`ncclCommRegister`, windows, CUDA graph captures of
//! collectives), which the safe API cannot do; and `from_world` makes sure no two ranks of
//! one communicator share a process (a process makes one such communicator at a time, and a
//! communicator's ranks all take part in its making at once), where NCCL's ranks write each
//! other's buffers directly. Reading of NCCL 2.28.9's sources: `P2P/direct pointer` is
//! chosen only for peers of one process; user buffers reach peers only through its
//! registration paths (`register/`).
//!
//! # Errors
//!
//! A failed NCCL call is an [`Error`](crate::Error) naming the entry point, with
//! [`ErrorCode::Nccl`](crate::ErrorCode::Nccl) and NCCL's last message (`ncclGetLastError`)
//! as its detail where NCCL logged one: `ncclCommInitAll failed: ncclInvalidUsage (invalid
//! usage)` for a device listed twice in a [`Clique`], then NCCL's text. The crate's own
//! checks name the crate's call (`Communicator::all_gather failed: CUDA_BRAND_INVALID_INPUT
//! (invalid input, refused before the driver saw it): the destination has 3 elements, but gathering 4 from each of 1 ranks
//! needs 4`). Asynchronous errors (a peer that died, a network failure) come from
//! [`Communicator::async_error`].

// The rooms: `sys.rs` (the library), `comm.rs` (communicators and cliques), `agreement.rs` (a
// clique's agreement of what each rank issued), `operation.rs` (each operation once: what it
// is and its checks), `issue.rs` (the one path of every operation to NCCL: ordered on its
// stream, admitted to the agreement, queued alone or in a group), `ops.rs` and `groups.rs`
// (the two fronts: a communicator's operations on a scope, and a scope's in a group),
// `state.rs` (a communicator's end: abort, and the waits of non-blocking ones), `world.rs`
// (the launcher's environment), `rendezvous.rs` (the id's exchange over TCP), `init.rs`
// (communicators across processes: `from_world`, `split`, `finalize`, `scope_within`),
// `pair.rs` (the control and operations communicators behind one of `from_world`).
mod agreement;
mod comm;
mod groups;
mod init;
mod issue;
mod operation;
mod ops;
mod pair;
mod rendezvous;
mod state;
mod sys;
mod world;

pub use crate::error::NcclCode;
pub use comm::{Clique, Communicator, UniqueId};
pub use groups::{Group, Grouped, group};
pub use sys::{ncclComm, ncclComm_t};
pub use world::{DEFAULT_MASTER_PORT, Launcher, World};

use std::ffi::c_int;
use std::fmt;

use crate::error::Result;
use crate::memory::DeviceCopy;

/// The NCCL library's version (`ncclGetVersion`), loading the library if it is not yet
/// loaded. Needs no GPU.
///
/// ```no_run
/// let v = cuda_brand::nccl::version()?;
/// assert!(v >= cuda_brand::nccl::Version { major: 2, minor: 12, patch: 0 });
/// println!("NCCL {v}");
/// # Ok::<(), cuda_brand::Error>(())
/// ```
pub fn version() -> Result<Version> {
    let (major, minor, patch) = sys::decode_version(sys::version()?);
    Ok(Version {
        major,
        minor,
        patch,
    })
}

/// An NCCL version, e.g. 2.21.5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// The major version (2).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
    /// The patch level.
    pub patch: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// How a collective combines the ranks' elements (`ncclRedOp_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `ncclSum`.
    Sum,
    /// `ncclProd`.
    Prod,
    /// `ncclMax`.
    Max,
    /// `ncclMin`.
    Min,
    /// `ncclAvg`: the sum divided by the rank count (integer division for integer types).
    ///
    /// **On one rank, exact whatever the NCCL.** The average over a communicator of one
    /// rank is its input. NCCL older than 2.29.7 gets that wrong for floating-point types:
    /// it runs a one-rank `ncclAvg` as a pre-multiplied sum in its `oneRankReduce` kernel,
    /// which divides the elements among at most 32 blocks with a rounded-down share and
    /// never writes the last `n % blocks` of them (NVIDIA/nccl issue 1950, fixed in NCCL
    /// 2.29.7; measured with PyTorch's NCCL 2.28.9 on an H100: an all-reduce of 65,539
    /// `f64` returned 0.0 from element 65,536 on). A silent corruption, so on those NCCL
    /// versions the crate hands a one-rank `Avg` (all-reduce, reduce, reduce-scatter, in
    /// place or not, inside a [`group`] or not) to NCCL as `ncclSum`, which NCCL runs as a
    /// copy of the input (nothing, in place): every element exact, and queued where NCCL
    /// queues the `ncclAvg` (at the call, even inside a group, for one rank). With several
    /// ranks NCCL's `ncclAvg` runs unchanged: it takes the ordinary collective kernels,
    /// not the one-rank one. Pinned by `tests/nccl.rs`
    /// (`one_rank_avg_of_65539_f64_is_the_input_in_every_element`).
    Avg,
}

impl ReduceOp {
    /// The `ncclRedOp_t` value.
    pub const fn raw(self) -> c_int {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Max => 2,
            ReduceOp::Min => 3,
            ReduceOp::Avg => 4,
        }
    }

    /// The operation of an `ncclRedOp_t` value, if it is a built-in one.
    pub const fn from_raw(raw: c_int) -> Option<ReduceOp> {
        match raw {
            0 => Some(ReduceOp::Sum),
            1 => Some(ReduceOp::Prod),
            2 => Some(ReduceOp::Max),
            3 => Some(ReduceOp::Min),
            4 => Some(ReduceOp::Avg),
            _ => None,
        }
    }
}

/// Element types NCCL can send and reduce, each with its `ncclDataType_t`: `i8`, `u8`,
/// `i32`, `u32`, `i64`, `u64`, `f32`, `f64`. Sealed: the data type decides how many bytes
/// NCCL reads and writes per element.
///
/// ```
/// use cuda_brand::nccl::NcclType;
/// assert_eq!(<f32 as NcclType>::datatype(), 7); // ncclFloat32
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an element type NCCL can send or reduce",
    label = "not one of NCCL's data types",
    note = "NCCL's element types here are `i8`, `u8`, `i32`, `u32`, `i64`, `u64`, `f32` and `f64`; send other plain data as bytes (`u8`) or as a wider integer",
    note = "see `cuda_brand::nccl`"
)]
pub trait NcclType: DeviceCopy + sealed::Sealed {
    /// The `ncclDataType_t` value.
    fn datatype() -> c_int {
        <Self as sealed::Sealed>::DATATYPE
    }
}

mod sealed {
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `NcclType`: the trait is sealed",
        note = "the data type decides how many bytes NCCL reads and writes per element, so only the crate's eight number types have one",
        note = "see `cuda_brand::nccl`"
    )]
    pub trait Sealed {
        const DATATYPE: std::ffi::c_int;
    }
}

macro_rules! nccl_type {
    ($($t:ty => $datatype:literal),*) => { $(
        impl sealed::Sealed for $t {
            const DATATYPE: c_int = $datatype;
        }
        impl NcclType for $t {}
    )* };
}
nccl_type!(i8 => 0, u8 => 1, i32 => 2, u32 => 3, i64 => 4, u64 => 5, f32 => 7, f64 => 8);

// The sizes NCCL assumes for each data type are the Rust types' sizes.
const _: () = {
    use std::mem::size_of;
    assert!(size_of::<i8>() == 1 && size_of::<u8>() == 1);
    assert!(size_of::<i32>() == 4 && size_of::<u32>() == 4 && size_of::<f32>() == 4);
    assert!(size_of::<i64>() == 8 && size_of::<u64>() == 8 && size_of::<f64>() == 8);
};

// The thread rules, as the docs state them.
mod facts {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(Communicator<'static>: Send);
    assert_not_impl_any!(Communicator<'static>: Sync);
    assert_impl_all!(Clique: Send, Sync);
    assert_not_impl_any!(Group<'static>: Send, Sync);
    assert_impl_all!(UniqueId: Send, Sync, Copy);
    assert_impl_all!(World: Send, Sync, Clone);
}
