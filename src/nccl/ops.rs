//! The immediate front of NCCL's operations: a communicator's on a stream scope
//! ([`Communicator::all_reduce`] and the others), each queued at once. Each method names its
//! [`Operation`]; `issue.rs` checks, orders and queues it, as it does a group's
//! (`groups.rs`).

use super::comm::Communicator;
use super::issue::{self, Issue};
use super::operation::{Front, Operation};
use super::{NcclType, ReduceOp};
use crate::context::StreamKind;
use crate::error::Result;
use crate::scope::{IntoDeviceMut, IntoDeviceRef, StreamScope};

/// The NCCL operations (feature `nccl`): each is queued at once on the stream of `scope`, a
/// scope of the communicator's context, and the scope borrows the communicator and the
/// buffers until it has synchronized. The scope comes first, then the buffers, the
/// destination before the source, as every copy of the crate takes them (NCCL's C API
/// has the source first); the source takes only shared views (`&buffer`, a `DeviceRef`),
/// so a swapped call does not compile. An operation that reads and writes one buffer is its `_in_place`
/// form. Checked before NCCL sees anything, each an error naming the operation: lengths
/// against the communicator's rank count, the root or peer against its ranks, overlap of
/// an out-of-place operation's source and destination, and, for a
/// [`Clique`](super::Clique)'s communicators, the operation against what the other ranks
/// issued.
///
/// One thread driving several ranks of a communicator must queue their operations in one
/// [`group`](super::group); queued one by one, the first waits on the GPU for its peers,
/// and its scope's synchronization never returns.
impl<'ctx> Communicator<'ctx> {
    /// Queues an all-reduce (`ncclAllReduce`): every rank's `dst` becomes the reduction
    /// (`op`) of all ranks' `src`, element by element. `src` and `dst` have the same
    /// length; every rank passes the same length, element type and `op`.
    ///
    /// ```no_run
    /// use cuda_brand::nccl::{Clique, ReduceOp};
    /// use cuda_brand::{Device, with_primary_context};
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// let clique = Clique::new(&[device])?; // one rank: the reduction is the input
    /// with_primary_context(&device, |ctx| {
    ///     let comm = clique.communicator(ctx)?;
    ///     let src = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
    ///     let mut dst = ctx.zeroed::<f32>(3)?;
    ///     ctx.new_stream()?.scope(|s| comm.all_reduce(s, &mut dst, &src, ReduceOp::Sum))?;
    ///     assert_eq!(dst.to_vec()?, [1.0, 2.0, 3.0]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn all_reduce<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.now(scope, Operation::all_reduce(dst, src, op))
    }

    /// Queues an in-place all-reduce (`ncclAllReduce` with one buffer): every rank's `buf`
    /// becomes the reduction of all ranks' `buf`.
    pub fn all_reduce_in_place<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.now(scope, Operation::all_reduce_in_place(buf, op))
    }

    /// Queues a broadcast (`ncclBroadcast`): every rank's `dst` becomes rank `root`'s
    /// `src` (only the root's `src` is read). `src` and `dst` have the same length.
    pub fn broadcast<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        root: usize,
    ) -> Result<()> {
        self.now(scope, Operation::broadcast(dst, src, root))
    }

    /// Queues an in-place broadcast: rank `root` sends `buf`, every other rank receives
    /// into its `buf`.
    pub fn broadcast_in_place<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        root: usize,
    ) -> Result<()> {
        self.now(scope, Operation::broadcast_in_place(buf, root))
    }

    /// Queues a reduce (`ncclReduce`): rank `root`'s `dst` becomes the reduction of all
    /// ranks' `src` (the other ranks' `dst` is not written, but must have the same length).
    pub fn reduce<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        self.now(scope, Operation::reduce(dst, src, op, root))
    }

    /// Queues an in-place reduce: rank `root`'s `buf` becomes the reduction of all ranks'
    /// `buf`.
    pub fn reduce_in_place<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        self.now(scope, Operation::reduce_in_place(buf, op, root))
    }

    /// Queues an all-gather (`ncclAllGather`): every rank's `dst`, `ranks × n` elements,
    /// becomes the ranks' `src` (`n` elements each) one after the other, rank 0's first.
    ///
    /// ```no_run
    /// use cuda_brand::nccl::Clique;
    /// use cuda_brand::{Device, with_primary_context};
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// let clique = Clique::new(&[device])?;
    /// with_primary_context(&device, |ctx| {
    ///     let comm = clique.communicator(ctx)?;
    ///     let mine = ctx.from_slice(&[1i32, 2])?;
    ///     let mut all = ctx.zeroed::<i32>(2 * comm.ranks())?; // one block per rank
    ///     ctx.new_stream()?.scope(|s| comm.all_gather(s, &mut all, &mine))?;
    ///     assert_eq!(all.to_vec()?, [1, 2]);
    ///     // a destination of the wrong length is refused before NCCL sees it
    ///     let mut short = ctx.zeroed::<i32>(1)?;
    ///     assert!(ctx.new_stream()?.scope(|s| comm.all_gather(s, &mut short, &mine)).is_err());
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn all_gather<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        self.now(scope, Operation::all_gather(dst, src))
    }

    /// Queues an in-place all-gather: `buf` holds one block per rank (its length a
    /// multiple of the rank count); each rank's own block (block `rank`) is sent, and
    /// every block of every rank's `buf` becomes that rank's block.
    pub fn all_gather_in_place<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        self.now(scope, Operation::all_gather_in_place(buf))
    }

    /// Queues a reduce-scatter (`ncclReduceScatter`): `src` holds `ranks × n` elements,
    /// and rank `r`'s `dst` (`n` elements) becomes the reduction of block `r` of all ranks'
    /// `src`.
    pub fn reduce_scatter<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.now(scope, Operation::reduce_scatter(dst, src, op))
    }

    /// Queues an in-place reduce-scatter: `buf` holds one block per rank, and block `rank`
    /// of this rank's `buf` becomes the reduction of that block of all ranks' `buf` (the
    /// other blocks are left as they are).
    ///
    /// ```no_run
    /// use cuda_brand::nccl::{Clique, ReduceOp};
    /// use cuda_brand::{Device, with_primary_context};
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// let clique = Clique::new(&[device])?;
    /// with_primary_context(&device, |ctx| {
    ///     let comm = clique.communicator(ctx)?;
    ///     let mut grads = ctx.from_slice(&[0.5f64; 1024])?; // 1024 / ranks per block
    ///     ctx.new_stream()?.scope(|s| comm.reduce_scatter_in_place(s, &mut grads, ReduceOp::Avg))?;
    ///     let r = comm.rank();
    ///     let block = 1024 / comm.ranks();
    ///     assert!(grads.to_vec()?[r * block..(r + 1) * block].iter().all(|&g| g == 0.5));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn reduce_scatter_in_place<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.now(scope, Operation::reduce_scatter_in_place(buf, op))
    }

    /// Queues sending `src` to rank `peer` (`ncclSend`), which receives it with a
    /// [`recv`](Communicator::recv) of the same element type and length. A send waits on the
    /// GPU for its receive: a rank sending to itself, or two ranks sending to each other,
    /// do it in one [`group`](super::group).
    pub fn send<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        peer: usize,
    ) -> Result<()> {
        self.now(scope, Operation::send(src, peer))
    }

    /// Queues receiving into `dst` what rank `peer` sends (`ncclRecv`). See
    /// [`group`](super::group) for a rank sending to itself.
    pub fn recv<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        peer: usize,
    ) -> Result<()> {
        self.now(scope, Operation::recv(dst, peer))
    }
}

impl<'ctx> Communicator<'ctx> {
    /// Checks `operation` and queues it on `scope`'s stream now, by itself, inside the
    /// scope's ordering ([`issue::ordered`]).
    fn now<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        operation: Operation<'scope, 'ctx, T>,
    ) -> Result<()> {
        issue::ordered(scope, self, operation, Front::Communicator, |p| {
            issue::issue(Issue::One(&p))
        })
    }
}
