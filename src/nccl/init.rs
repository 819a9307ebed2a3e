//! Communicators spanning processes, made the way launchers start programs
//! ([`Communicator::from_env`], [`Communicator::from_world`]), and what they need beyond a
//! clique's: sub-communicators ([`Communicator::split`]), an end
//! ([`finalize`](Communicator::finalize), [`abort`](Communicator::abort)), and scopes that
//! fail instead of hanging ([`Communicator::scope_within`]).

use std::cell::{OnceCell, RefCell};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use super::comm::{Communicator, Core, Origin, check_primary};
use super::state::{Ended, poll_until};
use super::sys::{self, Status, ncclComm_t};
use super::world::{World, nccl_comm_id};
use super::{NcclCode, UniqueId, rendezvous};
use crate::context::ContextGuard;
use crate::driver;
use crate::error::{Error, ErrorCode, Result};
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
    ///     let stream = ctx.stream()?;
    ///     comm.scope_within(&stream, Duration::from_secs(30), |s| {
    ///         comm.all_reduce_in_place(s, &mut x, ReduceOp::Sum)
    ///     })?;
    ///     let n = comm.ranks() as f32;
    ///     assert_eq!(x.to_vec()?[0], n * (n - 1.0) / 2.0);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn from_env(ctx: ContextGuard<'ctx>, within: Duration) -> Result<Communicator<'ctx>> {
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
    ///    `blocking = 0`), polled (`ncclCommGetAsyncError`) against the deadline.
    ///
    /// A rank that never arrives, a wrong world size, a taken port, a rank 0 that never
    /// answers: each is an error naming the cause before `within` has passed
    /// ([`ErrorCode::NcclTimeout`], [`ErrorCode::NcclRendezvous`], NCCL's own code), and
    /// a communicator NCCL had started is aborted (`ncclCommAbort`). `within` is also the
    /// longest the communicator's later background work may take (a non-blocking
    /// communicator's operations are queued by a thread of NCCL's), after which it is
    /// aborted.
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
    /// Needs NCCL 2.14 or newer (`ncclCommInitRankConfig`).
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
    pub fn from_world(
        ctx: ContextGuard<'ctx>,
        world: &World,
        within: Duration,
    ) -> Result<Communicator<'ctx>> {
        const CALL: &str = rendezvous::CALL;
        let start = Instant::now();
        let deadline = deadline_of(start, within);
        let device = ctx.device()?;
        check_primary(ctx, &device, CALL)?;
        let _one = one_at_a_time(deadline, within)?;
        let id = match nccl_comm_id() {
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
        let comm = Communicator::new(Core {
            raw,
            ctx: ctx.as_non_null(),
            rank,
            ranks: size,
            device,
            origin: Origin::World,
            non_blocking: Some(within),
            ended: OnceCell::new(),
        });
        if status == Status::InProgress {
            comm.core.settle_by(Some(deadline), CALL, || {
                format!(
                    "NCCL's initialisation did not finish within {within:?} of the call (a rank that never started or cannot reach the others, or a world size larger than the ranks started; {world})"
                )
            })?;
        }
        Ok(comm)
    }

    /// Splits the communicator (`ncclCommSplit`): every rank of this one calls `split`,
    /// and the ranks that give the same `colour` form a new communicator, ranked by `key`
    /// (then by their rank here); `None` (`NCCL_SPLIT_NOCOLOR`) takes part without joining
    /// any, and gets `Ok(None)`. The new communicator is this one's kind, on the same
    /// device and context, so it has the same brand: a non-blocking one (from
    /// [`from_world`](Communicator::from_world)) makes one, with the same deadline for
    /// its background work; one from the `unsafe` [`init_rank`](Communicator::init_rank)
    /// makes one under the same promise.
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
    ///     ctx.stream()?.scope(|s| half.all_reduce_in_place(s, &mut x, ReduceOp::Sum))?;
    ///     assert_eq!(x.to_vec()?, [half.ranks() as u64; 8]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn split(&self, colour: Option<u32>, key: u32) -> Result<Option<Communicator<'ctx>>> {
        const CALL: &str = "Communicator::split";
        let origin = match self.core.origin {
            Origin::Clique(_) => {
                return Err(Error::with_detail(
                    CALL,
                    ErrorCode::InvalidValue,
                    "a clique's communicators cannot be split: the crate checks a clique's ranks against each other, which it could not do for a split's; make a Clique of the devices wanted instead",
                ));
            }
            Origin::Rank => Origin::Rank,
            Origin::World => Origin::World,
        };
        let raw = self.core.live(CALL)?;
        let too_big = |what: &str, v: u32| {
            Error::with_detail(
                CALL,
                ErrorCode::InvalidValue,
                format!("the {what} {v} is larger than NCCL's largest, {}", i32::MAX),
            )
        };
        let colour = match colour {
            None => -1, // NCCL_SPLIT_NOCOLOR
            Some(c) => i32::try_from(c).map_err(|_| too_big("colour", c))?,
        };
        let key = i32::try_from(key).map_err(|_| too_big("key", key))?;
        // NCCL writes the new handle here when the split is complete, from its own thread
        // for a non-blocking communicator: the slot lives on the heap until then, and is
        // leaked if the split does not complete.
        let slot: Box<ncclComm_t> = Box::new(std::ptr::null_mut());
        let out = Box::into_raw(slot);
        let split = || {
            // SAFETY: a live communicator (checked above) whose primary context is current
            // (pushed by `keep_stack`); `out` is a heap slot freed only below, after the
            // split is complete.
            unsafe { sys::comm_split(raw, colour, key, out) }
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let status = unsafe { sys::keep_stack(Some(self.core.ctx), split) };
        // Whatever the split returned, NCCL's thread may still run it: `ncclCommSplit`
        // ends its group with `NCCLCHECK(ncclGroupEndInternal())`, which lets the
        // `ncclInProgress` of a non-blocking group through, and then returns its own
        // `ncclSuccess` (NCCL 2.28.9, init.cc). The group's thread writes the slot when the
        // split is done, and sets the parent's asynchronous state from `ncclInProgress`
        // (set before the thread starts) to the split's result after. So the parent is
        // settled every time (at once for a blocking one).
        let settled = self.core.settle(CALL);
        // On an error of either the slot is leaked: NCCL may not be done with it.
        status?;
        settled?;
        // SAFETY: the split is complete (the parent's state is no longer in progress, so
        // NCCL's thread has written the slot and is done with it); it came from
        // `Box::into_raw` above.
        let child = *unsafe { Box::from_raw(out) };
        let Some(child) = std::ptr::NonNull::new(child) else {
            return match colour {
                -1 => Ok(None),
                _ => Err(Error::with_detail(
                    CALL,
                    ErrorCode::Nccl(NcclCode::InternalError),
                    "NCCL made no communicator for a colour",
                )),
            };
        };
        self.adopt(child, origin, CALL).map(Some)
    }

    /// The communicator NCCL split off as `child`, after its initialisation is complete.
    fn adopt(
        &self,
        child: std::ptr::NonNull<super::ncclComm>,
        origin: Origin,
        what: &'static str,
    ) -> Result<Communicator<'ctx>> {
        let mut core = Core {
            raw: child,
            ctx: self.core.ctx,
            rank: 0,
            ranks: 1,
            device: self.core.device,
            origin,
            non_blocking: self.core.non_blocking,
            ended: OnceCell::new(),
        };
        // the child's own state, in case its initialisation runs on (it aborts itself on
        // an error, and is then dropped without a destroy)
        core.settle(what)?;
        let count = || {
            // SAFETY: a live communicator whose initialisation is complete (settled).
            unsafe { sys::comm_rank_and_count(child.as_ptr()) }
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let counted = unsafe { sys::keep_stack(Some(self.core.ctx), count) };
        match counted {
            Ok((rank, ranks)) => {
                core.rank = rank;
                core.ranks = ranks;
                Ok(Communicator::new(core))
            }
            Err(e) => {
                let _ = core.abort(e.clone());
                Err(e)
            }
        }
    }

    /// Ends the communicator the orderly way: `ncclCommFinalize` (which flushes its work
    /// and closes its connections, together with the peers' finalize), then
    /// `ncclCommDestroy`. A non-blocking communicator's finalize is waited for up to its
    /// deadline and aborted past it or on an error, which is returned. A
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
            return Err(Error::with_detail(
                CALL,
                ErrorCode::InvalidValue,
                "a clique's communicators are destroyed with the clique: drop this one to hand it back",
            ));
        }
        let raw = self.core.live(CALL)?;
        let finalize = || {
            // SAFETY: a live communicator (checked above), finalized once: `self` is
            // consumed, and ends below.
            unsafe { sys::comm_finalize(raw) }
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let status = unsafe { sys::keep_stack(Some(self.core.ctx), finalize) };
        let finalized = match status {
            Ok(Status::Done) => Ok(()),
            Ok(Status::InProgress) => self.core.settle(CALL),
            Err(e) => {
                let _ = self.core.abort(e.clone());
                Err(e)
            }
        };
        finalized?;
        let destroy = || {
            // SAFETY: finalized, unused from now on (`ended` is set below, and `self` is
            // consumed); every scope that used it has synchronized.
            unsafe { sys::comm_destroy(raw) }
        };
        // SAFETY: the context is alive (the brand), current for the call.
        let destroyed = unsafe { sys::keep_stack(Some(self.core.ctx), destroy) };
        let _ = self.core.ended.set(Ended::Finalized);
        destroyed
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
    /// counts towards `within`.
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
    ///     let stream = ctx.stream()?;
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
