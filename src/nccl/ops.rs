//! NCCL operations: a communicator's on a stream scope ([`Communicator::all_reduce`] and
//! the others), queued at once, or in a [`group`](super::group), queued together when the
//! group's closure returns.

use std::ffi::c_int;
use std::mem::size_of;

use super::comm::Communicator;
use super::state::Core;
use super::sys::{Call, Kind};
use super::{NcclType, ReduceOp};
use crate::context::StreamKind;
use crate::driver::CUdeviceptr;
use crate::error::{Error, ErrorCode, Result};
use crate::launch::sealed::Crate;
use crate::memory::{Span, overlap_error};
use crate::scope::{DeviceMut, DeviceRef, IntoDeviceMut, IntoDeviceRef, StreamScope};

/// One operation, checked and ready for NCCL: its arguments and the memory it touches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prepared {
    pub(super) call: Call,
    pub(super) spans: [Span; 2],
    n: usize,
    /// What each span is, for error messages.
    pub(super) names: [&'static str; 2],
}

impl Prepared {
    pub(super) fn spans(&self) -> &[Span] {
        &self.spans[..self.n]
    }
}

/// The checks and argument layouts of every operation, before anything reaches NCCL.
pub(super) mod prepare {
    use super::*;

    fn invalid(what: &'static str, detail: String) -> Error {
        Error::with_detail(what, ErrorCode::InvalidValue, detail)
    }

    fn span<T>(ptr: CUdeviceptr, len: usize, write: bool) -> Span {
        Span {
            start: ptr,
            bytes: (len * size_of::<T>()) as u64,
            write,
        }
    }

    fn rank_of(comm: &Core, rank: usize, role: &str, what: &'static str) -> Result<c_int> {
        if rank < comm.ranks() {
            Ok(rank as c_int)
        } else {
            Err(invalid(
                what,
                format!(
                    "the {role} is rank {rank}, but the communicator has {} rank(s)",
                    comm.ranks()
                ),
            ))
        }
    }

    fn same_len(what: &'static str, src: usize, dst: usize) -> Result<()> {
        if src == dst {
            Ok(())
        } else {
            Err(invalid(
                what,
                format!(
                    "the source has {src} elements but the destination has {dst}: the operation reads and writes the same count"
                ),
            ))
        }
    }

    /// An operation reading `src` and writing `dst`, which must not overlap.
    #[allow(clippy::too_many_arguments)]
    fn out_of_place<T: NcclType>(
        kind: Kind,
        src: DeviceRef<'_, '_, T>,
        dst: DeviceMut<'_, '_, T>,
        count: usize,
        op: ReduceOp,
        peer: c_int,
        what: &'static str,
    ) -> Result<Prepared> {
        let spans = [
            span::<T>(src.device_ptr(), src.len(), false),
            span::<T>(dst.device_ptr(), dst.len(), true),
        ];
        if spans[0].overlaps(&spans[1]) {
            return Err(overlap_error(
                what,
                ["the source", "the destination"],
                &spans[0],
                &spans[1],
            ));
        }
        Ok(Prepared {
            call: Call {
                kind,
                send: src.device_ptr(),
                recv: dst.device_ptr(),
                count,
                datatype: T::datatype(),
                op: op.raw(),
                peer,
            },
            spans,
            n: 2,
            names: ["the source", "the destination"],
        })
    }

    /// An operation on `buf` alone, NCCL's send and receive pointers `send` and `recv`
    /// inside it.
    fn in_place<T: NcclType>(
        kind: Kind,
        buf: DeviceMut<'_, '_, T>,
        (send, recv): (CUdeviceptr, CUdeviceptr),
        count: usize,
        op: ReduceOp,
        peer: c_int,
    ) -> Prepared {
        Prepared {
            call: Call {
                kind,
                send,
                recv,
                count,
                datatype: T::datatype(),
                op: op.raw(),
                peer,
            },
            spans: [span::<T>(buf.device_ptr(), buf.len(), true), Span::NONE],
            n: 1,
            names: ["the buffer", ""],
        }
    }

    /// `buf`'s length as `ranks` equal blocks, and the address of block `rank`.
    fn blocks<T>(
        comm: &Core,
        buf: &DeviceMut<'_, '_, T>,
        what: &'static str,
    ) -> Result<(usize, CUdeviceptr)> {
        let ranks = comm.ranks();
        if buf.len() % ranks != 0 {
            return Err(invalid(
                what,
                format!(
                    "the buffer has {} elements, not a multiple of the communicator's {ranks} ranks: it holds one block per rank",
                    buf.len()
                ),
            ));
        }
        let block = buf.len() / ranks;
        let own = buf.device_ptr() + (comm.rank() * block * size_of::<T>()) as CUdeviceptr;
        Ok((block, own))
    }

    pub(in crate::nccl) fn all_reduce<T: NcclType>(
        _comm: &Core,
        src: DeviceRef<'_, '_, T>,
        dst: DeviceMut<'_, '_, T>,
        op: ReduceOp,
        what: &'static str,
    ) -> Result<Prepared> {
        same_len(what, src.len(), dst.len())?;
        out_of_place(Kind::AllReduce, src, dst, src.len(), op, 0, what)
    }

    pub(in crate::nccl) fn all_reduce_in_place<T: NcclType>(
        _comm: &Core,
        buf: DeviceMut<'_, '_, T>,
        op: ReduceOp,
        _what: &'static str,
    ) -> Result<Prepared> {
        let p = buf.device_ptr();
        Ok(in_place(Kind::AllReduce, buf, (p, p), buf.len(), op, 0))
    }

    pub(in crate::nccl) fn broadcast<T: NcclType>(
        comm: &Core,
        src: DeviceRef<'_, '_, T>,
        dst: DeviceMut<'_, '_, T>,
        root: usize,
        what: &'static str,
    ) -> Result<Prepared> {
        let root = rank_of(comm, root, "root", what)?;
        same_len(what, src.len(), dst.len())?;
        out_of_place(
            Kind::Broadcast,
            src,
            dst,
            src.len(),
            ReduceOp::Sum,
            root,
            what,
        )
    }

    pub(in crate::nccl) fn broadcast_in_place<T: NcclType>(
        comm: &Core,
        buf: DeviceMut<'_, '_, T>,
        root: usize,
        what: &'static str,
    ) -> Result<Prepared> {
        let root = rank_of(comm, root, "root", what)?;
        let p = buf.device_ptr();
        Ok(in_place(
            Kind::Broadcast,
            buf,
            (p, p),
            buf.len(),
            ReduceOp::Sum,
            root,
        ))
    }

    pub(in crate::nccl) fn reduce<T: NcclType>(
        comm: &Core,
        src: DeviceRef<'_, '_, T>,
        dst: DeviceMut<'_, '_, T>,
        op: ReduceOp,
        root: usize,
        what: &'static str,
    ) -> Result<Prepared> {
        let root = rank_of(comm, root, "root", what)?;
        same_len(what, src.len(), dst.len())?;
        out_of_place(Kind::Reduce, src, dst, src.len(), op, root, what)
    }

    pub(in crate::nccl) fn reduce_in_place<T: NcclType>(
        comm: &Core,
        buf: DeviceMut<'_, '_, T>,
        op: ReduceOp,
        root: usize,
        what: &'static str,
    ) -> Result<Prepared> {
        let root = rank_of(comm, root, "root", what)?;
        let p = buf.device_ptr();
        Ok(in_place(Kind::Reduce, buf, (p, p), buf.len(), op, root))
    }

    pub(in crate::nccl) fn all_gather<T: NcclType>(
        comm: &Core,
        src: DeviceRef<'_, '_, T>,
        dst: DeviceMut<'_, '_, T>,
        what: &'static str,
    ) -> Result<Prepared> {
        if src.len().checked_mul(comm.ranks()) != Some(dst.len()) {
            return Err(invalid(
                what,
                format!(
                    "the destination has {} elements, but gathering {} from each of {} ranks needs {}",
                    dst.len(),
                    src.len(),
                    comm.ranks(),
                    src.len().saturating_mul(comm.ranks())
                ),
            ));
        }
        out_of_place(Kind::AllGather, src, dst, src.len(), ReduceOp::Sum, 0, what)
    }

    pub(in crate::nccl) fn all_gather_in_place<T: NcclType>(
        comm: &Core,
        buf: DeviceMut<'_, '_, T>,
        what: &'static str,
    ) -> Result<Prepared> {
        let (block, own) = blocks(comm, &buf, what)?;
        let p = buf.device_ptr();
        Ok(in_place(
            Kind::AllGather,
            buf,
            (own, p),
            block,
            ReduceOp::Sum,
            0,
        ))
    }

    pub(in crate::nccl) fn reduce_scatter<T: NcclType>(
        comm: &Core,
        src: DeviceRef<'_, '_, T>,
        dst: DeviceMut<'_, '_, T>,
        op: ReduceOp,
        what: &'static str,
    ) -> Result<Prepared> {
        if dst.len().checked_mul(comm.ranks()) != Some(src.len()) {
            return Err(invalid(
                what,
                format!(
                    "the source has {} elements, but scattering {} to each of {} ranks needs {}",
                    src.len(),
                    dst.len(),
                    comm.ranks(),
                    dst.len().saturating_mul(comm.ranks())
                ),
            ));
        }
        out_of_place(Kind::ReduceScatter, src, dst, dst.len(), op, 0, what)
    }

    pub(in crate::nccl) fn reduce_scatter_in_place<T: NcclType>(
        comm: &Core,
        buf: DeviceMut<'_, '_, T>,
        op: ReduceOp,
        what: &'static str,
    ) -> Result<Prepared> {
        let (block, own) = blocks(comm, &buf, what)?;
        let p = buf.device_ptr();
        Ok(in_place(Kind::ReduceScatter, buf, (p, own), block, op, 0))
    }

    pub(in crate::nccl) fn send<T: NcclType>(
        comm: &Core,
        src: DeviceRef<'_, '_, T>,
        peer: usize,
        what: &'static str,
    ) -> Result<Prepared> {
        let peer = rank_of(comm, peer, "peer", what)?;
        Ok(Prepared {
            call: Call {
                kind: Kind::Send,
                send: src.device_ptr(),
                recv: 0,
                count: src.len(),
                datatype: T::datatype(),
                op: 0,
                peer,
            },
            spans: [span::<T>(src.device_ptr(), src.len(), false), Span::NONE],
            n: 1,
            names: ["the source", ""],
        })
    }

    pub(in crate::nccl) fn recv<T: NcclType>(
        comm: &Core,
        dst: DeviceMut<'_, '_, T>,
        peer: usize,
        what: &'static str,
    ) -> Result<Prepared> {
        let peer = rank_of(comm, peer, "peer", what)?;
        Ok(Prepared {
            call: Call {
                kind: Kind::Recv,
                send: 0,
                recv: dst.device_ptr(),
                count: dst.len(),
                datatype: T::datatype(),
                op: 0,
                peer,
            },
            spans: [span::<T>(dst.device_ptr(), dst.len(), true), Span::NONE],
            n: 1,
            names: ["the destination", ""],
        })
    }
}

/// Queues a prepared operation on `scope`'s stream now.
fn run_now<K: StreamKind>(
    scope: &StreamScope<'_, '_, '_, K>,
    comm: &Core,
    p: Prepared,
    what: &'static str,
) -> Result<()> {
    comm.admit(&p.call, what)?;
    let stream = scope.stream().raw();
    let queued = scope.ordered(p.spans(), None, || {
        // SAFETY: the communicator, the stream and every buffer share the scope's brand
        // `'ctx`, the primary context of the communicator's device (checked when the
        // communicator was made); the stream is alive (borrowed by the scope); the
        // communicator and every range are borrowed for `'scope`, so they outlive the
        // scope's final synchronization; the lengths fit the communicator's rank count and
        // an out-of-place operation's ranges do not overlap (`prepare`); the peers match
        // (admitted by the clique's book, or promised by `init_rank`'s caller) or cannot
        // write this rank's memory (`from_world`: one rank per process); other streams of a
        // multi-stream scope are ordered around it by `ordered`. No NCCL group is open (the
        // crate opens one only while `group` issues its operations, with no user code
        // running), so NCCL queues the operation before the call returns (operations run
        // on blocking communicators; under `NCCL_COMM_BLOCKING=0`, `launch` waits for
        // NCCL's thread to queue it).
        unsafe { comm.launch(&p.call, stream, what) }
    });
    if let Err(e) = &queued {
        // admitted, but perhaps never queued (a failed wait for another stream of the
        // scope): the book and NCCL may no longer agree on this rank's sequence
        comm.poison(e);
    }
    queued
}

/// The NCCL operations (feature `nccl`): each is queued at once on the stream of `scope`, a
/// scope of the communicator's context, and the scope borrows the communicator and the
/// buffers until it has synchronized. The scope comes first, then the buffers in NCCL's
/// order, source first; an operation that reads and writes one buffer is its `_in_place`
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
    ///     ctx.stream()?.scope(|s| comm.all_reduce(s, &src, &mut dst, ReduceOp::Sum))?;
    ///     assert_eq!(dst.to_vec()?, [1.0, 2.0, 3.0]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn all_reduce<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::all_reduce";
        let p = prepare::all_reduce::<T>(
            &self.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            op,
            WHAT,
        )?;
        run_now(scope, &self.core, p, WHAT)
    }

    /// Queues an in-place all-reduce (`ncclAllReduce` with one buffer): every rank's `buf`
    /// becomes the reduction of all ranks' `buf`.
    pub fn all_reduce_in_place<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::all_reduce_in_place";
        let p = prepare::all_reduce_in_place::<T>(&self.core, buf.into_mut(Crate(())), op, WHAT)?;
        run_now(scope, &self.core, p, WHAT)
    }

    /// Queues a broadcast (`ncclBroadcast`): every rank's `dst` becomes rank `root`'s
    /// `src` (only the root's `src` is read). `src` and `dst` have the same length.
    pub fn broadcast<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        root: usize,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::broadcast";
        let p = prepare::broadcast::<T>(
            &self.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            root,
            WHAT,
        )?;
        run_now(scope, &self.core, p, WHAT)
    }

    /// Queues an in-place broadcast: rank `root` sends `buf`, every other rank receives
    /// into its `buf`.
    pub fn broadcast_in_place<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
        root: usize,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::broadcast_in_place";
        let p = prepare::broadcast_in_place::<T>(&self.core, buf.into_mut(Crate(())), root, WHAT)?;
        run_now(scope, &self.core, p, WHAT)
    }

    /// Queues a reduce (`ncclReduce`): rank `root`'s `dst` becomes the reduction of all
    /// ranks' `src` (the other ranks' `dst` is not written, but must have the same length).
    pub fn reduce<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::reduce";
        let p = prepare::reduce::<T>(
            &self.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            op,
            root,
            WHAT,
        )?;
        run_now(scope, &self.core, p, WHAT)
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
        const WHAT: &str = "Communicator::reduce_in_place";
        let p = prepare::reduce_in_place::<T>(&self.core, buf.into_mut(Crate(())), op, root, WHAT)?;
        run_now(scope, &self.core, p, WHAT)
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
    ///     ctx.stream()?.scope(|s| comm.all_gather(s, &mine, &mut all))?;
    ///     assert_eq!(all.to_vec()?, [1, 2]);
    ///     // a destination of the wrong length is refused before NCCL sees it
    ///     let mut short = ctx.zeroed::<i32>(1)?;
    ///     assert!(ctx.stream()?.scope(|s| comm.all_gather(s, &mine, &mut short)).is_err());
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn all_gather<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::all_gather";
        let p = prepare::all_gather::<T>(
            &self.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            WHAT,
        )?;
        run_now(scope, &self.core, p, WHAT)
    }

    /// Queues an in-place all-gather: `buf` holds one block per rank (its length a
    /// multiple of the rank count); each rank's own block (block `rank`) is sent, and
    /// every block of every rank's `buf` becomes that rank's block.
    pub fn all_gather_in_place<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        buf: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::all_gather_in_place";
        let p = prepare::all_gather_in_place::<T>(&self.core, buf.into_mut(Crate(())), WHAT)?;
        run_now(scope, &self.core, p, WHAT)
    }

    /// Queues a reduce-scatter (`ncclReduceScatter`): `src` holds `ranks × n` elements,
    /// and rank `r`'s `dst` (`n` elements) becomes the reduction of block `r` of all ranks'
    /// `src`.
    pub fn reduce_scatter<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        op: ReduceOp,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::reduce_scatter";
        let p = prepare::reduce_scatter::<T>(
            &self.core,
            src.into_ref(Crate(())),
            dst.into_mut(Crate(())),
            op,
            WHAT,
        )?;
        run_now(scope, &self.core, p, WHAT)
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
    ///     ctx.stream()?.scope(|s| comm.reduce_scatter_in_place(s, &mut grads, ReduceOp::Avg))?;
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
        const WHAT: &str = "Communicator::reduce_scatter_in_place";
        let p =
            prepare::reduce_scatter_in_place::<T>(&self.core, buf.into_mut(Crate(())), op, WHAT)?;
        run_now(scope, &self.core, p, WHAT)
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
        const WHAT: &str = "Communicator::send";
        let p = prepare::send::<T>(&self.core, src.into_ref(Crate(())), peer, WHAT)?;
        run_now(scope, &self.core, p, WHAT)
    }

    /// Queues receiving into `dst` what rank `peer` sends (`ncclRecv`). See
    /// [`group`](super::group) for a rank sending to itself.
    pub fn recv<'scope, T: NcclType, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        peer: usize,
    ) -> Result<()> {
        const WHAT: &str = "Communicator::recv";
        let p = prepare::recv::<T>(&self.core, dst.into_mut(Crate(())), peer, WHAT)?;
        run_now(scope, &self.core, p, WHAT)
    }
}
