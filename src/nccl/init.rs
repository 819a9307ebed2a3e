//! Communicators spanning processes, made the way launchers start programs
//! ([`Communicator::from_env`], [`Communicator::from_world`]), and what they need beyond a
//! clique's: sub-communicators ([`Communicator::split`]), an end
//! ([`finalize`](Communicator::finalize), [`abort`](Communicator::abort)), and scopes that
//! fail instead of hanging ([`Communicator::scope_within`]).

use std::cell::{OnceCell, RefCell};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use super::comm::{Communicator, check_primary};
use super::state::{Control, Core, Origin};
use super::state::{Handle, poll_until};
use super::sys::{self, Status};
use super::world::{World, nccl_comm_id};
use super::{NcclCode, UniqueId, rendezvous};
use crate::context::{ContextGuard, NoPhases, Unpartitioned};
use crate::driver;
use crate::error::{Error, ErrorCode, Invalid, Result};
use crate::scope::StreamScope;
use crate::stream::{KeepWaiting, Stream};

/// Held while this process makes a communicator with `from_world`: one at a time, so that
/// no communicator gets two ranks of this process (see [`Communicator::from_world`]).
static MAKING: Mutex<()> = Mutex::new(());

/// The lock on [`MAKING`], waited for until `deadline`.
fn one_at_a_time(deadline: Instant, within: Duration) -> Result<MutexGuard<'static, ()>> {
    let guard = poll_until(Some(deadline), || match MAKING.try_lock() {
        Ok(guard) => Ok(Some(guard)),
        Err(TryLockError::Poisoned(p)) => Ok(Some(p.into_inner())),
        Err(TryLockError::WouldBlock) => Ok(None),
    })?;
    guard.ok_or_else(|| {
        Error::with_detail(
            rendezvous::CALL,
            ErrorCode::NcclTimeout,
            format!(
                "another thread of this process was making a communicator for all of {within:?}: a process makes one at a time, so that no communicator has two of its ranks in one process"
            ),
        )
    })
}

/// The deadline `within` from `start`, or none when it is too far to count.
fn deadline_of(start: Instant, within: Duration) -> Instant {
    start
        .checked_add(within)
        .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 24 * 3600))
}

impl<'ctx> Communicator<'ctx> {
    /// This process's rank of the communicator its launcher started: the [`World`] of the
    /// environment ([`World::from_env`]: `torchrun`'s variables, Open MPI, Slurm, or a
    /// world of one process), made by [`Communicator::from_world`] within `within`. `ctx`
    /// is the primary context of this rank's device, which [`World::device`] picks by
    /// local rank.
    ///
    /// The same program then runs unchanged as one process (no launcher variables: a
    /// communicator of one rank) and as one process per GPU on one or many machines.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cuda_brand::nccl::{Communicator, ReduceOp, World};
    /// use cuda_brand::with_primary_context;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let world = World::from_env()?;
    /// with_primary_context(&world.device()?, |ctx| {
    ///     let comm = Communicator::from_env(ctx, Duration::from_secs(60))?;
    ///     let mut x = ctx.from_slice(&[comm.rank() as f32; 1024])?;
    ///     let stream = ctx.new_stream()?;
    ///     comm.scope_within(&stream, Duration::from_secs(30), |s| {
    ///         comm.all_reduce_in_place(s, &mut x, ReduceOp::Sum)
    ///     })?;
    ///     let n = comm.ranks() as f32;
    ///     assert_eq!(x.to_vec()?[0], n * (n - 1.0) / 2.0);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn from_env<P: NoPhases, S: Unpartitioned>(
        ctx: ContextGuard<'ctx, P, S>,
        within: Duration,
    ) -> Result<Communicator<'ctx>> {
        let ctx = ctx.unphased();
        let world = World::from_env()?;
        Communicator::from_world(ctx, &world, within)
    }

    /// Rank `world.rank()` of the `world.size()`-rank communicator of `world`, on the
    /// device of `ctx` (its primary context, as for every communicator), made within
    /// `within` or not at all.
    ///
    /// 1. **The id.** NCCL's engine, its bootstrap, needs every rank to hold the same
    ///    unique id. If this process's environment has `NCCL_COMM_ID` (`host:port`), every
    ///    rank derives the id from it (`ncclGetUniqueId`) and rank 0's NCCL serves the
    ///    bootstrap there; otherwise the ranks exchange it over TCP at the master's address
    ///    (`MASTER_ADDR:MASTER_PORT`): rank 0 listens and makes the id, the others connect
    ///    and receive it, and rank 0 refuses ranks that disagree about the world (its
    ///    size, a rank given twice). That is the exchange's whole job; a world of one opens
    ///    no socket.
    /// 2. **NCCL's initialisation**, non-blocking (`ncclCommInitRankConfig` with
    ///    `blocking = 0`), polled (`ncclCommGetAsyncError`) against the deadline: the
    ///    *control* communicator.
    /// 3. **The operations communicator**, split from the control one (`ncclCommSplit`,
    ///    every rank in its place) with `blocking = 1`, the split polled against the same
    ///    deadline. Operations and groups run on it, queued by the calling thread as raw
    ///    NCCL's are: a non-blocking communicator would start a thread of NCCL's for each
    ///    operation (about 55 µs each, measured on H100s). The control communicator runs
    ///    the splits and the finalize, under deadlines.
    ///
    /// A rank that never arrives, a wrong world size, a taken port, a rank 0 that never
    /// answers: each is an error naming the cause before `within` has passed
    /// ([`ErrorCode::NcclTimeout`], [`ErrorCode::NcclRendezvous`], NCCL's own code), and
    /// a communicator NCCL had started is aborted (`ncclCommAbort`). `within` is also the
    /// longest the communicator's later background work may take (a split, the control
    /// communicator's finalize), after which it is aborted. The work of operations is
    /// bounded by [`scope_within`](Communicator::scope_within).
    ///
    /// # Why this is safe, unlike `init_rank`
    ///
    /// NCCL trusts every rank to issue the operations its peers issue, with the same
    /// counts; a peer that disagrees can write past this rank's buffers only where it
    /// writes them directly, which NCCL does between ranks of one process (`P2P/direct
    /// pointer`) and for buffers registered with it (`ncclCommRegister`, windows, CUDA
    /// graph captures of its operations), none of which the crate's safe API can make.
    /// Between processes, without registration, a peer writes only NCCL's own staging
    /// buffers, and each rank's kernels write its own buffers by its own counts, which the
    /// crate checks. So the safe form guarantees one rank per process: this process makes
    /// one communicator at a time through this call, and every rank of a communicator takes
    /// part in its initialisation at once, so two ranks of one communicator in this process
    /// would wait for each other and fail at the deadline. A peer that disagrees can then
    /// make this rank's results wrong, or make it wait (which the deadlines of
    /// [`scope_within`](Communicator::scope_within) turn into an error), never write
    /// outside its buffers. The brand's guarantees are per process, as everywhere in the
    /// crate; see [the module docs](super#across-processes-and-machines).
    ///
    /// The peers are trusted to *be* NCCL, as NCCL itself trusts them: the id's exchange
    /// and NCCL's bootstrap are not authenticated, and a program that reaches the master's
    /// port before a rank does gets the id, and could join and speak NCCL's protocol
    /// falsely (say it shares this process, so that this rank writes where it points).
    /// Run jobs where only the job's machines reach each other, as for any NCCL program.
    ///
    /// Needs NCCL 2.18 or newer (`ncclCommInitRankConfig`, `ncclCommSplit`).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cuda_brand::nccl::{Communicator, World};
    /// use cuda_brand::with_primary_context;
    /// # fn main() -> cuda_brand::Result<()> {
    /// // rank 1 of 2, rank 0 on the machine "head"
    /// let world = World::new(1, 2, 0, "head", 29500)?;
    /// with_primary_context(&world.device()?, |ctx| {
    ///     let comm = Communicator::from_world(ctx, &world, Duration::from_secs(30))?;
    ///     assert_eq!((comm.rank(), comm.ranks()), (1, 2));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn from_world<P: NoPhases, S: Unpartitioned>(
        ctx: ContextGuard<'ctx, P, S>,
        world: &World,
        within: Duration,
    ) -> Result<Communicator<'ctx>> {
        let ctx = ctx.unphased();
        const CALL: &str = rendezvous::CALL;
        let start = Instant::now();
        let deadline = deadline_of(start, within);
        let device = ctx.device()?;
        check_primary(ctx, &device, CALL)?;
        let _one = one_at_a_time(deadline, within)?;
        let id = match nccl_comm_id(CALL)? {
            Some(_) => UniqueId::new()?,
            None => UniqueId::from_bytes(rendezvous::exchange(world, deadline, within, || {
                Ok(UniqueId::new()?.to_bytes())
            })?),
        };
        let (rank, size) = (world.rank(), world.size());
        let raw_id = id.raw();
        let init = || {
            // SAFETY: the device's primary context is current (pushed by `keep_stack`).
            unsafe { sys::comm_init_rank_non_blocking(size as i32, &raw_id, rank as i32) }
        };
        // SAFETY: `ctx` is alive (the guard) and the primary context of `device`, made
        // current for the call, as `comm_init_rank_non_blocking` needs.
        let (comm, status) = unsafe { sys::keep_stack(Some(ctx.as_non_null()), init) }?;
        let raw = driver::non_null("ncclCommInitRankConfig", comm)?;
        // The control communicator alone, for now: a pair whose both handles are `raw`.
        let mut comm = Communicator::new(Core {
            raw,
            ctx: ctx.as_non_null(),
            rank,
            ranks: size,
            device,
            origin: Origin::World,
            control: Some(Control { raw, limit: within }),
            ended: OnceCell::new(),
        });
        if status == Status::InProgress {
            comm.core.settle_by(Handle::Control, Some(deadline), CALL, || {
                format!(
                    "NCCL's initialisation did not finish within {within:?} of the call (a rank that never started or cannot reach the others, or a world size larger than the ranks started; {world})"
                )
            })?;
        }
        // ... and its operations communicator, blocking (see `pair.rs`)
        comm.core.attach_ops(Some(deadline), CALL)?;
        Ok(comm)
    }

    /// Splits the communicator (`ncclCommSplit`): every rank of this one calls `split`,
    /// and the ranks that give the same `colour` form a new communicator, ranked by `key`
    /// (then by their rank here); `None` (`NCCL_SPLIT_NOCOLOR`) takes part without joining
    /// any, and gets `Ok(None)`. The new communicator is this one's kind, on the same
    /// device and context, so it has the same brand: one of
    /// [`from_world`](Communicator::from_world) makes one, again a control communicator
    /// (split from this one's, non-blocking) and an operations communicator (split from
    /// the new control one, blocking), with the same deadline for their background work;
    /// one from the `unsafe` [`init_rank`](Communicator::init_rank) makes one under the
    /// same promise.
    ///
    /// A [`Clique`](super::Clique)'s communicators are refused: the crate checks a
    /// clique's ranks against each other, which it could not do for the ranks of a split
    /// (all in this process); make a clique of the devices wanted instead. Needs NCCL 2.18
    /// or newer. A split whose background work misses the deadline aborts this
    /// communicator.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cuda_brand::nccl::{Communicator, ReduceOp, World};
    /// use cuda_brand::with_primary_context;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let world = World::from_env()?;
    /// with_primary_context(&world.device()?, |ctx| {
    ///     let comm = Communicator::from_world(ctx, &world, Duration::from_secs(60))?;
    ///     // even and odd ranks, each a communicator of their own
    ///     let half = comm.split(Some(comm.rank() as u32 % 2), comm.rank() as u32)?.unwrap();
    ///     let mut x = ctx.from_slice(&[1u64; 8])?;
    ///     ctx.new_stream()?.scope(|s| half.all_reduce_in_place(s, &mut x, ReduceOp::Sum))?;
    ///     assert_eq!(x.to_vec()?, [half.ranks() as u64; 8]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn split(&self, colour: Option<u32>, key: u32) -> Result<Option<Communicator<'ctx>>> {
        const CALL: &str = "Communicator::split";
        let origin = match self.core.origin {
            Origin::Clique(_) => {
                return Err(Error::invalid_input(
                    CALL,
                    Invalid::argument(
                        "a clique's communicators cannot be split: the crate checks a clique's ranks against each other, which it could not do for a split's; make a Clique of the devices wanted instead",
                    ),
                ));
            }
            Origin::Rank => Origin::Rank,
            Origin::World => Origin::World,
        };
        let too_big = |what: &str, v: u32| {
            Error::invalid_input(
                CALL,
                Invalid::argument(format!(
                    "the {what} {v} is larger than NCCL's largest, {}",
                    i32::MAX
                )),
            )
        };
        let colour = match colour {
            None => -1, // NCCL_SPLIT_NOCOLOR
            Some(c) => i32::try_from(c).map_err(|_| too_big("colour", c))?,
        };
        let key = i32::try_from(key).map_err(|_| too_big("key", key))?;
        let limit = self.core.limit();
        let deadline = Instant::now().checked_add(limit);
        // the control communicator's split (for a pair; else the one communicator's), as
        // this communicator is configured: the child of a pair's is its control one
        let child = self.core.split_raw((colour, key), None, deadline, CALL, || {
            format!(
                "NCCL's split did not finish within {limit:?} (a rank that never called split, or stopped?)"
            )
        })?;
        let Some(child) = child else {
            return match colour {
                -1 => Ok(None),
                _ => Err(Error::with_detail(
                    CALL,
                    ErrorCode::Nccl(NcclCode::InternalError),
                    "NCCL made no communicator for a colour",
                )),
            };
        };
        self.adopt(child, origin, deadline, CALL).map(Some)
    }

    /// The communicator NCCL split off as `child`, after its initialisation is complete;
    /// for a pair, `child` is the control communicator, whose operations communicator is
    /// made here, by `deadline`.
    fn adopt(
        &self,
        child: std::ptr::NonNull<super::ncclComm>,
        origin: Origin,
        deadline: Option<Instant>,
        what: &'static str,
    ) -> Result<Communicator<'ctx>> {
        let mut comm = Communicator::new(Core {
            raw: child,
            ctx: self.core.ctx,
            rank: 0,
            ranks: 1,
            device: self.core.device,
            origin,
            control: self.core.control.map(|c| Control {
                raw: child,
                limit: c.limit,
            }),
            ended: OnceCell::new(),
        });
        // the child's own state, in case its initialisation runs on (it is aborted on an
        // error, and then dropped without a destroy)
        comm.core.settle(Handle::Control, what)?;
        let count = || {
            // SAFETY: a live communicator whose initialisation is complete (settled).
            unsafe { sys::comm_rank_and_count(child.as_ptr()) }
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let counted = unsafe { sys::keep_stack(Some(self.core.ctx), count) };
        match counted {
            Ok((rank, ranks)) => {
                comm.core.rank = rank;
                comm.core.ranks = ranks;
            }
            Err(e) => {
                let _ = comm.core.abort(e.clone());
                return Err(e);
            }
        }
        if comm.core.control.is_some() {
            comm.core.attach_ops(deadline, what)?;
        }
        Ok(comm)
    }

    /// Ends the communicator the orderly way: `ncclCommFinalize` (which flushes its work
    /// and closes its connections, together with the peers' finalize), then
    /// `ncclCommDestroy`, of the operations communicator and then of the control one of
    /// [`from_world`](Communicator::from_world)'s, whose finalize is waited for up to its
    /// deadline; past it, or on an error, both are aborted and the error returned. A
    /// [`Clique`](super::Clique)'s communicator is refused (it goes back to the clique,
    /// which destroys its communicators together); an aborted one is refused with
    /// [`ErrorCode::NcclAborted`]. Dropping a communicator destroys it without a finalize
    /// (`ncclCommDestroy`, or `ncclCommAbort` when NCCL reports an asynchronous error).
    /// Needs NCCL 2.14 or newer.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use cuda_brand::nccl::Communicator;
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let world = cuda_brand::nccl::World::from_env()?;
    /// cuda_brand::with_primary_context(&world.device()?, |ctx| {
    ///     let comm = Communicator::from_world(ctx, &world, Duration::from_secs(60))?;
    ///     // ... the collectives ...
    ///     comm.finalize() // every rank's work is flushed
    /// })
    /// # }
    /// ```
    pub fn finalize(self) -> Result<()> {
        const CALL: &str = "Communicator::finalize";
        if let Origin::Clique(_) = self.core.origin {
            return Err(Error::invalid_input(
                CALL,
                Invalid::argument(
                    "a clique's communicators are destroyed with the clique: drop this one to hand it back",
                ),
            ));
        }
        self.core.finalize_all(CALL)
    }

    /// Aborts the communicator (`ncclCommAbort`): NCCL stops its work on the GPU and frees
    /// it, without waiting for the peers. For a rank whose peers are gone or stuck; the
    /// peers' operations with this rank then fail or wait (theirs to bound with
    /// [`scope_within`](Communicator::scope_within)). A [`Clique`](super::Clique)'s rank
    /// aborted this way is not handed back, and the clique refuses its other ranks'
    /// operations from then on. Aborting a communicator that was aborted already does
    /// nothing.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use cuda_brand::nccl::Communicator;
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let world = cuda_brand::nccl::World::from_env()?;
    /// cuda_brand::with_primary_context(&world.device()?, |ctx| {
    ///     let comm = Communicator::from_world(ctx, &world, Duration::from_secs(60))?;
    ///     if comm.async_error().is_err() {
    ///         comm.abort()?; // a peer died: do not wait for it
    ///     }
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn abort(self) -> Result<()> {
        self.core.abort(Error::with_detail(
            "Communicator::abort",
            ErrorCode::NcclAborted,
            "aborted by the program",
        ))
    }

    /// [`Stream::scope`] for this communicator's work, which fails instead of hanging: the
    /// scope opened on `stream` runs `f`, then waits for the stream while polling the
    /// communicator's asynchronous error. If NCCL reports one (a peer died, the network
    /// failed), or the stream is still busy `within` after the call, the communicator is
    /// aborted (`ncclCommAbort`, which makes its kernels on the GPU end, so the wait ends
    /// too) and the scope returns an error naming the cause: NCCL's code, or
    /// [`ErrorCode::NcclTimeout`]. The asynchronous error is also checked after work that
    /// finished. An aborted communicator refuses every call after
    /// ([`ErrorCode::NcclAborted`]).
    ///
    /// Like every scope, it returns only once the stream is idle (built on
    /// [`Stream::scope_within`]): `within` bounds the wait for the communicator's work,
    /// not the memory rules. Other work queued in the scope is waited for as well, and
    /// counts towards `within`; the work of *another* communicator queued in the scope is
    /// not bounded (only this one is aborted at the deadline, and the scope then waits for
    /// the stream): give each communicator's work its own `scope_within`.
    ///
    /// The error comes after the deadline *and* the abort: `ncclCommAbort` stops the
    /// kernels and joins NCCL's threads before it returns. On two H100s, with a peer killed
    /// mid-run and a 10 s deadline, the surviving rank's scope returned its error 11.5 s
    /// after it opened (`examples/OUTPUT.md`, nccl_data_parallel).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cuda_brand::ErrorCode;
    /// use cuda_brand::nccl::{Communicator, ReduceOp, World};
    /// use cuda_brand::with_primary_context;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let world = World::from_env()?;
    /// with_primary_context(&world.device()?, |ctx| {
    ///     let comm = Communicator::from_world(ctx, &world, Duration::from_secs(60))?;
    ///     let mut grads = ctx.zeroed::<f32>(1 << 20)?;
    ///     let stream = ctx.new_stream()?;
    ///     let step = comm.scope_within(&stream, Duration::from_secs(10), |s| {
    ///         comm.all_reduce_in_place(s, &mut grads, ReduceOp::Sum)
    ///     });
    ///     if let Err(e) = step {
    ///         // a peer died or stopped: this rank's communicator is aborted
    ///         assert!(comm.is_aborted() || e.code() != ErrorCode::NcclTimeout);
    ///         return Err(e);
    ///     }
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_within<'env, R, E, F>(
        &self,
        stream: &'env Stream<'ctx>,
        within: Duration,
        f: F,
    ) -> Result<R, E>
    where
        F: for<'scope> FnOnce(&'scope StreamScope<'scope, 'env, 'ctx>) -> Result<R, E>,
        E: From<Error>,
    {
        const CALL: &str = "Communicator::scope_within";
        /// How often the communicator's state is polled while the stream is busy.
        const POLL: Duration = Duration::from_millis(50);
        let fired: RefCell<Option<Error>> = RefCell::new(None);
        let core = &self.core;
        let on_overrun = |overrun: crate::stream::Overrun| {
            let why = match core.async_state(CALL) {
                Ok(None) | Ok(Some(NcclCode::InProgress)) if overrun.elapsed() < within => {
                    return KeepWaiting::for_another(POLL.min(within - overrun.elapsed()));
                }
                Ok(None) | Ok(Some(NcclCode::InProgress)) => Error::with_detail(
                    CALL,
                    ErrorCode::NcclTimeout,
                    format!(
                        "rank {} of {}: the scope's work did not finish within {within:?} (a peer that stopped, or never issued its side?); the communicator is aborted",
                        core.rank, core.ranks
                    ),
                ),
                Ok(Some(code)) => failed(core, code, CALL),
                Err(e) => e,
            };
            let _ = core.abort(why.clone());
            *fired.borrow_mut() = Some(why);
            KeepWaiting::until_idle()
        };
        let result = stream.scope_within(POLL.min(within), on_overrun, f);
        if let Some(why) = fired.into_inner() {
            return Err(E::from(why));
        }
        let value = result?;
        match core.async_state(CALL) {
            Ok(None) | Ok(Some(NcclCode::InProgress)) => Ok(value),
            Ok(Some(code)) => {
                let why = failed(core, code, CALL);
                let _ = core.abort(why.clone());
                Err(E::from(why))
            }
            Err(e) => Err(E::from(e)),
        }
    }
}

/// The error of an asynchronous failure `code` found by `what`, after which the
/// communicator is aborted.
fn failed(core: &Core, code: NcclCode, what: &'static str) -> Error {
    let e = sys::failure("ncclCommGetAsyncError", code);
    Error::with_detail(
        what,
        e.code(),
        format!(
            "rank {} of {}: NCCL reports an asynchronous error ({e}): a peer died or the network failed; the communicator is aborted",
            core.rank, core.ranks
        ),
    )
}
