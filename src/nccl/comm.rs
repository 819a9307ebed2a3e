//! Communicators: [`Clique`] (one process, several devices: `ncclCommInitAll`),
//! [`Communicator`] (one rank, branded with its context) and [`UniqueId`] (the 128 bytes
//! that ranks of other processes share: `ncclGetUniqueId`, `ncclCommInitRank`).

use std::cell::{Cell, OnceCell};
use std::ffi::c_int;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cuda_driver_sys::CUctx_st;

use super::agreement::Agreement;
use super::state::{CliqueState, Core, Handle, Origin, Slot};
use super::sys::{self, Call, OpKind, Status, ncclComm_t};
use super::{NcclCode, ReduceOp};
use crate::context::{Brand, ContextGuard, Device, NoPhases, Unpartitioned};
use crate::driver::{self, CUstream};
use crate::error::{Error, ErrorCode, Invalid, Result};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The 128 bytes (`ncclUniqueId`) that every rank of a communicator spanning processes or
/// machines passes to [`Communicator::init_rank`]: one rank makes it with
/// [`UniqueId::new`], ships [`to_bytes`](UniqueId::to_bytes) to the others (a file, a
/// pipe, a socket, an MPI broadcast), and they rebuild it with
/// [`from_bytes`](UniqueId::from_bytes).
///
/// The bytes name a bootstrap address that the process which called `new` serves (NCCL
/// starts a thread for it there), so that process must keep running until every rank has
/// joined.
///
/// ```no_run
/// use cuda_brand::nccl::UniqueId;
/// # fn main() -> cuda_brand::Result<()> {
/// let id = UniqueId::new()?;
/// std::fs::write("/tmp/nccl-id", id.to_bytes()).unwrap();
/// // ... in another process:
/// let bytes = std::fs::read("/tmp/nccl-id").unwrap();
/// let same = UniqueId::try_from(bytes.as_slice())?;
/// assert_eq!(same, id);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId([u8; UniqueId::BYTES]);

impl UniqueId {
    /// `NCCL_UNIQUE_ID_BYTES`.
    pub const BYTES: usize = sys::UNIQUE_ID_BYTES;

    /// A new id (`ncclGetUniqueId`), served by this process. Needs the NCCL library, no
    /// GPU.
    pub fn new() -> Result<UniqueId> {
        Ok(UniqueId(sys::get_unique_id()?.internal))
    }

    /// The id whose bytes [`to_bytes`](UniqueId::to_bytes) gave.
    pub const fn from_bytes(bytes: [u8; UniqueId::BYTES]) -> UniqueId {
        UniqueId(bytes)
    }

    /// The id's bytes, to ship to the other ranks.
    pub const fn to_bytes(self) -> [u8; UniqueId::BYTES] {
        self.0
    }

    /// The id's bytes, borrowed.
    pub const fn as_bytes(&self) -> &[u8; UniqueId::BYTES] {
        &self.0
    }

    pub(crate) fn raw(&self) -> sys::ncclUniqueId {
        sys::ncclUniqueId { internal: self.0 }
    }
}

impl TryFrom<&[u8]> for UniqueId {
    type Error = Error;

    /// The id of exactly [`UniqueId::BYTES`] bytes; any other length is an error.
    fn try_from(bytes: &[u8]) -> Result<UniqueId> {
        match <[u8; UniqueId::BYTES]>::try_from(bytes) {
            Ok(bytes) => Ok(UniqueId(bytes)),
            Err(_) => Err(Error::invalid_input(
                "UniqueId::try_from",
                Invalid::LengthMismatch {
                    expected: UniqueId::BYTES,
                    found: bytes.len(),
                },
            )),
        }
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UniqueId(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// Makes [`Communicator`] `Send` but not `Sync`: NCCL communicators are not thread-safe,
/// one thread may use one at a time. Named after the rule, because the compiler quotes this
/// name when a communicator is shared between threads.
///
/// The impl below, whose bound nothing implements, makes the compiler begin that error with
/// [`SharedByThreads`]'s message rather than "`Cell<()>` cannot be shared between threads
/// safely" (the field's reason, whose note suggests a lock). `T` is always `()`: a bound on
/// a type without parameters would be checked where it is written.
struct OneThreadAtATimePerCommunicator<T = ()> {
    _not_sync: PhantomData<(Cell<()>, T)>,
}

/// The rule that [`OneThreadAtATimePerCommunicator`] stands for, as the compiler states it.
/// Implemented by nothing.
#[diagnostic::on_unimplemented(
    message = "a `Communicator` is used by one thread at a time: it can move to another thread, but not be shared with one",
    label = "the communicator would be shared with another thread here",
    note = "NCCL's communicators are not thread-safe: move the communicator to the thread that uses it, or make one rank per thread",
    note = "see `cuda_brand::nccl`"
)]
trait SharedByThreads {}

// SAFETY: never holds: nothing implements `SharedByThreads`.
unsafe impl<T> Sync for OneThreadAtATimePerCommunicator<T> where Self: SharedByThreads {}

/// One rank of an NCCL communicator, in the primary context branded `'ctx` of its device.
///
/// Made by [`Clique::communicator`] (every rank in this process, from `ncclCommInitAll`),
/// by [`Communicator::from_env`] or [`from_world`](Communicator::from_world) (this
/// process's rank of a communicator spanning processes or machines, started by a launcher:
/// a non-blocking control communicator made against a deadline, and a blocking one split
/// from it that runs the operations), by
/// [`split`](Communicator::split), or by the `unsafe` [`Communicator::init_rank`]
/// (`ncclCommInitRank`, with an id shipped by hand). Its operations are queued through a stream scope of the
/// same context ([`Communicator::all_reduce`] and the
/// others), or through a [`group`](super::group): the brand keeps the communicator, the
/// stream and every buffer in one context, and the scope keeps them borrowed until the
/// stream has run the operation.
///
/// `Send` (it may move to the thread that runs its context's streams) but not `Sync`:
/// NCCL lets one thread at a time use a communicator.
///
/// ```no_run
/// use cuda_brand::nccl::{Clique, ReduceOp};
/// use cuda_brand::{Device, with_primary_context};
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// let clique = Clique::new(&[device])?;
/// with_primary_context(&device, |ctx| {
///     let comm = clique.communicator(ctx)?; // a `Communicator` of this context
///     assert_eq!((comm.rank(), comm.ranks()), (0, 1));
///     let mut counts = ctx.from_slice(&[5u64, 7, 9])?;
///     ctx.new_stream()?.scope(|s| comm.all_reduce_in_place(s, &mut counts, ReduceOp::Max))?;
///     comm.async_error()?; // nothing went wrong in the background
///     Ok(())
/// }) // the communicator goes back to the clique before the context is released
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: communicators of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::nccl::{Clique, Communicator};
///
/// /// Takes two communicators of one context.
/// fn one_context<'ctx>(_: &Communicator<'ctx>, _: &Communicator<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
/// let clique = Clique::new(&[d0, d1])?;
/// with_primary_context(&d0, |a| {
///     let on_a = clique.communicator(a)?;
///     with_primary_context(&d1, |b| {
///         let on_b = clique.communicator(b)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Communicator<'ctx> {
    pub(crate) core: Core,
    /// Invariant in `'ctx` (the crate's `Brand`): the communicator, the stream and the
    /// buffers of an operation share one brand, so one context. Were it covariant,
    /// communicators of two contexts (two ranks) could be shortened to one brand and pass
    /// for one another.
    _brand: Brand<'ctx>,
    _one_thread: PhantomData<OneThreadAtATimePerCommunicator>,
}

impl fmt::Debug for Communicator<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Communicator")
            .field("raw", &self.core.raw)
            .field("rank", &self.core.rank)
            .field("ranks", &self.core.ranks)
            .field("device", &self.core.device.ordinal())
            .finish()
    }
}

impl<'ctx> Communicator<'ctx> {
    pub(super) fn new(core: Core) -> Self {
        Communicator {
            core,
            _brand: PhantomData,
            _one_thread: PhantomData,
        }
    }

    /// Joins rank `rank` of the `ranks`-rank communicator that `id` names
    /// (`ncclCommInitRank`), on the device of `ctx`, which must be that device's primary
    /// context ([`with_primary_context`](crate::with_primary_context)): NCCL calls
    /// `cudaSetDevice`, which makes the primary context current. Blocks until all `ranks`
    /// ranks have joined: call it from one thread (or process) per rank.
    ///
    /// Checked before NCCL is called: `rank < ranks`, and that `ctx` is a primary context.
    ///
    /// Several ranks in one process (one thread per device) are better made with a
    /// [`Clique`]: it needs no `unsafe`, and it opens the crate's memory pools of its
    /// devices to each other, which NCCL 2.22 and older need there (they write the receive
    /// buffers of ranks in the same process directly; memory of a pool that does not allow
    /// the writing device faults with an illegal address).
    ///
    /// # Safety
    ///
    /// The other ranks run in other threads, processes or machines, where this crate cannot
    /// see them. The caller promises that they issue the operations this rank issues, in the
    /// same order: the same collectives with the same element type, count, reduction and
    /// root, and for every [`send`](Communicator::send) a
    /// [`recv`](Communicator::recv) of the same type and count on the peer (for
    /// instance: every rank runs the same program); the same for every communicator
    /// [`split`](Communicator::split) from this one. NCCL does not check this; where ranks
    /// disagree, a peer can write past the end of this rank's buffers (NCCL lets ranks of
    /// one process write each other's receive buffers directly: `P2P/direct pointer`, in
    /// 2.28 still) or every rank hangs. Each rank's own buffers are checked against its own
    /// counts. Communicators from a [`Clique`] need no such promise: the crate sees every
    /// rank and checks them against each other; nor do those of
    /// [`from_world`](Communicator::from_world), which puts one rank per process (see
    /// [the module docs](super#across-processes-and-machines)).
    ///
    /// ```no_run
    /// use cuda_brand::nccl::{Communicator, ReduceOp, UniqueId};
    /// use cuda_brand::{Device, with_primary_context};
    /// # fn main() -> cuda_brand::Result<()> {
    /// // in each of two processes, `rank` 0 or 1, the id read from where rank 0 wrote it
    /// # let (rank, id) = (0usize, UniqueId::from_bytes([0; 128]));
    /// let device = Device::get(rank)?;
    /// with_primary_context(&device, |ctx| {
    ///     // SAFETY: both processes run this same code: the same collectives, in order.
    ///     let comm = unsafe { Communicator::init_rank(ctx, &id, 2, rank) }?;
    ///     let mut x = ctx.from_slice(&[rank as f32 + 1.0; 4])?;
    ///     ctx.new_stream()?.scope(|s| comm.all_reduce_in_place(s, &mut x, ReduceOp::Sum))?;
    ///     assert_eq!(x.to_vec()?, [3.0; 4]); // 1 + 2 on both ranks
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub unsafe fn init_rank<P: NoPhases, S: Unpartitioned>(
        ctx: ContextGuard<'ctx, P, S>,
        id: &UniqueId,
        ranks: usize,
        rank: usize,
    ) -> Result<Communicator<'ctx>> {
        let ctx = ctx.unphased();
        const CALL: &str = "Communicator::init_rank";
        if ranks == 0 || rank >= ranks || ranks > c_int::MAX as usize {
            return Err(Error::invalid_input(
                CALL,
                Invalid::argument(format!(
                    "rank {rank} of {ranks}: a communicator has 1 or more ranks, numbered from 0"
                )),
            ));
        }
        let device = ctx.device()?;
        check_primary(ctx, &device, CALL)?;
        let raw_id = id.raw();
        let init = || {
            // SAFETY: the device's primary context is current (pushed by `keep_stack`).
            unsafe { sys::comm_init_rank(ranks as c_int, &raw_id, rank as c_int) }
        };
        // SAFETY: `ctx` is alive (the guard) and the primary context of `device`, made
        // current for the call, as `comm_init_rank` needs.
        let comm = unsafe { sys::keep_stack(Some(ctx.as_non_null()), init) }?;
        let raw = driver::non_null("ncclCommInitRank", comm)?;
        Ok(Communicator::new(Core {
            raw,
            ctx: ctx.as_non_null(),
            rank,
            ranks,
            device,
            origin: Origin::Rank,
            control: None,
            ended: OnceCell::new(),
        }))
    }

    /// This communicator's rank, from 0.
    pub fn rank(&self) -> usize {
        self.core.rank
    }

    /// The number of ranks of the communicator.
    pub fn ranks(&self) -> usize {
        self.core.ranks
    }

    /// The device this rank runs on.
    pub fn device(&self) -> Device {
        self.core.device
    }

    /// The communicator's asynchronous error state (`ncclCommGetAsyncError`): `Ok` while it
    /// is healthy, the error (with NCCL's last message, `ncclGetLastError`) once NCCL has
    /// noticed a failure in work already queued: a peer that exited, a network error. Poll
    /// it between operations; operations queued after an asynchronous error may never
    /// complete: abort the communicator ([`abort`](Communicator::abort)), or run its work
    /// in [`scope_within`](Communicator::scope_within), which does. After an abort, the
    /// error is [`ErrorCode::NcclAborted`] with the reason.
    pub fn async_error(&self) -> Result<()> {
        match self.core.async_state("Communicator::async_error")? {
            None | Some(NcclCode::InProgress) => Ok(()),
            Some(code) => Err(sys::failure("ncclCommGetAsyncError", code)),
        }
    }

    /// Whether the communicator has been aborted (by [`scope_within`](Self::scope_within)
    /// after a missed deadline or an asynchronous error): then every call is refused with
    /// [`ErrorCode::NcclAborted`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use cuda_brand::nccl::{Communicator, ReduceOp, World};
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let world = World::from_env()?;
    /// cuda_brand::with_primary_context(&world.device()?, |ctx| {
    ///     let comm = Communicator::from_world(ctx, &world, Duration::from_secs(60))?;
    ///     let mut x = ctx.zeroed::<f32>(1024)?;
    ///     let stream = ctx.new_stream()?;
    ///     let step = comm.scope_within(&stream, Duration::from_secs(5), |s| {
    ///         comm.all_reduce_in_place(s, &mut x, ReduceOp::Sum)
    ///     });
    ///     if step.is_err() && comm.is_aborted() {
    ///         eprintln!("a peer is gone: this rank stops");
    ///     }
    ///     step
    /// })
    /// # }
    /// ```
    pub fn is_aborted(&self) -> bool {
        self.core.ended.get().is_some()
    }

    /// NCCL's handle (`ncclComm_t`) of the communicator the operations run on (for one of
    /// [`from_world`](Communicator::from_world), the blocking half of its pair), for calls
    /// this crate does not wrap; null once the communicator has been aborted ([`is_aborted`](Self::is_aborted)), when NCCL has
    /// freed it.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: the communicator
    /// is not destroyed, finalized or aborted (`ncclCommDestroy`, `ncclCommFinalize`,
    /// `ncclCommAbort`), nor split; the handle is not used after this `Communicator` is
    /// dropped or aborted; no buffer of this crate is registered with it
    /// (`ncclCommRegister`, `ncclCommWindowRegister`, or a CUDA graph capturing its
    /// operations), which would let peers in other processes write it directly; and
    /// operations queued with it keep the communicator's contract (every rank issues the
    /// same operations in the same order) and touch this crate's memory only as a stream
    /// scope would (alive and used by nothing else until the operation has finished).
    #[inline]
    pub unsafe fn as_raw(&self) -> ncclComm_t {
        match self.core.ended.get() {
            None => self.core.raw.as_ptr(),
            Some(_) => std::ptr::null_mut(),
        }
    }
}

impl Drop for Communicator<'_> {
    fn drop(&mut self) {
        match &self.core.origin {
            Origin::Clique(state) => {
                // back to the clique, for another context of the device to claim, unless
                // it was aborted (NCCL freed it: the slot says so, and the clique's drop
                // leaves it alone)
                lock(&state.slots)[self.core.rank] = match self.core.ended.get() {
                    None => Slot::Free(self.core.raw),
                    Some(_) => Slot::Aborted,
                };
            }
            Origin::Rank | Origin::World => self.core.end_on_drop(),
        }
    }
}

/// Refuses a context that is not the primary context of `device`: NCCL calls
/// `cudaSetDevice`, which makes the primary context current, and launches its kernels
/// there, so a stream of any other context would be another context's stream to it.
pub(super) fn check_primary(
    ctx: ContextGuard<'_>,
    device: &Device,
    call: &'static str,
) -> Result<()> {
    let (_, active) = driver::primary_ctx_state(device.as_raw())?;
    let is_primary = active && {
        let primary = driver::primary_ctx_retain(device.as_raw())?;
        // SAFETY: balances the retain just made (the primary context is active, so this
        // neither creates nor destroys it).
        unsafe { driver::primary_ctx_release(device.as_raw()) }?;
        primary == ctx.raw()
    };
    if is_primary {
        Ok(())
    } else {
        Err(not_primary(call, device))
    }
}

#[cold]
fn not_primary(call: &'static str, device: &Device) -> Error {
    Error::with_detail(
        call,
        ErrorCode::InvalidContext,
        format!(
            "NCCL works in the primary context of device {} (it calls cudaSetDevice, which makes that context current): open it with with_primary_context, not with_context",
            device.ordinal()
        ),
    )
}

impl Core {
    /// Checks `call` against the other ranks of a clique (see [`Agreement`]); a communicator from
    /// `init_rank` has none the crate can see.
    pub(crate) fn admit(&self, call: &Call, what: &'static str) -> Result<()> {
        match &self.origin {
            Origin::Clique(state) => lock(&state.agreement).admit(self.rank, call, what),
            Origin::Rank | Origin::World => Ok(()),
        }
    }

    /// Marks the clique unusable after NCCL failed one of its operations: peers may already
    /// have queued their side of it, so the ranks' sequences no longer match.
    pub(crate) fn poison(&self, why: &Error) {
        if let Origin::Clique(state) = &self.origin {
            lock(&state.agreement).poison(why.to_string());
        }
    }

    /// Queues `call` on `stream` (see [`sys::launch`]); poisons the clique when NCCL fails.
    /// Refused once the communicator has been aborted. Runs on the operations
    /// communicator, which is blocking: NCCL queues the operation before it returns (were
    /// it made non-blocking by `NCCL_COMM_BLOCKING=0`, its `ncclInProgress` is waited for,
    /// [`Core::settle`]; inside a group, the group's end waits).
    ///
    /// # Safety
    /// As [`sys::launch`], for this communicator (live: checked here) and its context
    /// (made current here): `stream` is a live stream of the context, and the call's ranges
    /// are valid, admitted ([`Core::admit`]), promised (`init_rank`) to match the peers or
    /// out of their reach (`from_world`: one rank per process), and left alone until the
    /// stream has run it.
    pub(crate) unsafe fn launch(
        &self,
        call: &Call,
        stream: CUstream,
        what: &'static str,
    ) -> Result<()> {
        let raw = self.live(what)?;
        let call = exact_one_rank(call, self.ranks, sys::version()?);
        let queue = || {
            // SAFETY: the caller's promise (the call reads and writes what `call` did: the
            // same kind, pointers, count and type); the communicator is alive (checked by
            // `live` above).
            unsafe { sys::launch(raw, &call, stream) }
        };
        // SAFETY: the context is alive (the communicator's brand), current for the call.
        let done = unsafe { sys::keep_stack(Some(self.ctx), queue) };
        match done {
            Ok(Status::Done) => Ok(()),
            // a thread of NCCL's queues it (only where NCCL_COMM_BLOCKING=0 made the
            // operations communicator non-blocking): wait for that (or abort)
            Ok(Status::InProgress) => self.settle(Handle::Ops, what),
            Err(e) => {
                self.poison(&e);
                Err(e)
            }
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn ranks(&self) -> usize {
        self.ranks
    }
}

/// The first NCCL whose one-rank `ncclAvg` writes every element: 2.29.7 (NVIDIA/nccl issue
/// 1950, see [`ReduceOp::Avg`]).
const ONE_RANK_AVG_FIXED: i32 = 22907;

/// `call` as NCCL `version` is given it on a communicator of `ranks` ranks: a one-rank
/// `Avg` reduction on an NCCL older than 2.29.7 becomes `Sum`, the exact path (the sum, and
/// the average, over one rank is the input; NCCL runs it as a copy, or nothing in place).
/// NCCL queues a one-rank collective when it is called, inside a group or not, whichever
/// the operation: the substitute is queued exactly where the `ncclAvg` would have been.
fn exact_one_rank(call: &Call, ranks: usize, version: i32) -> Call {
    let reduces = matches!(
        call.kind,
        OpKind::AllReduce | OpKind::Reduce | OpKind::ReduceScatter
    );
    if reduces && ranks == 1 && call.op == ReduceOp::Avg.raw() && version < ONE_RANK_AVG_FIXED {
        Call {
            op: ReduceOp::Sum.raw(),
            ..*call
        }
    } else {
        *call
    }
}

/// Every rank of an NCCL communicator in this process, one per device
/// (`ncclCommInitAll`): each rank is claimed, as a [`Communicator`] branded with its
/// context, inside that device's primary context with [`Clique::communicator`].
///
/// `ncclCommInitAll` makes all the ranks at once, but each rank belongs to its own
/// device's context, and every context has its own brand. So the clique itself carries no
/// brand: it holds the communicators (and a retain of each device's primary context, so
/// they stay valid as long as it lives), and hands out each rank at most once at a time,
/// branded with the guard it is claimed with. A dropped communicator goes back to the
/// clique; the communicators are destroyed with the clique's last owner.
///
/// Because the crate sees every rank of a clique, it checks them against each other: a
/// rank's collective must match the other ranks' collective of the same place in their
/// sequences (the same operation, element type, count, reduction and root), and a send the
/// matching receive (type and count); a mismatch is refused before NCCL sees it, and leaves
/// the clique unusable (its later operations are refused too: an operation other ranks
/// already queued can no longer complete).
///
/// Where several devices can reach each other's memory, the crate's memory pools of the
/// clique's devices are opened to each other (`cuMemPoolSetAccess`): NCCL 2.22 and older
/// let ranks of one process write each other's buffers directly.
///
/// ```no_run
/// use cuda_brand::nccl::{Clique, ReduceOp, group};
/// use cuda_brand::{Device, with_primary_context};
/// # fn main() -> cuda_brand::Result<()> {
/// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
/// let clique = Clique::new(&[d0, d1])?;
/// with_primary_context(&d0, |c0| {
///     with_primary_context(&d1, |c1| {
///         let (comm0, comm1) = (clique.communicator(c0)?, clique.communicator(c1)?);
///         let (mut x0, mut x1) = (c0.from_slice(&[1u32; 4])?, c1.from_slice(&[2u32; 4])?);
///         let (s0, s1) = (c0.new_stream()?, c1.new_stream()?);
///         // one thread drives both devices: both ranks' all-reduce in one group
///         s0.scope(|a| {
///             s1.scope(|b| {
///                 group(|g| {
///                     g.on(a).all_reduce_in_place(&comm0, &mut x0, ReduceOp::Sum)?;
///                     g.on(b).all_reduce_in_place(&comm1, &mut x1, ReduceOp::Sum)
///                 })
///             })
///         })?;
///         assert_eq!((x0.to_vec()?, x1.to_vec()?), (vec![3; 4], vec![3; 4]));
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Clique {
    state: Arc<CliqueState>,
}

impl fmt::Debug for Clique {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let devices: Vec<usize> = self.state.devices.iter().map(Device::ordinal).collect();
        f.debug_struct("Clique").field("devices", &devices).finish()
    }
}

impl Clique {
    /// One communicator per device of `devices`, rank `i` on `devices[i]`
    /// (`ncclCommInitAll`). NCCL refuses a device listed twice (`ncclInvalidUsage`).
    pub fn new(devices: &[Device]) -> Result<Clique> {
        const CALL: &str = "Clique::new";
        if devices.is_empty() {
            return Err(Error::invalid_input(
                CALL,
                Invalid::argument("a clique needs at least one device"),
            ));
        }
        // NCCL works in each device's primary context: not while one is partitioned
        for device in devices {
            crate::context::confined::refuse_partitioned(CALL, device.as_raw())?;
        }
        let mut retained: Vec<(Device, NonNull<CUctx_st>)> = Vec::with_capacity(devices.len());
        let release_all = |retained: &[(Device, NonNull<CUctx_st>)]| {
            for (device, _) in retained {
                // SAFETY: balances one retain below; nothing of the clique uses it.
                let _ = unsafe { driver::primary_ctx_release(device.as_raw()) };
            }
        };
        for device in devices {
            let primary = driver::primary_ctx_retain(device.as_raw())
                .and_then(|p| driver::non_null("cuDevicePrimaryCtxRetain", p));
            match primary {
                Ok(p) => retained.push((*device, p)),
                Err(e) => {
                    release_all(&retained);
                    return Err(e);
                }
            }
        }
        let built = open_pools_to_each_other(devices).and_then(|()| {
            let ordinals: Vec<c_int> = devices.iter().map(|d| d.ordinal() as c_int).collect();
            // SAFETY: the first device's primary context, retained above, is current for
            // the call (NCCL saves and restores the current device around it).
            let comms =
                unsafe { sys::keep_stack(Some(retained[0].1), || sys::comm_init_all(&ordinals)) }?;
            comms
                .into_iter()
                .map(|c| driver::non_null("ncclCommInitAll", c))
                .collect::<Result<Vec<_>>>()
        });
        let comms = match built {
            Ok(comms) => comms,
            Err(e) => {
                release_all(&retained);
                return Err(e);
            }
        };
        let ranks = devices.len();
        Ok(Clique {
            state: Arc::new(CliqueState {
                devices: devices.to_vec(),
                primaries: retained.iter().map(|(_, p)| *p).collect(),
                slots: Mutex::new(comms.iter().copied().map(Slot::Free).collect()),
                comms,
                agreement: Mutex::new(Agreement::new(ranks)),
            }),
        })
    }

    /// The number of ranks (devices).
    pub fn ranks(&self) -> usize {
        self.state.devices.len()
    }

    /// The devices, rank by rank.
    pub fn devices(&self) -> &[Device] {
        &self.state.devices
    }

    /// Claims the rank of `ctx`'s device, branded with `ctx`, which must be that device's
    /// primary context ([`with_primary_context`](crate::with_primary_context)). A rank has
    /// one communicator at a time: claiming it again while it is claimed is an error; once
    /// the communicator is dropped, the rank can be claimed again (by another
    /// `with_primary_context` of the device, or another thread).
    pub fn communicator<'ctx, P: NoPhases, S: Unpartitioned>(
        &self,
        ctx: ContextGuard<'ctx, P, S>,
    ) -> Result<Communicator<'ctx>> {
        let ctx = ctx.unphased();
        const CALL: &str = "Clique::communicator";
        let state = &self.state;
        let mut slots = lock(&state.slots);
        let mut seen = false;
        for rank in 0..state.primaries.len() {
            if state.primaries[rank] != ctx.as_non_null() {
                continue;
            }
            seen = true;
            match std::mem::replace(&mut slots[rank], Slot::Claimed) {
                Slot::Free(raw) => {
                    return Ok(Communicator::new(Core {
                        raw,
                        ctx: state.primaries[rank],
                        rank,
                        ranks: state.primaries.len(),
                        device: state.devices[rank],
                        origin: Origin::Clique(Arc::clone(state)),
                        control: None,
                        ended: OnceCell::new(),
                    }));
                }
                Slot::Aborted => {
                    slots[rank] = Slot::Aborted;
                    return Err(Error::with_detail(
                        CALL,
                        ErrorCode::NcclAborted,
                        "this device's rank was aborted: make a new clique",
                    ));
                }
                Slot::Claimed => {}
            }
        }
        drop(slots);
        if seen {
            return Err(Error::invalid_input(
                CALL,
                Invalid::argument(
                    "this device's rank is claimed already: a rank has one communicator at a time (drop it to claim it again)",
                ),
            ));
        }
        let device = ctx.device()?;
        if state.devices.contains(&device) {
            Err(not_primary(CALL, &device))
        } else {
            Err(Error::with_detail(
                CALL,
                ErrorCode::InvalidDevice,
                format!("device {} has no rank in this clique", device.ordinal()),
            ))
        }
    }
}

/// Lets every device of `devices` read and write the crate's memory pool of every other
/// one it can reach (`cuDeviceCanAccessPeer`): NCCL 2.22 and older write the receive
/// buffers of ranks in the same process directly, and pool memory, unlike `cuMemAlloc`
/// memory, is reachable from another device only once its pool allows it.
fn open_pools_to_each_other(devices: &[Device]) -> Result<()> {
    for owner in devices {
        let Some(pool) = crate::memory::pool::crate_pool(owner.as_raw())? else {
            continue;
        };
        for other in devices {
            if other == owner || !other.can_access_peer(owner)? {
                continue;
            }
            // SAFETY: the crate's pool of `owner`, alive for the whole process.
            unsafe { driver::mem_pool_allow_device(pool, other.as_raw()) }?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nccl::agreement::tests::call;

    #[test]
    fn a_unique_id_is_its_bytes() {
        let mut bytes = [0u8; 128];
        bytes[0] = 2;
        bytes[127] = 0xff;
        let id = UniqueId::from_bytes(bytes);
        assert_eq!(id.to_bytes(), bytes);
        assert_eq!(UniqueId::try_from(&bytes[..]).unwrap(), id);
        let e = UniqueId::try_from(&bytes[..100]).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&crate::error::Invalid::LengthMismatch {
                expected: 128,
                found: 100
            })
        );
        assert_eq!(format!("{id:?}"), "UniqueId(0200000000000000..)");
    }

    #[test]
    fn a_one_rank_avg_becomes_sum_before_nccl_2_29_7_and_nothing_else_changes() {
        let avg = |kind| Call {
            op: ReduceOp::Avg.raw(),
            ..call(kind, 65_539, 9, 0)
        };
        for kind in [OpKind::AllReduce, OpKind::Reduce, OpKind::ReduceScatter] {
            // PyTorch's NCCL 2.28.9, the last one with the bug, the oldest the crate loads
            for version in [22809, 22906, sys::MINIMUM_NCCL] {
                let sent = exact_one_rank(&avg(kind), 1, version);
                assert_eq!(sent.op, ReduceOp::Sum.raw(), "{kind:?}, NCCL {version}");
                assert_eq!(
                    Call {
                        op: avg(kind).op,
                        ..sent
                    },
                    avg(kind),
                    "only the operation changes"
                );
            }
            // fixed in 2.29.7; several ranks never take the one-rank kernel
            assert_eq!(exact_one_rank(&avg(kind), 1, 22907), avg(kind));
            assert_eq!(exact_one_rank(&avg(kind), 1, 23004), avg(kind));
            assert_eq!(exact_one_rank(&avg(kind), 2, 22809), avg(kind));
        }
        // other operations and kinds pass as they are
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
            let c = Call {
                op: op.raw(),
                ..call(OpKind::AllReduce, 3, 9, 0)
            };
            assert_eq!(exact_one_rank(&c, 1, 22809), c);
        }
        for kind in [
            OpKind::Broadcast,
            OpKind::AllGather,
            OpKind::Send,
            OpKind::Recv,
        ] {
            let c = Call {
                op: ReduceOp::Avg.raw(),
                ..call(kind, 3, 9, 0)
            };
            assert_eq!(exact_one_rank(&c, 1, 22809), c);
        }
    }
}
