//! Each NCCL operation once: an [`Operation`] is what a front was asked for (the buffers,
//! bound to a scope, and the other arguments), [`Operation::check`] checks it and lays out
//! NCCL's arguments ([`Prepared`]). Both fronts use it: a communicator on a scope
//! (`ops.rs`, queued at once) and a scope in a group (`groups.rs`, queued when the group's
//! closure returns); `issue.rs` orders and issues what it prepares.

use std::ffi::c_int;
use std::mem::size_of;

use super::sys::{Call, Kind};
use super::{NcclType, ReduceOp};
use crate::driver::CUdeviceptr;
use crate::error::{Error, ErrorCode, Result};
use crate::memory::{Span, overlap_error};
use crate::scope::{DeviceMut, DeviceRef};

/// One NCCL operation as its caller gave it: the memory it reads (`src`), writes (`dst`),
/// or reads and writes (`buf`, the `_in_place` forms), bound to a scope `'s` of context
/// `'ctx`, and its reduction, root or peer. Each variant is the method of the same name on
/// [`Communicator`](super::Communicator) and on [`Grouped`](super::Grouped).
pub(super) enum Operation<'s, 'ctx, T> {
    AllReduce {
        src: DeviceRef<'s, 'ctx, T>,
        dst: DeviceMut<'s, 'ctx, T>,
        op: ReduceOp,
    },
    AllReduceInPlace {
        buf: DeviceMut<'s, 'ctx, T>,
        op: ReduceOp,
    },
    Broadcast {
        src: DeviceRef<'s, 'ctx, T>,
        dst: DeviceMut<'s, 'ctx, T>,
        root: usize,
    },
    BroadcastInPlace {
        buf: DeviceMut<'s, 'ctx, T>,
        root: usize,
    },
    Reduce {
        src: DeviceRef<'s, 'ctx, T>,
        dst: DeviceMut<'s, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    },
    ReduceInPlace {
        buf: DeviceMut<'s, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    },
    AllGather {
        src: DeviceRef<'s, 'ctx, T>,
        dst: DeviceMut<'s, 'ctx, T>,
    },
    AllGatherInPlace {
        buf: DeviceMut<'s, 'ctx, T>,
    },
    ReduceScatter {
        src: DeviceRef<'s, 'ctx, T>,
        dst: DeviceMut<'s, 'ctx, T>,
        op: ReduceOp,
    },
    ReduceScatterInPlace {
        buf: DeviceMut<'s, 'ctx, T>,
        op: ReduceOp,
    },
    Send {
        src: DeviceRef<'s, 'ctx, T>,
        peer: usize,
    },
    Recv {
        dst: DeviceMut<'s, 'ctx, T>,
        peer: usize,
    },
}

/// Which front an operation came through, for the name its errors carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Front {
    /// A method of [`Communicator`](super::Communicator): queued at once.
    Communicator,
    /// A method of [`Grouped`](super::Grouped): queued when the group's closure returns.
    Grouped,
}

/// The rank an operation runs on, and its communicator's rank count: what its checks
/// compare the lengths, roots and peers with.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ranks {
    pub(super) rank: usize,
    pub(super) ranks: usize,
}

/// One operation, checked and ready for NCCL: its arguments, the memory it touches, and
/// the name of the call that asked for it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Prepared {
    pub(super) call: Call,
    spans: [Span; 2],
    n: usize,
    /// What each span is, for error messages.
    names: [&'static str; 2],
    /// The method that asked for it (`Communicator::all_reduce`, `Grouped::send`).
    pub(super) what: &'static str,
}

impl Prepared {
    /// The memory the operation reads and writes.
    pub(super) fn spans(&self) -> &[Span] {
        &self.spans[..self.n]
    }

    /// The spans, each with what it is (`the source`, `the destination`, `the buffer`).
    pub(super) fn named_spans(&self) -> impl Iterator<Item = (&'static str, &Span)> {
        self.names.into_iter().zip(self.spans())
    }
}

impl<T: NcclType> Operation<'_, '_, T> {
    /// The name of the method that asks for this operation through `front`.
    pub(super) fn what(&self, front: Front) -> &'static str {
        use Operation as O;
        let [now, grouped] = match self {
            O::AllReduce { .. } => ["Communicator::all_reduce", "Grouped::all_reduce"],
            O::AllReduceInPlace { .. } => [
                "Communicator::all_reduce_in_place",
                "Grouped::all_reduce_in_place",
            ],
            O::Broadcast { .. } => ["Communicator::broadcast", "Grouped::broadcast"],
            O::BroadcastInPlace { .. } => [
                "Communicator::broadcast_in_place",
                "Grouped::broadcast_in_place",
            ],
            O::Reduce { .. } => ["Communicator::reduce", "Grouped::reduce"],
            O::ReduceInPlace { .. } => {
                ["Communicator::reduce_in_place", "Grouped::reduce_in_place"]
            }
            O::AllGather { .. } => ["Communicator::all_gather", "Grouped::all_gather"],
            O::AllGatherInPlace { .. } => [
                "Communicator::all_gather_in_place",
                "Grouped::all_gather_in_place",
            ],
            O::ReduceScatter { .. } => ["Communicator::reduce_scatter", "Grouped::reduce_scatter"],
            O::ReduceScatterInPlace { .. } => [
                "Communicator::reduce_scatter_in_place",
                "Grouped::reduce_scatter_in_place",
            ],
            O::Send { .. } => ["Communicator::send", "Grouped::send"],
            O::Recv { .. } => ["Communicator::recv", "Grouped::recv"],
        };
        match front {
            Front::Communicator => now,
            Front::Grouped => grouped,
        }
    }

    /// Checks the operation on rank `at.rank` of `at.ranks`, before anything reaches NCCL,
    /// each failure an error naming `what`: lengths against each other and the rank count,
    /// the root or peer against the ranks, and an out-of-place operation's source and
    /// destination apart. The element type is one of NCCL's by `T`'s bound.
    pub(super) fn check(self, at: Ranks, what: &'static str) -> Result<Prepared> {
        use Operation as O;
        let p = match self {
            O::AllReduce { src, dst, op } => {
                same_len(what, src.len(), dst.len())?;
                out_of_place(Kind::AllReduce, src, dst, src.len(), op.raw(), 0, what)?
            }
            O::AllReduceInPlace { buf, op } => {
                in_place(Kind::AllReduce, buf, whole(&buf), buf.len(), op.raw(), 0)
            }
            O::Broadcast { src, dst, root } => {
                let root = at.rank_of(root, "root", what)?;
                same_len(what, src.len(), dst.len())?;
                out_of_place(Kind::Broadcast, src, dst, src.len(), 0, root, what)?
            }
            O::BroadcastInPlace { buf, root } => {
                let root = at.rank_of(root, "root", what)?;
                in_place(Kind::Broadcast, buf, whole(&buf), buf.len(), 0, root)
            }
            O::Reduce { src, dst, op, root } => {
                let root = at.rank_of(root, "root", what)?;
                same_len(what, src.len(), dst.len())?;
                out_of_place(Kind::Reduce, src, dst, src.len(), op.raw(), root, what)?
            }
            O::ReduceInPlace { buf, op, root } => {
                let root = at.rank_of(root, "root", what)?;
                in_place(Kind::Reduce, buf, whole(&buf), buf.len(), op.raw(), root)
            }
            O::AllGather { src, dst } => {
                at.gathered(what, src.len(), dst.len())?;
                out_of_place(Kind::AllGather, src, dst, src.len(), 0, 0, what)?
            }
            O::AllGatherInPlace { buf } => {
                let (block, own) = at.blocks(&buf, what)?;
                in_place(Kind::AllGather, buf, (own, buf.device_ptr()), block, 0, 0)
            }
            O::ReduceScatter { src, dst, op } => {
                at.scattered(what, src.len(), dst.len())?;
                out_of_place(Kind::ReduceScatter, src, dst, dst.len(), op.raw(), 0, what)?
            }
            O::ReduceScatterInPlace { buf, op } => {
                let (block, own) = at.blocks(&buf, what)?;
                let sent = (buf.device_ptr(), own);
                in_place(Kind::ReduceScatter, buf, sent, block, op.raw(), 0)
            }
            O::Send { src, peer } => {
                let peer = at.rank_of(peer, "peer", what)?;
                let (ptr, len) = (src.device_ptr(), src.len());
                one_way::<T>(Kind::Send, (ptr, 0), len, peer, "the source", false)
            }
            O::Recv { dst, peer } => {
                let peer = at.rank_of(peer, "peer", what)?;
                let (ptr, len) = (dst.device_ptr(), dst.len());
                one_way::<T>(Kind::Recv, (0, ptr), len, peer, "the destination", true)
            }
        };
        Ok(Prepared { what, ..p })
    }
}

impl Ranks {
    fn rank_of(self, rank: usize, role: &str, what: &'static str) -> Result<c_int> {
        if rank < self.ranks {
            Ok(rank as c_int)
        } else {
            Err(invalid(
                what,
                format!(
                    "the {role} is rank {rank}, but the communicator has {} rank(s)",
                    self.ranks
                ),
            ))
        }
    }

    /// An all-gather's destination holds `ranks` sources.
    fn gathered(self, what: &'static str, src: usize, dst: usize) -> Result<()> {
        if src.checked_mul(self.ranks) == Some(dst) {
            return Ok(());
        }
        Err(invalid(
            what,
            format!(
                "the destination has {dst} elements, but gathering {src} from each of {} ranks needs {}",
                self.ranks,
                src.saturating_mul(self.ranks)
            ),
        ))
    }

    /// A reduce-scatter's source holds `ranks` destinations.
    fn scattered(self, what: &'static str, src: usize, dst: usize) -> Result<()> {
        if dst.checked_mul(self.ranks) == Some(src) {
            return Ok(());
        }
        Err(invalid(
            what,
            format!(
                "the source has {src} elements, but scattering {dst} to each of {} ranks needs {}",
                self.ranks,
                dst.saturating_mul(self.ranks)
            ),
        ))
    }

    /// `buf`'s length as `ranks` equal blocks, and the address of block `rank`.
    fn blocks<T>(
        self,
        buf: &DeviceMut<'_, '_, T>,
        what: &'static str,
    ) -> Result<(usize, CUdeviceptr)> {
        let ranks = self.ranks;
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
        let own = buf.device_ptr() + (self.rank * block * size_of::<T>()) as CUdeviceptr;
        Ok((block, own))
    }
}

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

/// NCCL's send and receive pointers of an in-place operation on all of `buf`.
fn whole<T>(buf: &DeviceMut<'_, '_, T>) -> (CUdeviceptr, CUdeviceptr) {
    (buf.device_ptr(), buf.device_ptr())
}

/// The arguments of an operation of `count` elements of `T`, NCCL's send and receive
/// pointers `send` and `recv`, its reduction `op` and its root or peer `peer`; its spans
/// and their names are filled in by the caller.
fn call<T: NcclType>(
    kind: Kind,
    (send, recv): (CUdeviceptr, CUdeviceptr),
    count: usize,
    op: c_int,
    peer: c_int,
) -> Call {
    Call {
        kind,
        send,
        recv,
        count,
        datatype: T::datatype(),
        op,
        peer,
    }
}

/// An operation reading `src` and writing `dst`, which must not overlap.
fn out_of_place<T: NcclType>(
    kind: Kind,
    src: DeviceRef<'_, '_, T>,
    dst: DeviceMut<'_, '_, T>,
    count: usize,
    op: c_int,
    peer: c_int,
    what: &'static str,
) -> Result<Prepared> {
    let names = ["the source", "the destination"];
    let spans = [
        span::<T>(src.device_ptr(), src.len(), false),
        span::<T>(dst.device_ptr(), dst.len(), true),
    ];
    if spans[0].overlaps(&spans[1]) {
        return Err(overlap_error(what, names, &spans[0], &spans[1]));
    }
    let pointers = (src.device_ptr(), dst.device_ptr());
    Ok(Prepared {
        call: call::<T>(kind, pointers, count, op, peer),
        spans,
        n: 2,
        names,
        what,
    })
}

/// An operation on `buf` alone, NCCL's send and receive pointers `pointers` inside it.
fn in_place<T: NcclType>(
    kind: Kind,
    buf: DeviceMut<'_, '_, T>,
    pointers: (CUdeviceptr, CUdeviceptr),
    count: usize,
    op: c_int,
    peer: c_int,
) -> Prepared {
    Prepared {
        call: call::<T>(kind, pointers, count, op, peer),
        spans: [span::<T>(buf.device_ptr(), buf.len(), true), Span::NONE],
        n: 1,
        names: ["the buffer", ""],
        what: "",
    }
}

/// A send (of `len` elements at NCCL's send pointer) or a receive (into its receive
/// pointer): one span, `name`, written by a receive.
fn one_way<T: NcclType>(
    kind: Kind,
    pointers: (CUdeviceptr, CUdeviceptr),
    len: usize,
    peer: c_int,
    name: &'static str,
    write: bool,
) -> Prepared {
    let start = if write { pointers.1 } else { pointers.0 };
    Prepared {
        call: call::<T>(kind, pointers, len, 0, peer),
        spans: [span::<T>(start, len, write), Span::NONE],
        n: 1,
        names: [name, ""],
        what: "",
    }
}
