//! NCCL groups ([`group`], [`Group`], [`Grouped`]): operations of several scopes recorded
//! in one group and queued together when its closure returns.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;

use super::comm::Communicator;
use super::issue::{self, Issue, Pending};
use super::operation::{Front, Operation};
use super::{NcclType, ReduceOp};
use crate::context::StreamKind;
use crate::error::{Error, Result};
use crate::scope::{IntoDeviceMut, IntoDeviceRef, StreamScope};

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
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.defer(comm, Operation::all_reduce(dst, src, op))
    }

    /// [`Communicator::all_reduce_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn all_reduce_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.defer(comm, Operation::all_reduce_in_place(buf, op))
    }

    /// [`Communicator::broadcast`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn broadcast<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        root: usize,
    ) -> Result<()> {
        self.defer(comm, Operation::broadcast(dst, src, root))
    }

    /// [`Communicator::broadcast_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn broadcast_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        root: usize,
    ) -> Result<()> {
        self.defer(comm, Operation::broadcast_in_place(buf, root))
    }

    /// [`Communicator::reduce`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn reduce<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        self.defer(comm, Operation::reduce(dst, src, op, root))
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
        self.defer(comm, Operation::reduce_in_place(buf, op, root))
    }

    /// [`Communicator::all_gather`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn all_gather<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        self.defer(comm, Operation::all_gather(dst, src))
    }

    /// [`Communicator::all_gather_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn all_gather_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        self.defer(comm, Operation::all_gather_in_place(buf))
    }

    /// [`Communicator::reduce_scatter`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn reduce_scatter<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.defer(comm, Operation::reduce_scatter(dst, src, op))
    }

    /// [`Communicator::reduce_scatter_in_place`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn reduce_scatter_in_place<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.defer(comm, Operation::reduce_scatter_in_place(buf, op))
    }

    /// [`Communicator::send`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn send<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        peer: usize,
    ) -> Result<()> {
        self.defer(comm, Operation::send(src, peer))
    }

    /// [`Communicator::recv`] on this scope, queued when the group's
    /// closure returns, together with the group's other operations.
    pub fn recv<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        peer: usize,
    ) -> Result<()> {
        self.defer(comm, Operation::recv(dst, peer))
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
///     let stream = ctx.new_stream()?;
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
///     let stream_a = a.new_stream()?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let stream_b = b.new_stream()?;
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
    /// is an error: the order agreement that orders those streams assumes an operation is on
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
}

impl<'g, 'outer, 'scope, 'env, 'ctx, K: StreamKind> Grouped<'g, 'outer, 'scope, 'env, 'ctx, K>
where
    'scope: 'outer,
{
    /// Checks `operation`, orders it on this scope's stream now ([`issue::ordered`]) and
    /// records it in the group, which queues it when its closure returns.
    fn defer<T: NcclType>(
        self,
        comm: &'scope Communicator<'ctx>,
        operation: Operation<'scope, 'ctx, T>,
    ) -> Result<()> {
        issue::ordered(self.scope, comm, operation, Front::Grouped, |p| {
            self.group.pending.borrow_mut().push(p);
            Ok(())
        })
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
///     ctx.new_stream()?.scope(|s| {
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
    issue::issue(Issue::Group(&group.pending.into_inner()))?;
    Ok(value)
}
