//! The phase types of a context (see [`phase`](crate::phase), where [`with_phases`]
//! lives): the guard's first marker, its [`Phase`] ([`Unphased`], [`Setup`], [`Run`]),
//! which phases may allocate ([`Allocating`]) and which allocate at any time
//! ([`NoPhases`]), and the kind of the streams a guard creates ([`StreamKind`]:
//! [`Dynamic`], [`Preallocated`]). The guard's second marker, the part of the device it
//! works on, is in `part.rs`: the two are independent.
//!
//! [`with_phases`]: crate::with_phases

use std::marker::PhantomData;

#[cfg(doc)]
use super::ContextGuard;

mod sealed {
    pub trait Phase {}
    pub trait StreamKind {}
}

/// The phase a [`ContextGuard`] is in: [`Unphased`] (the guard of
/// [`with_context`](crate::with_context) and of an SM partition), [`Setup`] or [`Run`].
/// Sealed. Independent of the guard's part ([`Part`](crate::Part): the whole context or a
/// partition).
pub trait Phase: sealed::Phase + Copy {
    /// The kind of the streams a guard of this phase creates: [`Dynamic`] without phases,
    /// [`Preallocated`] in setup. (A run-phase guard creates none; its `Preallocated` only
    /// keeps the signatures of the creating methods free of the [`Allocating`] bound, so
    /// that calling one with it is the `Allocating` error, not a missing method.)
    type Streams: StreamKind;
}

/// A phase whose guard may allocate, load and create: [`Unphased`] and [`Setup`], of a
/// whole context or of a partition. Sealed.
///
/// Every public constructor that allocates memory (device, pool, pinned, managed, pitched)
/// or creates a pool, stream, event, module or graph takes a guard of such a phase (a
/// helper generic over such guards names [`Allocates`](crate::Allocates)), or one of
/// [`NoPhases`], which a phased context never hands out. With a run-phase guard each is
/// this trait's error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot allocate, load or create: this guard is in the run phase",
    label = "a run-phase guard, given where a guard that may allocate is needed",
    note = "in `with_phases`, every buffer, pool, stream, event and module is made in `Phases::setup`: move this there",
    note = "see `cuda_brand::phase`"
)]
pub trait Allocating: Phase {
    /// Whether memory made with this guard is freed only by the teardown.
    #[doc(hidden)]
    const DEFERS_FREES: bool;
}

/// The guard of a context without phases: every operation is available at any time.
#[derive(Debug, Clone, Copy)]
pub struct Unphased;

/// The guard of the setup phase of [`with_phases`](crate::with_phases); `'s` is the setup
/// closure's, so the guard cannot outlive it.
///
/// # The brand
///
/// `'s` is the setup closure's lifetime: [`Phases::setup`](crate::Phases::setup) takes a
/// closure for every `'s`, and `'s` is invariant, so the setup guard cannot be kept for the
/// run phase, where it would still allocate:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::with_phases;
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_phases(&device, ContextFlags::default(), |phases| {
///     let mut kept = None;
///     let ((), run) = phases.setup(|setup| {
///         kept = Some(setup); // the setup guard leaves its phase: does not compile
///         Ok::<_, Error>(())
///     })?;
///     Ok(())
/// })
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Setup<'s>(
    /// Invariant in `'s`. Were it contravariant, a setup guard could be lengthened to
    /// `Setup<'static>`, kept past its closure and used to allocate in the run phase; a
    /// covariant `'s` would be harmless (it can only shrink), but invariance, like every
    /// brand's, makes the phase's lifetime exact.
    PhantomData<fn(&'s ()) -> &'s ()>,
);

/// The guard of the run phase of [`with_phases`](crate::with_phases): queries and
/// synchronization only; no method that allocates, loads or creates.
#[derive(Debug, Clone, Copy)]
pub struct Run;

impl sealed::Phase for Unphased {}
impl Phase for Unphased {
    type Streams = Dynamic;
}
impl sealed::Phase for Setup<'_> {}
impl Phase for Setup<'_> {
    type Streams = Preallocated;
}
impl sealed::Phase for Run {}
impl Phase for Run {
    type Streams = Preallocated;
}

impl Allocating for Unphased {
    const DEFERS_FREES: bool = false;
}

impl Allocating for Setup<'_> {
    const DEFERS_FREES: bool = true;
}

/// A phase whose guard may allocate at any time, also where the crate cannot see when an
/// operation allocates: [`Unphased`] only. Sealed.
///
/// An operation bounded by it hands work to code that allocates when it chooses, not only
/// when it is called (NCCL sets up its connections and their buffers at a communicator's
/// first collectives), so the phases of [`with_phases`](crate::with_phases) could not keep
/// the run phase free of allocations with it. With a setup or run guard it is this trait's
/// error (`ui-tests/fail/9_typestate/phase_setup_guard_shared_with_other_threads.rs`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a phase of `with_phases`: this operation may allocate at any later time, which the phases cannot allow",
    label = "a guard of `with_phases`, given where a guard without phases is needed",
    note = "use a context without phases (`with_context`) for this operation",
    note = "see `cuda_brand::phase`"
)]
pub trait NoPhases: Allocating {}

impl NoPhases for Unphased {}

/// What a stream's scopes may do with memory: [`Dynamic`] or [`Preallocated`]. Sealed.
pub trait StreamKind: sealed::StreamKind {}

/// A stream of a context without phases: its scopes may allocate from the crate's pool
/// ([`StreamScope::alloc`](crate::StreamScope::alloc) and the like).
#[derive(Debug, Clone, Copy)]
pub struct Dynamic;

/// A stream created during the setup phase of [`with_phases`](crate::with_phases): its
/// scopes draw scratch memory only from pools
/// ([`StreamScope::alloc_in`](crate::StreamScope::alloc_in)).
#[derive(Debug, Clone, Copy)]
pub struct Preallocated;

impl sealed::StreamKind for Dynamic {}
impl StreamKind for Dynamic {}
impl sealed::StreamKind for Preallocated {}
impl StreamKind for Preallocated {}
