//! The part of a device a guard works on, the guard's second marker beside its
//! [phase](super::phase): [`Whole`] (a context over all of the device's SMs, the guard of
//! [`with_context`](crate::with_context) and of [`with_phases`](crate::with_phases)) or
//! [`Partitioned`] (an SM partition, [`with_partitions`](crate::with_partitions)). The two
//! markers are independent: a guard is `ContextGuard<'ctx, P, S>` with `P` its phase and
//! `S` its part, and an operation bounds each only where it must.

#[cfg(doc)]
use super::ContextGuard;

mod sealed {
    pub trait Part {}
}

/// The part of the device a [`ContextGuard`] works on: [`Whole`] or [`Partitioned`].
/// Sealed.
pub trait Part: sealed::Part + Copy {
    /// Whether the guard is a partition's ([`Partitioned`]): its streams are made by
    /// `cuGreenCtxStreamCreate`, so that their work runs on the partition's SMs only.
    #[doc(hidden)]
    const PARTITION: bool;
}

/// The guard of a whole context: its work may run on any of the device's SMs.
#[derive(Debug, Clone, Copy)]
pub struct Whole;

/// The guard of an SM partition ([`with_partitions`](crate::with_partitions)): it
/// allocates, loads and creates as a whole context's guard does, but every stream it
/// creates is one of the partition (`cuGreenCtxStreamCreate`), whose work runs on the
/// partition's SMs only, and the operations whose work or whose effect the partition could
/// not keep to its SMs and its thread (sharing it with other threads, peer access, NCCL,
/// the cuBLAS, cuFFT and cuRAND handles) are bounded by [`Unpartitioned`], which it is
/// not. See [`crate::partition`].
#[derive(Debug, Clone, Copy)]
pub struct Partitioned;

impl sealed::Part for Whole {}
impl Part for Whole {
    const PARTITION: bool = false;
}
impl sealed::Part for Partitioned {}
impl Part for Partitioned {
    const PARTITION: bool = true;
}

/// A part whose guard may do what a partition cannot: [`Whole`] only. Sealed.
///
/// An operation bounded by it either queues work the crate cannot put on a partition's
/// stream (NCCL and the libraries make streams and launch kernels of their own), or acts
/// beyond the partition (a shared guard would enter the partition's context on another
/// thread, which the driver does not allow for a green context; peer access would join the
/// memory of two partitions, whose streams nothing the crate can see orders). With a
/// partition's guard each is this trait's error (`ui-tests/fail/11_partitions/`).
#[diagnostic::on_unimplemented(
    message = "a partition's guard cannot do this: its work or its effect would reach beyond the partition",
    label = "a partition's guard, given where a whole context's guard is needed",
    note = "a partition keeps its work on its SMs and its thread: only operations whose every stream is the partition's take its guard",
    note = "see the guide, chapter 14 (`cuda_brand::guide`)"
)]
pub trait Unpartitioned: Part {}

impl Unpartitioned for Whole {}
