//! Each NCCL operation once: an [`Operation`] is what a front was asked for (the buffers,
//! bound to a scope, and the other arguments), [`Operation::check`] checks it and lays out
//! NCCL's arguments ([`Prepared`]). Both fronts use it: a communicator on a scope
//! (`ops.rs`, queued at once) and a scope in a group (`groups.rs`, queued when the group's
//! closure returns); `issue.rs` orders and issues what it prepares.

use std::ffi::c_int;
use std::mem::size_of;

use super::sys::{Call, OpKind};
use super::{NcclType, ReduceOp};
use crate::driver::CUdeviceptr;
use crate::error::{Error, Invalid, Result};
use crate::launch::sealed::Crate;
use crate::memory::overlap_error;
use crate::scope::{DeviceMut, DeviceRef, IntoDeviceMut, IntoDeviceRef};
use crate::span::Span;

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

/// The operations as the fronts' methods take their arguments: the memory as anything a
/// scope binds (`&buffer`, `&mut buffer`, a bound view), bound here, once for both fronts.
impl<'s, 'ctx, T> Operation<'s, 'ctx, T> {
    pub(super) fn all_reduce(
        dst: impl IntoDeviceMut<'s, 'ctx, T>,
        src: impl IntoDeviceRef<'s, 'ctx, T>,
        op: ReduceOp,
    ) -> Self {
        let (src, dst) = (src.into_ref(Crate(())), dst.into_mut(Crate(())));
        Operation::AllReduce { src, dst, op }
    }

    pub(super) fn all_reduce_in_place(buf: impl IntoDeviceMut<'s, 'ctx, T>, op: ReduceOp) -> Self {
        let buf = buf.into_mut(Crate(()));
        Operation::AllReduceInPlace { buf, op }
    }

    pub(super) fn broadcast(
        dst: impl IntoDeviceMut<'s, 'ctx, T>,
        src: impl IntoDeviceRef<'s, 'ctx, T>,
        root: usize,
    ) -> Self {
        let (src, dst) = (src.into_ref(Crate(())), dst.into_mut(Crate(())));
        Operation::Broadcast { src, dst, root }
    }

    pub(super) fn broadcast_in_place(buf: impl IntoDeviceMut<'s, 'ctx, T>, root: usize) -> Self {
        let buf = buf.into_mut(Crate(()));
        Operation::BroadcastInPlace { buf, root }
    }

    pub(super) fn reduce(
        dst: impl IntoDeviceMut<'s, 'ctx, T>,
        src: impl IntoDeviceRef<'s, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    ) -> Self {
        let (src, dst) = (src.into_ref(Crate(())), dst.into_mut(Crate(())));
        Operation::Reduce { src, dst, op, root }
    }

    pub(super) fn reduce_in_place(
        buf: impl IntoDeviceMut<'s, 'ctx, T>,
        op: ReduceOp,
        root: usize,
    ) -> Self {
        let buf = buf.into_mut(Crate(()));
        Operation::ReduceInPlace { buf, op, root }
    }

    pub(super) fn all_gather(
        dst: impl IntoDeviceMut<'s, 'ctx, T>,
        src: impl IntoDeviceRef<'s, 'ctx, T>,
    ) -> Self {
        let (src, dst) = (src.into_ref(Crate(())), dst.into_mut(Crate(())));
        Operation::AllGather { src, dst }
    }

    pub(super) fn all_gather_in_place(buf: impl IntoDeviceMut<'s, 'ctx, T>) -> Self {
        let buf = buf.into_mut(Crate(()));
        Operation::AllGatherInPlace { buf }
    }

    pub(super) fn reduce_scatter(
        dst: impl IntoDeviceMut<'s, 'ctx, T>,
        src: impl IntoDeviceRef<'s, 'ctx, T>,
        op: ReduceOp,
    ) -> Self {
        let (src, dst) = (src.into_ref(Crate(())), dst.into_mut(Crate(())));
        Operation::ReduceScatter { src, dst, op }
    }

    pub(super) fn reduce_scatter_in_place(
        buf: impl IntoDeviceMut<'s, 'ctx, T>,
        op: ReduceOp,
    ) -> Self {
        let buf = buf.into_mut(Crate(()));
        Operation::ReduceScatterInPlace { buf, op }
    }

    pub(super) fn send(src: impl IntoDeviceRef<'s, 'ctx, T>, peer: usize) -> Self {
        let src = src.into_ref(Crate(()));
        Operation::Send { src, peer }
    }

    pub(super) fn recv(dst: impl IntoDeviceMut<'s, 'ctx, T>, peer: usize) -> Self {
        let dst = dst.into_mut(Crate(()));
        Operation::Recv { dst, peer }
    }
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
                out_of_place(OpKind::AllReduce, src, dst, src.len(), op.raw(), 0, what)?
            }
            O::AllReduceInPlace { buf, op } => {
                in_place(OpKind::AllReduce, buf, whole(&buf), buf.len(), op.raw(), 0)
            }
            O::Broadcast { src, dst, root } => {
                let root = at.rank_of(root, "root", what)?;
                same_len(what, src.len(), dst.len())?;
                out_of_place(OpKind::Broadcast, src, dst, src.len(), 0, root, what)?
            }
            O::BroadcastInPlace { buf, root } => {
                let root = at.rank_of(root, "root", what)?;
                in_place(OpKind::Broadcast, buf, whole(&buf), buf.len(), 0, root)
            }
            O::Reduce { src, dst, op, root } => {
                let root = at.rank_of(root, "root", what)?;
                same_len(what, src.len(), dst.len())?;
                out_of_place(OpKind::Reduce, src, dst, src.len(), op.raw(), root, what)?
            }
            O::ReduceInPlace { buf, op, root } => {
                let root = at.rank_of(root, "root", what)?;
                in_place(OpKind::Reduce, buf, whole(&buf), buf.len(), op.raw(), root)
            }
            O::AllGather { src, dst } => {
                at.gathered(what, src.len(), dst.len())?;
                out_of_place(OpKind::AllGather, src, dst, src.len(), 0, 0, what)?
            }
            O::AllGatherInPlace { buf } => {
                let (block, own) = at.blocks(&buf, what)?;
                in_place(OpKind::AllGather, buf, (own, buf.device_ptr()), block, 0, 0)
            }
            O::ReduceScatter { src, dst, op } => {
                at.scattered(what, src.len(), dst.len())?;
                out_of_place(
                    OpKind::ReduceScatter,
                    src,
                    dst,
                    dst.len(),
                    op.raw(),
                    0,
                    what,
                )?
            }
            O::ReduceScatterInPlace { buf, op } => {
                let (block, own) = at.blocks(&buf, what)?;
                let sent = (buf.device_ptr(), own);
                in_place(OpKind::ReduceScatter, buf, sent, block, op.raw(), 0)
            }
            O::Send { src, peer } => {
                let peer = at.rank_of(peer, "peer", what)?;
                let (ptr, len) = (src.device_ptr(), src.len());
                one_way::<T>(OpKind::Send, (ptr, 0), len, peer, "the source", false)
            }
            O::Recv { dst, peer } => {
                let peer = at.rank_of(peer, "peer", what)?;
                let (ptr, len) = (dst.device_ptr(), dst.len());
                one_way::<T>(OpKind::Recv, (0, ptr), len, peer, "the destination", true)
            }
        };
        Ok(Prepared { what, ..p }) // each layout named once, here
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
    Error::invalid_input(what, Invalid::argument(detail))
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
        // the operation reads and writes the same count
        Err(Error::invalid_input(
            what,
            Invalid::LengthMismatch {
                expected: dst,
                found: src,
            },
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
    kind: OpKind,
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
    kind: OpKind,
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
    kind: OpKind,
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
        what: "", // named by `Operation::check`
    }
}

/// A send (of `len` elements at NCCL's send pointer) or a receive (into its receive
/// pointer): one span, `name`, written by a receive.
fn one_way<T: NcclType>(
    kind: OpKind,
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
        what: "", // named by `Operation::check`
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    /// Rank 1 of 4, the rank count every test below runs on unless it says otherwise.
    const AT: Ranks = Ranks { rank: 1, ranks: 4 };

    fn r(ptr: CUdeviceptr, len: usize) -> DeviceRef<'static, 'static, f32> {
        DeviceRef::new(ptr, len)
    }

    fn w(ptr: CUdeviceptr, len: usize) -> DeviceMut<'static, 'static, f32> {
        DeviceMut::new(ptr, len)
    }

    fn check(op: Operation<'_, '_, f32>) -> Result<Prepared> {
        let what = op.what(Front::Grouped);
        op.check(AT, what)
    }

    /// `(kind, send, recv, count, op, peer)` of a prepared call.
    type Args = (OpKind, u64, u64, usize, c_int, c_int);
    /// `(start, bytes, written)` of each span.
    type Spans = Vec<(u64, u64, bool)>;

    fn laid_out(p: &Prepared) -> (Args, Spans) {
        let c = p.call;
        assert_eq!(c.datatype, 7, "f32 is ncclFloat32");
        let spans = p
            .spans()
            .iter()
            .map(|s| (s.start, s.bytes, s.write))
            .collect();
        ((c.kind, c.send, c.recv, c.count, c.op, c.peer), spans)
    }

    #[test]
    fn every_operation_lays_out_nccls_arguments_and_the_memory_it_touches() {
        use Operation as O;
        let (sum, max, avg) = (ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg);
        let (src, dst, buf) = (0x1000, 0x9000, 0x20000);
        #[rustfmt::skip]
        let cases: Vec<(Operation<'_, '_, f32>, Args, Spans)> = vec![
            (O::AllReduce { src: r(src, 8), dst: w(dst, 8), op: max },
                (OpKind::AllReduce, src, dst, 8, 2, 0), vec![(src, 32, false), (dst, 32, true)]),
            (O::AllReduceInPlace { buf: w(buf, 8), op: sum },
                (OpKind::AllReduce, buf, buf, 8, 0, 0), vec![(buf, 32, true)]),
            (O::Broadcast { src: r(src, 8), dst: w(dst, 8), root: 3 },
                (OpKind::Broadcast, src, dst, 8, 0, 3), vec![(src, 32, false), (dst, 32, true)]),
            (O::BroadcastInPlace { buf: w(buf, 8), root: 2 },
                (OpKind::Broadcast, buf, buf, 8, 0, 2), vec![(buf, 32, true)]),
            (O::Reduce { src: r(src, 8), dst: w(dst, 8), op: avg, root: 1 },
                (OpKind::Reduce, src, dst, 8, 4, 1), vec![(src, 32, false), (dst, 32, true)]),
            (O::ReduceInPlace { buf: w(buf, 8), op: max, root: 0 },
                (OpKind::Reduce, buf, buf, 8, 2, 0), vec![(buf, 32, true)]),
            // NCCL's count of an all-gather is the send count, 2 of the 4 × 2 received
            (O::AllGather { src: r(src, 2), dst: w(dst, 8) },
                (OpKind::AllGather, src, dst, 2, 0, 0), vec![(src, 8, false), (dst, 32, true)]),
            // in place, rank 1 sends its own block: the second of four of 2 elements
            (O::AllGatherInPlace { buf: w(buf, 8) },
                (OpKind::AllGather, buf + 8, buf, 2, 0, 0), vec![(buf, 32, true)]),
            // and of a reduce-scatter the receive count
            (O::ReduceScatter { src: r(src, 8), dst: w(dst, 2), op: sum },
                (OpKind::ReduceScatter, src, dst, 2, 0, 0), vec![(src, 32, false), (dst, 8, true)]),
            (O::ReduceScatterInPlace { buf: w(buf, 8), op: avg },
                (OpKind::ReduceScatter, buf, buf + 8, 2, 4, 0), vec![(buf, 32, true)]),
            (O::Send { src: r(src, 5), peer: 3 },
                (OpKind::Send, src, 0, 5, 0, 3), vec![(src, 20, false)]),
            (O::Recv { dst: w(dst, 5), peer: 0 },
                (OpKind::Recv, 0, dst, 5, 0, 0), vec![(dst, 20, true)]),
        ];
        for (op, call, spans) in cases {
            let what = op.what(Front::Communicator);
            let p = op.check(AT, what).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(p.what, what);
            assert_eq!(laid_out(&p), (call, spans), "{what}");
        }
    }

    #[test]
    fn each_front_names_the_method_it_was_called_as() {
        let op = || Operation::ReduceScatterInPlace {
            buf: w(0x1000, 8),
            op: ReduceOp::Sum,
        };
        assert_eq!(
            op().what(Front::Communicator),
            "Communicator::reduce_scatter_in_place"
        );
        assert_eq!(
            op().what(Front::Grouped),
            "Grouped::reduce_scatter_in_place"
        );
        let send = Operation::Send {
            src: r(0x1000, 1),
            peer: 0,
        };
        assert_eq!(send.what(Front::Grouped), "Grouped::send");
    }

    fn refused(op: Operation<'_, '_, f32>, detail: &str) {
        let what = op.what(Front::Grouped);
        let e = check(op).expect_err(what);
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
        assert_eq!(e.call(), what);
        let text = e.invalid().unwrap().to_string();
        assert!(
            text.starts_with(detail),
            "{what}: {text:?} is not {detail:?}"
        );
    }

    #[test]
    fn bad_lengths_roots_and_peers_are_refused_naming_the_call() {
        use Operation as O;
        let (op, src, dst) = (ReduceOp::Sum, r(0x1000, 8), w(0x9000, 7));
        let len = "the lengths differ: 7 expected, 8 found";
        refused(O::AllReduce { src, dst, op }, len);
        refused(O::Broadcast { src, dst, root: 0 }, len);
        refused(
            O::Reduce {
                src,
                dst,
                op,
                root: 0,
            },
            len,
        );
        let root = "the root is rank 4, but the communicator has 4 rank(s)";
        let dst = w(0x9000, 8);
        refused(O::Broadcast { src, dst, root: 4 }, root);
        refused(O::BroadcastInPlace { buf: dst, root: 4 }, root);
        refused(
            O::Reduce {
                src,
                dst,
                op,
                root: 4,
            },
            root,
        );
        refused(
            O::ReduceInPlace {
                buf: dst,
                op,
                root: 4,
            },
            root,
        );
        refused(
            O::Send { src, peer: 9 },
            "the peer is rank 9, but the communicator has 4 rank(s)",
        );
        refused(
            O::Recv {
                dst,
                peer: usize::MAX,
            },
            &format!("the peer is rank {}", usize::MAX),
        );
        refused(
            O::AllGather {
                src: r(0x1000, 2),
                dst: w(0x9000, 7),
            },
            "the destination has 7 elements, but gathering 2 from each of 4 ranks needs 8",
        );
        refused(
            O::ReduceScatter {
                src: r(0x1000, 7),
                dst: w(0x9000, 2),
                op,
            },
            "the source has 7 elements, but scattering 2 to each of 4 ranks needs 8",
        );
        // a count whose product with the rank count overflows is refused, not wrapped
        refused(
            O::AllGather {
                src: r(0x1000, usize::MAX / 2),
                dst: w(0x9000, 2),
            },
            &format!(
                "the destination has 2 elements, but gathering {} from each of 4 ranks needs {}",
                usize::MAX / 2,
                usize::MAX
            ),
        );
        let blocks = "the buffer has 6 elements, not a multiple of the communicator's 4 ranks";
        refused(O::AllGatherInPlace { buf: w(0x9000, 6) }, blocks);
        refused(
            O::ReduceScatterInPlace {
                buf: w(0x9000, 6),
                op,
            },
            blocks,
        );
    }

    #[test]
    fn an_out_of_place_operations_source_and_destination_must_not_overlap() {
        use Operation as O;
        let op = ReduceOp::Sum;
        // 8 f32 at 0x1000 and 8 at 0x1010: the last 16 bytes of one are the first of the other
        let (src, dst) = (r(0x1000, 8), w(0x1010, 8));
        let overlap =
            "the source (32 bytes at 0x1000) and the destination (32 bytes at 0x1010) overlap";
        refused(O::AllReduce { src, dst, op }, overlap);
        refused(O::Broadcast { src, dst, root: 0 }, overlap);
        refused(
            O::Reduce {
                src,
                dst,
                op,
                root: 0,
            },
            overlap,
        );
        refused(
            O::AllGather {
                src: r(0x1000, 2),
                dst: w(0x1004, 8),
            },
            "the source (8 bytes at 0x1000) and the destination (32 bytes at 0x1004) overlap",
        );
        refused(
            O::ReduceScatter {
                src: r(0x1000, 8),
                dst: w(0x101c, 2),
                op,
            },
            "the source (32 bytes at 0x1000) and the destination (8 bytes at 0x101c) overlap",
        );
        // side by side is fine
        let apart = O::AllReduce {
            src,
            dst: w(0x1020, 8),
            op,
        };
        assert!(check(apart).is_ok());
    }
}
