//! NCCL groups ([`group`], [`Group`], [`Grouped`]): operations of several scopes recorded
//! in one group and queued together when its closure returns.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;

use super::comm::Communicator;
use super::state::Core;
use super::state::Handle;
use super::sys;
use super::{NcclType, ReduceOp};
use crate::context::StreamKind;
use crate::driver::CUstream;
use crate::error::{Error, ErrorCode, Result};
use crate::scope::{IntoDeviceMut, IntoDeviceRef, StreamScope};

use super::ops::{Prepared, prepare};
use crate::launch::sealed::Crate;

/// The NCCL operations of a scope in a group: the same as [`Communicator`]'s on a scope,
/// recorded in the group and queued when its closure returns.
impl<'g, 'outer, 'scope, 'env, 'ctx, K: StreamKind> Grouped<'g, 'outer, 'scope, 'env, 'ctx, K>
where
    'scope: 'outer,
{
    /// [`Communicator::all_reduce`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn all_reduce<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::all_reduce";
        let p = prepare::all_reduce::<T>(
            &comm.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            op,
            WHAT,
        )?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::all_reduce_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn all_reduce_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::all_reduce_in_place";
        let p = prepare::all_reduce_in_place::<T>(&comm.core, buf.into_mut(Crate(())), op, WHAT)?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::broadcast`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn broadcast<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        root: usize,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::broadcast";
        let p = prepare::broadcast::<T>(
            &comm.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            root,
            WHAT,
        )?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::broadcast_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn broadcast_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        root: usize,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::broadcast_in_place";
        let p = prepare::broadcast_in_place::<T>(&comm.core, buf.into_mut(Crate(())), root, WHAT)?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::reduce`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn reduce<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::reduce";
        let p = prepare::reduce::<T>(
            &comm.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            op,
            root,
            WHAT,
        )?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::reduce_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn reduce_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::reduce_in_place";
        let p = prepare::reduce_in_place::<T>(&comm.core, buf.into_mut(Crate(())), op, root, WHAT)?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::all_gather`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn all_gather<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::all_gather";
        let p = prepare::all_gather::<T>(
            &comm.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            WHAT,
        )?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::all_gather_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn all_gather_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::all_gather_in_place";
        let p = prepare::all_gather_in_place::<T>(&comm.core, buf.into_mut(Crate(())), WHAT)?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::reduce_scatter`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn reduce_scatter<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::reduce_scatter";
        let p = prepare::reduce_scatter::<T>(
            &comm.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            op,
            WHAT,
        )?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::reduce_scatter_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn reduce_scatter_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::reduce_scatter_in_place";
        let p =
            prepare::reduce_scatter_in_place::<T>(&comm.core, buf.into_mut(Crate(())), op, WHAT)?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::send`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn send<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        peer: usize,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::send";
        let p = prepare::send::<T>(&comm.core, src.into_ref(Crate(())), peer, WHAT)?;
        self.defer(&comm.core, p, WHAT)
    }

    /// [`Communicator::recv`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn recv<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        peer: usize,
    ) -> Result<()> {
        const WHAT: &str = "Grouped::recv";
        let p = prepare::recv::<T>(&comm.core, dst.into_mut(Crate(())), peer, WHAT)?;
        self.defer(&comm.core, p, WHAT)
    }
}

/// Makes [`Group`] neither `Send` nor `Sync`: NCCL's group state belongs to the thread.
struct GroupsStayOnTheirThread {
    _not_send: PhantomData<*const ()>,
}

/// An open NCCL group (`ncclGroupStart` ... `ncclGroupEnd`), handed to the closure of
/// [`group`]. Operations are added with [`Group::on`]: `g.on(scope).all_reduce(...)`.
///
/// `'outer` is a region that every scope used by the group outlives: the scopes must have
/// been opened outside the group's closure, since the group queues its operations after
/// the closure returns, and each scope must still be open then (it synchronizes its stream
/// only when it ends). A scope opened inside the closure does not compile.
///
/// # The brand
///
/// `'outer` is invariant, so a scope opened inside the group's closure does not compile
/// (the group queues its operations after the closure returns, when that scope has ended):
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::nccl::group;
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_primary_context(&device, |ctx| {
///     let stream = ctx.stream()?;
///     group(|g| {
///         stream.scope(|s| {
///             let _ = g.on(s); // a scope opened in the group's closure: does not compile
///             Ok(())
///         })
///     })
/// })
/// # }
/// ```
pub struct Group<'outer> {
    pending: RefCell<Vec<Pending<'outer>>>,
    /// Invariant in `'outer`: every scope the group uses outlives it (`Group::on` requires
    /// `'scope: 'outer`). Were it covariant, the closure could shorten its `&Group<'outer>`
    /// to its own body and use a scope opened inside it, which has ended (and stopped
    /// ordering its memory) by the time the group queues the operation. (The `RefCell` of
    /// `pending` makes the type invariant in `'outer` too; this field says so on purpose.)
    _outer: PhantomData<fn(&'outer ()) -> &'outer ()>,
    _thread: PhantomData<GroupsStayOnTheirThread>,
}

/// An operation recorded in a group, issued when the group's closure returns.
struct Pending<'outer> {
    comm: &'outer Core,
    stream: CUstream,
    prepared: Prepared,
    what: &'static str,
}

impl fmt::Debug for Group<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("operations", &self.pending.borrow().len())
            .finish()
    }
}

/// A [`StreamScope`] in a [`Group`]: the same NCCL operations as a [`Communicator`]'s on
/// the scope, recorded in the group and queued on the scope's stream when the group's
/// closure returns. Made by [`Group::on`]; `Copy`.
///
/// # The brand
///
/// Its brands are its scope's (`'scope`, `'env`, `'ctx`, invariant) and its group's
/// (`'outer`, invariant): scopes of two contexts in one group never have one type:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::nccl::{group, Grouped};
/// use cuda_brand::phase::Dynamic;
///
/// /// Takes two scopes in a group, of one context.
/// fn one_context<'ctx>(
///     _: Grouped<'_, '_, '_, '_, 'ctx, Dynamic>,
///     _: Grouped<'_, '_, '_, '_, 'ctx, Dynamic>,
/// ) {
/// }
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let stream_a = a.stream()?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let stream_b = b.stream()?;
///         stream_a.scope(|sa| {
///             stream_b.scope(|sb| {
///                 group(|g| {
///                     one_context(g.on(sa), g.on(sb)); // two contexts: does not compile
///                     Ok(())
///                 })
///             })
///         })
///     })
/// })
/// # }
/// ```
pub struct Grouped<'g, 'outer, 'scope, 'env, 'ctx, K: StreamKind> {
    group: &'g Group<'outer>,
    /// The brands are the scope's: `StreamScope` is invariant in `'scope`, `'env` and
    /// `'ctx`, and `Group` (behind `group`) in `'outer`, so this type is invariant in all
    /// four.
    scope: &'scope StreamScope<'scope, 'env, 'ctx, K>,
}

impl<K: StreamKind> Clone for Grouped<'_, '_, '_, '_, '_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: StreamKind> Copy for Grouped<'_, '_, '_, '_, '_, K> {}

impl<K: StreamKind> fmt::Debug for Grouped<'_, '_, '_, '_, '_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grouped")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl<'outer> Group<'outer> {
    /// The NCCL operations of `scope`, recorded in this group (see [`group`] for an
    /// example). `scope` must be a scope of
    /// one stream ([`Stream::scope`](crate::Stream::scope)), opened outside the group's
    /// closure: its stream is synchronized after the group has queued everything. (An
    /// operation on one of the streams of [`Stream::scope_all`](crate::Stream::scope_all)
    /// is an error: the order book that orders those streams assumes an operation is on
    /// its stream once its call returns, which a group's operation is not.)
    pub fn on<'g, 'scope, 'env, 'ctx, K: StreamKind>(
        &'g self,
        scope: &'scope StreamScope<'scope, 'env, 'ctx, K>,
    ) -> Grouped<'g, 'outer, 'scope, 'env, 'ctx, K>
    where
        'scope: 'outer,
    {
        Grouped { group: self, scope }
    }

    /// Issues the recorded operations: checks them, then `ncclGroupStart`, each operation,
    /// `ncclGroupEnd`.
    fn issue(self) -> Result<()> {
        let pending = self.pending.into_inner();
        if pending.is_empty() {
            return Ok(());
        }
        // The group is one operation: NCCL may run its parts concurrently, so nothing one
        // part writes may be touched by another.
        for (i, a) in pending.iter().enumerate() {
            for b in &pending[i + 1..] {
                for (x, sa) in a.prepared.spans().iter().enumerate() {
                    for (y, sb) in b.prepared.spans().iter().enumerate() {
                        if (sa.write || sb.write) && sa.overlaps(sb) {
                            return Err(group_overlap(a, x, b, y));
                        }
                    }
                }
            }
        }
        // Every communicator's operations run on a blocking NCCL communicator (a clique's,
        // `init_rank`'s, and the operations communicator of a pair: `pair.rs`), so the
        // group is blocking: NCCL refuses to mix blocking and non-blocking ones, which
        // `NCCL_COMM_BLOCKING` would make all one mode or the other.
        // From the first admission on, any failure leaves the cliques' books ahead of what
        // NCCL was given: every clique of the group is then poisoned.
        let poison_all = |e: &Error| {
            for p in &pending {
                p.comm.poison(e);
            }
        };
        let started = pending
            .iter()
            .try_for_each(|p| p.comm.admit(&p.prepared.call, p.what))
            .and_then(|()| sys::group_start());
        if let Err(e) = started {
            poison_all(&e);
            return Err(e);
        }
        // Should anything below panic, the group is still closed (its operations then run,
        // and the scopes, unwinding after this call, wait for them): an NCCL group left
        // open would defer every later operation of this thread past its scope's end. A
        // non-blocking group's work (`NCCL_COMM_BLOCKING=0`) is queued by NCCL's thread:
        // waited for here too, before the scopes end.
        struct EndOnUnwind<'p, 'outer>(&'p [Pending<'outer>]);
        impl Drop for EndOnUnwind<'_, '_> {
            fn drop(&mut self) {
                let end = || {
                    // SAFETY: as for `ended` below.
                    unsafe { sys::group_end() }
                };
                // SAFETY: no context to push.
                if let Ok(sys::Status::InProgress) = unsafe { sys::keep_stack(None, end) } {
                    let _ = settle_all(self.0);
                }
            }
        }
        let on_unwind = EndOnUnwind(&pending);
        let mut queued = Ok(());
        for p in &pending {
            // SAFETY: as for an operation queued at once (`run_now`): one brand for the
            // communicator, the stream and the buffers, all borrowed for `'scope`, which
            // outlives `'outer` (`Group::on`'s bound), so every scope is still open and
            // synchronizes its stream after `ncclGroupEnd` below; lengths, roots, peers and
            // overlaps checked when the operation was recorded, the peers admitted just
            // above; the scope is one of a single stream (`Grouped::defer`), and no two
            // operations of the group touch memory one of them writes (checked above); the
            // stream waits for the pending synchronous operations on that memory (queued
            // when the operation was recorded, `Grouped::defer`).
            queued = unsafe { p.comm.launch(&p.prepared.call, p.stream, p.what) };
            if queued.is_err() {
                break;
            }
        }
        std::mem::forget(on_unwind);
        let end = || {
            // SAFETY: `group_end`'s promise is the one of the launches above, whose
            // memory, streams and communicators stay borrowed beyond this call.
            unsafe { sys::group_end() }
        };
        // SAFETY: no context to push.
        let ended = unsafe { sys::keep_stack(None, end) }.and_then(|status| match status {
            sys::Status::Done => Ok(()),
            // non-blocking (`NCCL_COMM_BLOCKING=0`): a thread of NCCL's queues the
            // group's work; wait for it on
            // every communicator of the group (or abort them) before the scopes can end
            sys::Status::InProgress => settle_all(&pending),
        });
        if let Some(e) = queued.as_ref().err().or(ended.as_ref().err()) {
            poison_all(e);
        }
        queued.and(ended)
    }
}

/// Waits for NCCL's background work on each communicator of a non-blocking group
/// ([`Core::settle`](super::comm::Core::settle)), each once; the first error is returned,
/// after every communicator has been waited for (or aborted).
fn settle_all(pending: &[Pending<'_>]) -> Result<()> {
    let mut first = Ok(());
    for (i, p) in pending.iter().enumerate() {
        if pending[..i].iter().any(|q| std::ptr::eq(q.comm, p.comm)) {
            continue;
        }
        let settled = p.comm.settle(Handle::Ops, "group");
        if first.is_ok() {
            first = settled;
        }
    }
    first
}

#[cold]
fn group_overlap(a: &Pending<'_>, x: usize, b: &Pending<'_>, y: usize) -> Error {
    let (sa, sb) = (a.prepared.spans[x], b.prepared.spans[y]);
    Error::with_detail(
        "group",
        ErrorCode::InvalidValue,
        format!(
            "{} of {} ({} bytes at {:#x}) and {} of {} ({} bytes at {:#x}) overlap: NCCL may run a group's operations concurrently, so memory one of them writes must not be another's",
            a.prepared.names[x],
            a.what,
            sa.bytes,
            sa.start,
            b.prepared.names[y],
            b.what,
            sb.bytes,
            sb.start,
        ),
    )
}

impl<'g, 'outer, 'scope, 'env, 'ctx, K: StreamKind> Grouped<'g, 'outer, 'scope, 'env, 'ctx, K>
where
    'scope: 'outer,
{
    fn defer(self, comm: &'scope Core, prepared: Prepared, what: &'static str) -> Result<()> {
        if self.scope.is_multi_stream() {
            return Err(Error::with_detail(
                what,
                ErrorCode::InvalidValue,
                "a group's operations go on scopes of one stream (Stream::scope), not on one of the streams of Stream::scope_all or scope_pair",
            ));
        }
        // the stream waits now for the pending synchronous operations on the memory the
        // operation touches (`context::order`), as every operation of a scope does: the
        // group's launch, queued later on this stream, comes after that wait. Waiting at
        // record time is enough: the memory is borrowed for `'scope` from here on, so no
        // synchronous write of it can begin before the launch.
        self.scope.ordered(prepared.spans(), None, || Ok(()))?;
        self.group.pending.borrow_mut().push(Pending {
            comm,
            stream: self.scope.stream().raw(),
            prepared,
            what,
        });
        Ok(())
    }
}

/// Opens an NCCL group for `f`: the NCCL operations it records with
/// [`g.on(scope)`](Group::on) are queued together (`ncclGroupStart`, each operation,
/// `ncclGroupEnd`) when `f` returns `Ok`, and are dropped unqueued when it returns an error
/// or panics. The group cannot be left open: it exists only inside this call.
///
/// A group is how one thread drives several ranks (each on its own device and scope), how
/// a rank sends and receives at once (to itself, or both ways with a peer), and how many
/// operations share one launch. Its operations are one operation to the crate: none may
/// write memory that another touches (an error, before NCCL sees anything), and for a
/// [`Clique`](super::Clique) every one is checked against the other ranks'.
///
/// The scopes must be open outside `f` (see [`Group`]): open the scopes, then the group.
/// Other work queued on those scopes inside `f` runs before the group's operations, which
/// are queued after `f` returns.
///
/// ```no_run
/// use cuda_brand::nccl::{Clique, group};
/// use cuda_brand::{Device, with_primary_context};
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// let clique = Clique::new(&[device])?;
/// with_primary_context(&device, |ctx| {
///     let comm = clique.communicator(ctx)?;
///     let src = ctx.from_slice(&[1u64, 2, 3])?;
///     let mut dst = ctx.zeroed::<u64>(3)?;
///     ctx.stream()?.scope(|s| {
///         // to itself: the send and the receive must be in flight together
///         group(|g| {
///             g.on(s).send(&comm, &src, 0)?;
///             g.on(s).recv(&comm, &mut dst, 0)
///         })
///     })?;
///     assert_eq!(dst.to_vec()?, [1, 2, 3]);
///     Ok(())
/// })
/// # }
/// ```
pub fn group<'outer, R, E, F>(f: F) -> Result<R, E>
where
    F: FnOnce(&Group<'outer>) -> Result<R, E>,
    E: From<Error>,
{
    let group = Group {
        pending: RefCell::new(Vec::new()),
        _outer: PhantomData,
        _thread: PhantomData,
    };
    let value = f(&group)?;
    group.issue()?;
    Ok(value)
}
