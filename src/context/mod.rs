//! Contexts: the brand `'ctx`, [`with_context`], [`ContextGuard`] and [`SharedContext`].
//!
//! # The brand
//!
//! Every value that belongs to a context carries the context's *brand*, an invariant
//! lifetime `'ctx`:
//!
//! ```text
//! type Brand<'ctx> = PhantomData<fn(&'ctx ()) -> &'ctx ()>;
//! ```
//!
//! [`with_context`] creates the context and calls a closure that must work `for<'ctx>`,
//! any lifetime at all. Inside, `'ctx` is a fresh lifetime nobody else can name:
//!
//! * the closure's result type `R` is chosen outside, so it cannot mention `'ctx`: no
//!   guard, stream, buffer or kernel leaves the closure, and every one of them is gone
//!   before the context is destroyed;
//! * `'ctx` is invariant, so two contexts' brands never unify: a value of one context
//!   never type-checks where another context's value is required;
//! * `'ctx` is not `'static`, so nothing branded reaches `std::thread::spawn`, a `static`,
//!   a `thread_local!` or a `Box<dyn Any>`.
//!
//! The soundness argument follows [`std::thread::scope`]: the teardown (synchronize, pop,
//! destroy) happens in `with_context` itself after the closure returns or unwinds, not in a
//! `Drop`, so `mem::forget` of anything cannot skip it. A value leaked with `mem::forget`
//! is reclaimed when the context is destroyed.
//!
//! # What is current
//!
//! The driver keeps a stack of current contexts per thread. `with_context` pushes its
//! context and pops it on every exit path (return, error, panic), so the stack is always
//! as it was before. An operation that needs its context current (allocation, module
//! loading, the getters below) checks `cuCtxGetCurrent` (8.5 ns on an H100: `docs/driver-facts.md`) and pushes and pops
//! around the call only when another context is current: an outer guard keeps working
//! inside a nested `with_context`.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use crate::driver::{self, CUcontext, CUdevice};
use crate::error::{Error, ErrorCode, Invalid, Result};

// The rooms: the brand, the guard and the shared context here, with `in_context` (the
// guard's `with_current`); `device.rs` (devices), `flags.rs` (a context's flags and
// settings), `enter.rs` (entering and tearing down), `teardown.rs` (errors at a closure's
// end, failed releases, the end hooks of the layers above, the synchronous layer's among
// them), `phase.rs` (the phase types), `deferred.rs` (setup-phase memory the teardown
// frees), `partition.rs` (SM partitions, public as `cuda_brand::partition`:
// `with_partitions`, the split), `confined.rs` (a partition's values on other threads:
// refused, their drops parked for its thread), `part.rs` (the guard's second marker: the
// whole context or a partition).
pub(crate) mod confined;
pub(crate) mod deferred;
mod device;
mod enter;
mod flags;
pub(crate) mod part;
pub mod partition;
pub(crate) mod phase;
pub(crate) mod teardown;

#[doc(inline)]
pub use device::{ComputeCapability, Device, DeviceAttribute, PrimaryContextState, Uuid};
#[cfg(feature = "staging")]
pub(crate) use enter::held;
pub(crate) use enter::{
    Held, create_held, destroys_itself, enter_held, give_up, retain_held, run_then,
    with_context_then,
};
#[doc(inline)]
pub use enter::{
    with_context, with_context_and_teardown, with_primary_context,
    with_primary_context_and_teardown, with_raw_context,
};
#[doc(inline)]
pub use flags::{
    CacheConfig, ContextFlags, ResourceLimit, Scheduling, SharedMemoryConfig, StreamPriorityRange,
};
pub(crate) use part::{Part, Unpartitioned, Whole};
#[doc(inline)]
pub use partition::{SmGroup, Sms, with_partitions};
pub(crate) use phase::{Allocating, Dynamic, NoPhases, Phase, StreamKind, Unphased};

/// Runs `op` with `ctx` current on the calling thread: directly if it already is (one
/// `cuCtxGetCurrent`), otherwise between a push and a pop. The pop is checked like the
/// teardown's (the context must be the one on top) and happens also if `op` panics. This is
/// the crate's one way of making a context current for an operation: the guard's methods,
/// synchronous memory operations (in the memory's own context), stream-ordered fallbacks
/// and drops all go through it.
///
/// # Safety
/// `ctx` is a live context that stays alive while `op` runs.
#[inline]
pub(crate) unsafe fn in_context<T>(
    ctx: NonNull<CUctx_st>,
    op: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let raw = ctx.as_ptr();
    if driver::ctx_get_current()? == raw {
        return op();
    }
    // a partition's context is current on its own thread only (one atomic load while no
    // partition lives)
    confined::refuse_foreign(raw)?;
    // SAFETY: the caller guarantees the context; it is popped again below (or by the
    // guard while a panic of `op` unwinds).
    unsafe { driver::ctx_push(raw) }?;
    struct PopOnUnwind(CUcontext);
    impl Drop for PopOnUnwind {
        fn drop(&mut self) {
            let _ = enter::pop_exact(self.0);
        }
    }
    let on_unwind = PopOnUnwind(raw);
    let result = op();
    std::mem::forget(on_unwind);
    let popped = enter::pop_exact(raw);
    teardown::keep_both(result, popped)
}

/// The invariant brand: `'ctx` can be neither shortened nor lengthened, so two brands are
/// equal only if they are the same lifetime.
///
/// Every branded type holds one (or a branded value that does), so each is invariant on its
/// own, not only through the guard that made it. A covariant type could be shortened to a
/// lifetime common to two contexts, and two of its values from two contexts would meet as
/// one type wherever a signature takes two "of one context" (a `Vec`, a helper
/// `fn f<'ctx>(x: &X<'ctx>, y: &X<'ctx>)`); a contravariant one could be lengthened to
/// `'static` and outlive its context. The field that carries the brand says what its
/// type's invariance guards, and the type's documentation has a section "The brand" with a
/// `compile_fail` test of it (`tests/house.rs` checks that each branded type has one).
pub(crate) type Brand<'ctx> = PhantomData<fn(&'ctx ()) -> &'ctx ()>;

/// Proof that the context branded `'ctx` is alive, handed to the closure of
/// [`with_context`]. It is one pointer wide, `Copy`, and neither `Send` nor `Sync`: it stays
/// on the thread that opened the context (use [`ContextGuard::share`] to reach other
/// threads).
///
/// The guard cannot leave its closure:
///
/// ```compile_fail
/// use cuda_brand::{with_context, ContextFlags, Device};
/// let device = Device::get(0)?;
/// let escaped = with_context(&device, ContextFlags::default(), |ctx| Ok::<_, cuda_brand::Error>(ctx))?;
/// # Ok::<(), cuda_brand::Error>(())
/// ```
///
/// (The UI suite in `ui-tests/fail/` pins this and every other rule with its full error.)
///
/// The guard has two independent markers:
///
/// * `P`, its [phase](crate::phase): [`Unphased`] (the default) for the guard of
///   [`with_context`] and of a partition, `Setup<'s>` or `Run` for
///   [`with_phases`](crate::with_phases), whose run-phase guard has no allocating, loading
///   or creating method ([`Allocating`] bounds them);
/// * `S`, its part of the device: [`Whole`] (the default) for a whole
///   context, [`Partitioned`](crate::Partitioned) for an SM partition
///   ([`with_partitions`]), whose streams run on the partition's
///   SMs only and which cannot do what [`Unpartitioned`] bounds.
///
/// `ContextGuard<'ctx>` is the plain guard. A helper that takes any guard that may
/// allocate, whole or partitioned, names one bound, [`Allocates`]:
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// use cuda_brand::Allocates;
///
/// fn upload<'ctx>(ctx: impl Allocates<'ctx>, host: &[f32]) -> Result<DeviceBuffer<'ctx, f32>> {
///     ctx.into_guard().from_slice(host)
/// }
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     assert_eq!(upload(ctx, &[1.0, 2.0])?.to_vec()?, [1.0, 2.0]);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)): every other brand is taken
/// from a guard, so this is the rule the others rest on. Guards of two contexts never have
/// one type, and a function that takes two guards of one context cannot be given one of
/// each (the UI suite's `two_contexts_*` cases show the same with a `Vec` and `mem::swap`):
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
///
/// /// Takes two guards of one context.
/// fn one_context<'ctx>(_: ContextGuard<'ctx>, _: ContextGuard<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     with_context(&device, ContextFlags::default(), |b| {
///         one_context(a, b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct ContextGuard<'ctx, P: Phase = Unphased, S: Part = Whole> {
    raw: Handle,
    /// Invariant in `'ctx` (see [`Brand`]). Every branded value is made from a guard and
    /// takes its brand, so this is the one that matters most: were the guard covariant, the
    /// guards of two contexts could be shortened to one common lifetime
    /// (`vec![outer, inner]`, a helper taking two guards of one brand), and the streams,
    /// buffers and kernels made from them would carry one brand for two contexts. Were it
    /// contravariant, a guard could be lengthened to `'static` and leave its closure.
    _brand: Brand<'ctx>,
    _thread: PhantomData<UseShareToCrossThreads>,
    _phase: PhantomData<P>,
    _part: PhantomData<S>,
}

/// Any guard that may allocate, load and create, whole or partitioned: the one bound of a
/// helper that makes buffers, streams or modules with whatever guard it is given
/// (`ContextGuard<'ctx, P, S>` with `P: Allocating`, [`Allocating`]; the
/// run-phase guard is not one). Sealed: only the guard implements it.
///
/// [`into_guard`](Self::into_guard) is the guard itself, with its markers named by the
/// trait, so that its methods are reachable in the helper:
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// use cuda_brand::{Allocates, with_partitions, with_phases};
///
/// /// Uploads `host` with any guard that may allocate.
/// fn upload<'ctx>(ctx: impl Allocates<'ctx>, host: &[u32]) -> Result<DeviceBuffer<'ctx, u32>> {
///     ctx.into_guard().from_slice(host)
/// }
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| upload(ctx, &[1]).map(drop))?;
/// with_phases(&device, ContextFlags::default(), |phases| {
///     let (buf, _run) = phases.setup(|setup| upload(setup, &[2]))?;
///     assert_eq!(buf.to_vec()?, [2]);
///     Ok::<_, Error>(())
/// })?;
/// with_partitions(&device, |sms| {
///     let (part, _) = sms.split(8)?;
///     part.enter(|p| upload(p, &[3]).map(drop))
/// })
/// # }
/// ```
///
/// A run-phase guard is refused with [`Allocating`]'s message
/// (`ui-tests/fail/9_typestate/phase_run_guard_in_a_generic_helper.rs`):
///
/// ```compile_fail,E0277
/// use cuda_brand::prelude::*;
/// use cuda_brand::{Allocates, with_phases};
///
/// fn upload<'ctx>(ctx: impl Allocates<'ctx>, host: &[u32]) -> Result<DeviceBuffer<'ctx, u32>> {
///     ctx.into_guard().from_slice(host)
/// }
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_phases(&device, ContextFlags::default(), |phases| {
///     let ((), run) = phases.setup(|_| Ok::<_, Error>(()))?;
///     upload(run, &[1])?; // the run phase allocates nothing: does not compile
///     Ok::<_, Error>(())
/// })
/// # }
/// ```
pub trait Allocates<'ctx>: Copy + sealed::Guard {
    /// The guard's phase: one that may allocate.
    type Phase: Allocating;
    /// The guard's part: the whole context or a partition.
    type Part: Part;
    /// The guard itself.
    fn into_guard(self) -> ContextGuard<'ctx, Self::Phase, Self::Part>;
}

impl<'ctx, P: Allocating, S: Part> Allocates<'ctx> for ContextGuard<'ctx, P, S> {
    type Phase = P;
    type Part = S;
    #[inline(always)]
    fn into_guard(self) -> Self {
        self
    }
}

mod sealed {
    pub trait Guard {}
    impl<P: super::Phase, S: super::Part> Guard for super::ContextGuard<'_, P, S> {}
}

/// A context handle as a plain value (`Send` and `Sync`: what may be done with it is up to
/// the type that holds it), so that the guard's only non-`Send` part is the marker below.
#[derive(Clone, Copy, Debug)]
struct Handle(NonNull<CUctx_st>);

// SAFETY: a bare handle value with no methods; `ContextGuard` stays on its thread through
// its marker, and `SharedContext` has its own argument (below).
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

/// Makes [`ContextGuard`] neither `Send` nor `Sync`. Named after the fix, because the
/// compiler quotes this name when a guard is sent to or shared with another thread.
///
/// The field alone would do it, but the compiler would then begin its error with
/// "`*const ()` cannot be sent between threads safely". The two impls below, whose bound
/// nothing implements, make it begin with [`CrossesThreads`]'s message instead.
/// (`T` is only there because a bound on a type without parameters is checked where it
/// is written; it is always `()`.)
#[derive(Clone, Copy)]
struct UseShareToCrossThreads<T = ()> {
    _not_send: PhantomData<(*const (), T)>,
}

/// The rule that [`UseShareToCrossThreads`] stands for, as the compiler states it.
/// Implemented by nothing, so that the marker is neither `Send` nor `Sync`.
#[diagnostic::on_unimplemented(
    message = "a `ContextGuard` stays on its thread: it cannot be sent to or shared with another thread",
    label = "the guard would reach another thread here",
    note = "to use the context on another thread, share it: `let shared = ctx.share();`, and in a scoped thread `shared.enter(|ctx| ...)`",
    note = "see the guide, chapter 4 (`cuda_brand::guide`)"
)]
trait CrossesThreads {}

// SAFETY: never holds: nothing implements `CrossesThreads`.
unsafe impl<T> Send for UseShareToCrossThreads<T> where Self: CrossesThreads {}
// SAFETY: as above.
unsafe impl<T> Sync for UseShareToCrossThreads<T> where Self: CrossesThreads {}

/// A context's guard that may cross threads: `Copy + Send + Sync`, with the same brand.
///
/// Made by [`ContextGuard::share`]; used inside [`std::thread::scope`] workers through
/// [`SharedContext::enter`]. A worker cannot outlive the context because `'ctx` is not
/// `'static`, so only scoped threads (joined inside the closure) can hold it.
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: the shared forms of two contexts never have one type, and
/// a function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::SharedContext;
///
/// /// Takes two shared forms of one context.
/// fn one_context<'ctx>(_: SharedContext<'ctx>, _: SharedContext<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     with_context(&device, ContextFlags::default(), |b| {
///         one_context(a.share(), b.share()); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct SharedContext<'ctx> {
    raw: NonNull<CUctx_st>,
    /// Invariant in `'ctx`, as the guard's: [`SharedContext::enter`] hands out a guard with
    /// this brand, so a covariant shared context would give one brand to two contexts just
    /// as a covariant guard would.
    _brand: Brand<'ctx>,
}

// A `CUcontext` is a process-wide handle that the driver lets any thread use (by making it
// current there); `SharedContext` only hands out a guard inside `enter`, which pushes and
// pops it. SAFETY: the brand keeps every copy inside the `with_context` closure, so the
// context outlives all of them.
unsafe impl Send for SharedContext<'_> {}
// SAFETY: `SharedContext` has no interior state; `&SharedContext` only allows copying it.
unsafe impl Sync for SharedContext<'_> {}

impl<P: Phase, S: Part> fmt::Debug for ContextGuard<'_, P, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ContextGuard").field(&self.raw.0).finish()
    }
}

impl fmt::Debug for SharedContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SharedContext").field(&self.raw).finish()
    }
}

fn unexpected(call: &'static str, value: i32) -> Error {
    Error::invalid_input(
        call,
        Invalid::argument(format!(
            "the driver returned {value}, a value this crate does not know"
        )),
    )
}

impl<'ctx> ContextGuard<'ctx> {
    /// # Safety
    /// `raw` is a live context that stays alive for all of `'ctx`.
    pub(crate) unsafe fn new_unchecked(raw: NonNull<CUctx_st>) -> Self {
        ContextGuard {
            raw: Handle(raw),
            _brand: PhantomData,
            _thread: PhantomData,
            _phase: PhantomData,
            _part: PhantomData,
        }
    }
}

// The bounds are on the method, so that a phase's guard gets `NoPhases`'s message and a
// partition's `Unpartitioned`'s.
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// A copy of this guard that can be sent to and shared with scoped threads.
    ///
    /// A plain guard's only: [`SharedContext::enter`] hands out a plain guard, which in a
    /// phase of [`with_phases`](crate::with_phases) could allocate in the run phase
    /// ([`NoPhases`]), and a partition's context may be current on
    /// its own thread only ([`Unpartitioned`]).
    pub fn share(self) -> SharedContext<'ctx>
    where
        P: NoPhases,
        S: Unpartitioned,
    {
        SharedContext {
            raw: self.raw.0,
            _brand: PhantomData,
        }
    }
}

impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// The same guard with the markers `Q` and `T` (the crate decides where this is
    /// allowed).
    #[inline(always)]
    pub(crate) fn with_markers<Q: Phase, T: Part>(self) -> ContextGuard<'ctx, Q, T> {
        ContextGuard {
            raw: self.raw,
            _brand: PhantomData,
            _thread: PhantomData,
            _phase: PhantomData,
            _part: PhantomData,
        }
    }

    /// The same guard in phase `Q`, of the same part.
    #[inline(always)]
    pub(crate) fn with_phase<Q: Phase>(self) -> ContextGuard<'ctx, Q, S> {
        self.with_markers()
    }

    /// The plain guard, for the crate's own use inside a method the markers allow. It
    /// forgets the part: never use it to create a stream (a partition's would not be the
    /// partition's) or to hand the guard on to code that may.
    #[inline(always)]
    pub(crate) fn unphased(self) -> ContextGuard<'ctx> {
        self.with_markers()
    }

    /// The handle, never null.
    #[inline]
    pub(crate) fn as_non_null(self) -> NonNull<CUctx_st> {
        self.raw.0
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(self) -> CUcontext {
        self.raw.0.as_ptr()
    }

    /// The driver's handle (`CUcontext`), for calls this crate does not wrap, once every
    /// pending synchronous operation of the crate is done.
    ///
    /// A synchronous write of device memory (a `fill`, a device-to-device copy, an upload of
    /// up to 256 KiB) may still run on the GPU when it returns; the crate orders its own
    /// later users of the memory after it (`docs/design/ordering.md`). Work queued through
    /// the handle (on the context's legacy stream, or a stream made with it) names no
    /// memory the crate can see, so this call waits on the host for every such operation
    /// pending now, of any context (pool memory may have been written on another context's
    /// stream), as [`synchronize`](Self::synchronize) does for them, without waiting for
    /// the context's other work. One atomic load while nothing is pending. Only what is
    /// pending when the call is made: after a later synchronous write, take the handle
    /// again. Where the wait cannot run or fails, the handle is returned all the same, as
    /// [`DeviceSlice::as_device_ptr`](crate::DeviceSlice::as_device_ptr) says.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing the caller must check; `unsafe` marks what it allows
    /// behind the brand's back, which every value branded `'ctx` relies on. The caller
    /// promises, for every use of the handle: the context is not destroyed
    /// (`cuCtxDestroy`), reset (`cuDevicePrimaryCtxReset`) or popped off a thread's stack
    /// where this crate pushed it; the handle is not used after the context's closure has
    /// returned; and work queued in the context through it touches device memory of this
    /// crate only as the crate's scopes would (a buffer read while nothing writes it and
    /// written while nothing else uses it, alive until that work has finished).
    #[inline]
    pub unsafe fn as_raw(self) -> crate::driver::handles::CUcontext {
        // every pending synchronous write, through the synchronous layer's hook (one
        // atomic load while nothing is pending); a failure is a sticky error that every
        // later call in the context reports
        let _ = teardown::wait_for_sync_writes();
        self.raw().cast()
    }

    /// Runs `f` with this context current on the calling thread (see [`in_context`]).
    #[inline]
    pub(crate) fn with_current<T>(self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        // SAFETY: the guard proves the context alive.
        unsafe { in_context(self.raw.0, f) }
    }

    /// Waits for all work of the context to finish (`cuCtxSynchronize`), and for every
    /// synchronous write of the crate still running on the GPU, in any context (a write of
    /// pool memory made while another context of the device was current runs on that
    /// context's sync stream: `docs/design/ordering.md`); reports a sticky error such as an
    /// illegal address from a kernel as `Err`. After it, work queued outside the crate's
    /// scopes finds the crate's synchronous writes complete
    /// ([`DeviceSlice::as_device_ptr`](crate::DeviceSlice::as_device_ptr)).
    pub fn synchronize(self) -> Result<()> {
        self.with_current(|| driver::ctx_synchronize().and(teardown::wait_for_sync_writes()))
    }

    /// The context's API version (`cuCtxGetApiVersion`), e.g. 3020.
    pub fn api_version(self) -> Result<u32> {
        // SAFETY: the guard proves the context is alive.
        unsafe { driver::ctx_api_version(self.raw()) }
    }

    /// The device the context runs on.
    pub fn device(self) -> Result<Device> {
        let raw = self.with_current(driver::ctx_get_device)?;
        device_of(raw)
    }

    /// The flags the context was created with.
    pub fn flags(self) -> Result<ContextFlags> {
        self.with_current(driver::ctx_get_flags)
            .map(ContextFlags::from_bits)
    }

    /// The context's preference between L1 cache and shared memory.
    pub fn cache_config(self) -> Result<CacheConfig> {
        let raw = self.with_current(driver::ctx_get_cache_config)?;
        CacheConfig::from_raw(raw).ok_or_else(|| unexpected("cuCtxGetCacheConfig", raw))
    }

    /// Sets the context's preference between L1 cache and shared memory.
    pub fn set_cache_config(self, config: CacheConfig) -> Result<()> {
        self.with_current(|| driver::ctx_set_cache_config(config.raw()))
    }

    /// The shared memory bank size.
    pub fn shared_memory_config(self) -> Result<SharedMemoryConfig> {
        let raw = self.with_current(driver::ctx_get_shared_mem_config)?;
        SharedMemoryConfig::from_raw(raw).ok_or_else(|| unexpected("cuCtxGetSharedMemConfig", raw))
    }

    /// Sets the shared memory bank size (ignored by devices with a fixed bank size).
    pub fn set_shared_memory_config(self, config: SharedMemoryConfig) -> Result<()> {
        self.with_current(|| driver::ctx_set_shared_mem_config(config.raw()))
    }

    /// A resource limit's current value.
    pub fn limit(self, limit: ResourceLimit) -> Result<usize> {
        self.with_current(|| driver::ctx_get_limit(limit as i32))
    }

    /// The range of stream priorities the context allows.
    pub fn stream_priority_range(self) -> Result<StreamPriorityRange> {
        let (least, greatest) = self.with_current(driver::ctx_stream_priority_range)?;
        Ok(StreamPriorityRange { least, greatest })
    }

    /// Free and total memory of the context's device, in bytes (`cuMemGetInfo`).
    ///
    /// ```no_run
    /// # use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let memory = ctx.memory_info()?;
    ///     assert!(memory.free <= memory.total);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn memory_info(self) -> Result<MemoryInfo> {
        let (free, total) = self.with_current(driver::mem_get_info)?;
        Ok(MemoryInfo { free, total })
    }
}

/// The device memory of a context's device, in bytes ([`ContextGuard::memory_info`],
/// `cuMemGetInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Free for allocation now (by this process and others).
    pub free: usize,
    /// The device's total memory.
    pub total: usize,
}

// The bound is on the method, so that a run-phase guard gets `Allocating`'s message.
impl<P: Phase, S: Part> ContextGuard<'_, P, S> {
    /// Sets a resource limit (the heap and stack limits reserve device memory, so this is
    /// a setup-phase method). The driver may round the value (read it back with
    /// [`ContextGuard::limit`]); a value it cannot honour is an error.
    pub fn set_limit(self, limit: ResourceLimit, value: usize) -> Result<()>
    where
        P: Allocating,
    {
        self.with_current(|| driver::ctx_set_limit(limit as i32, value))
    }
}

fn device_of(raw: CUdevice) -> Result<Device> {
    for ordinal in 0..Device::count()? {
        let device = Device::get(ordinal)?;
        if device.as_raw() == raw {
            return Ok(device);
        }
    }
    Err(Error::with_detail(
        "cuCtxGetDevice",
        ErrorCode::InvalidDevice,
        format!("no device has handle {raw}"),
    ))
}

impl<'ctx> SharedContext<'ctx> {
    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(self) -> CUcontext {
        self.raw.as_ptr()
    }

    /// The driver's handle (`CUcontext`), for calls this crate does not wrap, once every
    /// pending synchronous operation of the crate is done (waited for on the host, as
    /// [`ContextGuard::as_raw`] does).
    ///
    /// # Safety
    ///
    /// As for [`ContextGuard::as_raw`]: the context is not destroyed, reset or popped
    /// where this crate pushed it, the handle is not used after the context's closure has
    /// returned, and work queued through it uses this crate's memory as a scope would.
    #[inline]
    pub unsafe fn as_raw(self) -> crate::driver::handles::CUcontext {
        // every pending synchronous write, through the synchronous layer's hook (one
        // atomic load while nothing is pending); a failure is a sticky error that every
        // later call in the context reports
        let _ = teardown::wait_for_sync_writes();
        self.raw().cast()
    }
}
