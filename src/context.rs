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

use crate::device::Device;
use crate::driver::{self, CUcontext, CUdevice};
use crate::error::{Error, ErrorCode, Result, WithTeardown};
use crate::phase::{Allocating, Phase, Unphased};
use crate::teardown;

/// The invariant brand: `'ctx` can be neither shortened nor lengthened, so two brands are
/// equal only if they are the same lifetime.
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
/// `P` is the guard's [phase](crate::phase): [`Unphased`] for the guard of
/// [`with_context`] (the default), `Setup<'s>` or `Run` for [`with_phases`](crate::with_phases),
/// whose run-phase guard has no allocating, loading or creating method.
#[derive(Clone, Copy)]
pub struct ContextGuard<'ctx, P: Phase = Unphased> {
    raw: Handle,
    _brand: Brand<'ctx>,
    _thread: PhantomData<UseShareToCrossThreads>,
    _phase: PhantomData<P>,
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
#[derive(Clone, Copy)]
pub struct SharedContext<'ctx> {
    raw: NonNull<CUctx_st>,
    _brand: Brand<'ctx>,
}

// A `CUcontext` is a process-wide handle that the driver lets any thread use (by making it
// current there); `SharedContext` only hands out a guard inside `enter`, which pushes and
// pops it. SAFETY: the brand keeps every copy inside the `with_context` closure, so the
// context outlives all of them.
unsafe impl Send for SharedContext<'_> {}
// SAFETY: `SharedContext` has no interior state; `&SharedContext` only allows copying it.
unsafe impl Sync for SharedContext<'_> {}

impl<P: Phase> fmt::Debug for ContextGuard<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ContextGuard").field(&self.raw.0).finish()
    }
}

impl fmt::Debug for SharedContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SharedContext").field(&self.raw).finish()
    }
}

/// How a context's host thread waits for the GPU (the `CU_CTX_SCHED_*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Scheduling {
    /// Let the driver choose (spin when there are fewer active contexts than cores).
    #[default]
    Auto,
    /// Spin while waiting: lowest latency, one busy core.
    Spin,
    /// Yield the thread while waiting.
    Yield,
    /// Block the thread on a synchronization primitive while waiting.
    BlockingSync,
}

/// Flags for a new context (`CUctx_flags`).
///
/// ```
/// use cuda_brand::{ContextFlags, Scheduling};
/// let flags = ContextFlags::new().scheduling(Scheduling::BlockingSync).map_host(true);
/// assert_eq!(flags.bits(), 0x4 | 0x8);
/// assert_eq!(flags.get_scheduling(), Scheduling::BlockingSync);
/// assert!(flags.maps_host() && !flags.keeps_local_memory());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[must_use]
pub struct ContextFlags(u32);

const SCHED_MASK: u32 = 0x07;
const MAP_HOST: u32 = 0x08;
const LMEM_RESIZE_TO_MAX: u32 = 0x10;

impl ContextFlags {
    /// Automatic scheduling, no host mapping, local memory freed after launches.
    pub const fn new() -> Self {
        ContextFlags(0)
    }

    /// Flags from the driver's bit pattern, unknown bits kept.
    pub const fn from_bits(bits: u32) -> Self {
        ContextFlags(bits)
    }

    /// The driver's bit pattern.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Sets how the host thread waits (`CU_CTX_SCHED_*`).
    pub const fn scheduling(self, s: Scheduling) -> Self {
        let bits = match s {
            Scheduling::Auto => 0,
            Scheduling::Spin => 1,
            Scheduling::Yield => 2,
            Scheduling::BlockingSync => 4,
        };
        ContextFlags((self.0 & !SCHED_MASK) | bits)
    }

    /// The scheduling policy (an unknown pattern reads as [`Scheduling::Auto`]).
    pub const fn get_scheduling(self) -> Scheduling {
        match self.0 & SCHED_MASK {
            1 => Scheduling::Spin,
            2 => Scheduling::Yield,
            4 => Scheduling::BlockingSync,
            _ => Scheduling::Auto,
        }
    }

    /// Allows mapped page-locked host memory (`CU_CTX_MAP_HOST`; always on with unified
    /// addressing).
    pub const fn map_host(self, on: bool) -> Self {
        ContextFlags(if on {
            self.0 | MAP_HOST
        } else {
            self.0 & !MAP_HOST
        })
    }

    /// Whether `CU_CTX_MAP_HOST` is set.
    pub const fn maps_host(self) -> bool {
        self.0 & MAP_HOST != 0
    }

    /// Keeps local memory at its high-water mark after launches
    /// (`CU_CTX_LMEM_RESIZE_TO_MAX`).
    pub const fn keep_local_memory(self, on: bool) -> Self {
        ContextFlags(if on {
            self.0 | LMEM_RESIZE_TO_MAX
        } else {
            self.0 & !LMEM_RESIZE_TO_MAX
        })
    }

    /// Whether `CU_CTX_LMEM_RESIZE_TO_MAX` is set.
    pub const fn keeps_local_memory(self) -> bool {
        self.0 & LMEM_RESIZE_TO_MAX != 0
    }
}

impl fmt::Debug for ContextFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextFlags")
            .field("scheduling", &self.get_scheduling())
            .field("map_host", &self.maps_host())
            .field("keep_local_memory", &self.keeps_local_memory())
            .field("bits", &format_args!("{:#x}", self.0))
            .finish()
    }
}

/// Preference between L1 cache and shared memory (`CUfunc_cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CacheConfig {
    /// No preference.
    #[default]
    PreferNone,
    /// Prefer a larger shared memory.
    PreferShared,
    /// Prefer a larger L1 cache.
    PreferL1,
    /// Equal L1 cache and shared memory.
    PreferEqual,
}

impl CacheConfig {
    /// The raw `CUfunc_cache` value.
    pub const fn raw(self) -> i32 {
        self as i32
    }

    /// The value for a raw `CUfunc_cache`, if it is one.
    pub const fn from_raw(raw: i32) -> Option<Self> {
        match raw {
            0 => Some(CacheConfig::PreferNone),
            1 => Some(CacheConfig::PreferShared),
            2 => Some(CacheConfig::PreferL1),
            3 => Some(CacheConfig::PreferEqual),
            _ => None,
        }
    }
}

/// Shared memory bank size (`CUsharedconfig`). Devices since Maxwell have a fixed bank size:
/// the driver accepts the setter there and the getter keeps reporting the fixed size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SharedMemoryConfig {
    /// The device's default bank size.
    #[default]
    DefaultBankSize,
    /// Four-byte banks.
    FourByteBankSize,
    /// Eight-byte banks.
    EightByteBankSize,
}

impl SharedMemoryConfig {
    /// The raw `CUsharedconfig` value.
    pub const fn raw(self) -> i32 {
        self as i32
    }

    /// The value for a raw `CUsharedconfig`, if it is one.
    pub const fn from_raw(raw: i32) -> Option<Self> {
        match raw {
            0 => Some(SharedMemoryConfig::DefaultBankSize),
            1 => Some(SharedMemoryConfig::FourByteBankSize),
            2 => Some(SharedMemoryConfig::EightByteBankSize),
            _ => None,
        }
    }
}

/// A context resource limit (`CUlimit`), for [`ContextGuard::limit`] and
/// [`ContextGuard::set_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceLimit {
    /// Stack size in bytes of each GPU thread.
    StackSize = 0,
    /// Size in bytes of the FIFO used by device-side `printf`.
    PrintfFifoSize = 1,
    /// Size in bytes of the heap used by device-side `malloc`.
    MallocHeapSize = 2,
    /// Maximum grid depth at which a thread can synchronize with its children.
    DevRuntimeSyncDepth = 3,
    /// Maximum number of outstanding device-runtime launches.
    DevRuntimePendingLaunchCount = 4,
    /// L2 cache fetch granularity in bytes (a hint).
    MaxL2FetchGranularity = 5,
    /// Persisting L2 cache size in bytes.
    PersistingL2CacheSize = 6,
}

/// The range of stream priorities a context allows (`cuCtxGetStreamPriorityRange`).
/// Lower numbers are higher priorities: `greatest <= least`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamPriorityRange {
    /// The lowest priority (the default for new streams), usually 0.
    pub least: i32,
    /// The highest priority, e.g. -5 on an H100.
    pub greatest: i32,
}

impl StreamPriorityRange {
    /// Whether `priority` lies within the range.
    pub const fn contains(&self, priority: i32) -> bool {
        self.greatest <= priority && priority <= self.least
    }
}

fn unexpected(call: &'static str, value: i32) -> Error {
    Error::with_detail(
        call,
        ErrorCode::InvalidValue,
        format!("the driver returned {value}, a value this crate does not know"),
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
        }
    }

    /// A copy of this guard that can be sent to and shared with scoped threads.
    pub fn share(self) -> SharedContext<'ctx> {
        SharedContext {
            raw: self.raw.0,
            _brand: PhantomData,
        }
    }
}

impl<'ctx, P: Phase> ContextGuard<'ctx, P> {
    /// The same guard in phase `Q` (the crate decides where this is allowed).
    #[inline(always)]
    pub(crate) fn with_phase<Q: Phase>(self) -> ContextGuard<'ctx, Q> {
        ContextGuard {
            raw: self.raw,
            _brand: PhantomData,
            _thread: PhantomData,
            _phase: PhantomData,
        }
    }

    /// The plain guard, for the crate's own use inside a method the phase allows.
    #[inline(always)]
    pub(crate) fn unphased(self) -> ContextGuard<'ctx> {
        self.with_phase()
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

    /// The driver's handle (`CUcontext`), for calls this crate does not wrap.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the brand's
    /// back, which every value branded `'ctx` relies on. The caller promises, for every
    /// use of the handle: the context is not destroyed (`cuCtxDestroy`), reset
    /// (`cuDevicePrimaryCtxReset`) or popped off a thread's stack where this crate pushed
    /// it; the handle is not used after the context's closure has returned; and work
    /// queued in the context through it touches device memory of this crate only as the
    /// crate's scopes would (a buffer read while nothing writes it and written while
    /// nothing else uses it, alive until that work has finished).
    #[inline]
    pub unsafe fn as_raw(self) -> CUcontext {
        self.raw()
    }

    /// Runs `f` with this context current on the calling thread (see [`in_context`]).
    #[inline]
    pub(crate) fn with_current<T>(self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        // SAFETY: the guard proves the context alive.
        unsafe { in_context(self.raw.0, f) }
    }

    /// Waits for all work of the context to finish (`cuCtxSynchronize`); reports a sticky
    /// error such as an illegal address from a kernel as `Err`.
    pub fn synchronize(self) -> Result<()> {
        self.with_current(driver::ctx_synchronize)
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
}

// The bound is on the method, so that a run-phase guard gets `Allocating`'s message.
impl<P: Phase> ContextGuard<'_, P> {
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
    // SAFETY: the caller guarantees the context; it is popped again below (or by the
    // guard while a panic of `op` unwinds).
    unsafe { driver::ctx_push(raw) }?;
    struct PopOnUnwind(CUcontext);
    impl Drop for PopOnUnwind {
        fn drop(&mut self) {
            let _ = pop_exact(self.0);
        }
    }
    let on_unwind = PopOnUnwind(raw);
    let result = op();
    std::mem::forget(on_unwind);
    let popped = pop_exact(raw);
    teardown::keep_both(result, popped)
}

/// Runs `body`, then `teardown`, also while a panic of `body` unwinds (then in a drop
/// guard, after `body`'s frame, and so every borrow it held, is gone; its error is dropped
/// and the panic resumes). `teardown` is `Copy` (it captures handles and references only),
/// so the guard needs no flag: it is forgotten on the normal path. The closure's error
/// comes first: a teardown error becomes `E::from(error)` when `body` returned `Ok`, and
/// is attached to the closure's error when that is an [`Error`] (see
/// [`teardown::combine`]). The guard is local, so no user code can `mem::forget` it. Used
/// by every closure-scoped entry point: contexts, shared contexts and stream scopes.
#[inline(always)]
pub(crate) fn run_then<R, E: From<Error>, T>(
    body: impl FnOnce() -> Result<R, E>,
    teardown: T,
) -> Result<R, E>
where
    T: FnOnce() -> Result<()> + Copy,
{
    struct OnUnwind<T: FnOnce() -> Result<()> + Copy>(T);
    impl<T: FnOnce() -> Result<()> + Copy> Drop for OnUnwind<T> {
        fn drop(&mut self) {
            let _ = (self.0)();
        }
    }
    let on_unwind = OnUnwind(teardown);
    let outcome = body();
    std::mem::forget(on_unwind);
    let torn_down = teardown();
    teardown::combine(outcome, torn_down)
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
    /// Makes the context current on the calling thread, runs `f` with a guard of the same
    /// brand, and restores what was current before, also when `f` panics.
    ///
    /// ```no_run
    /// use cuda_brand::{with_context, ContextFlags, Device};
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let shared = ctx.share();
    ///     std::thread::scope(|s| {
    ///         let workers: Vec<_> = (0..4)
    ///             .map(|_| s.spawn(move || shared.enter(|ctx| ctx.api_version())))
    ///             .collect();
    ///         for w in workers {
    ///             assert!(w.join().unwrap()? > 0);
    ///         }
    ///         Ok(())
    ///     })
    /// })
    /// # }
    /// ```
    pub fn enter<R, E>(self, f: impl FnOnce(ContextGuard<'ctx>) -> Result<R, E>) -> Result<R, E>
    where
        E: From<Error>,
    {
        // SAFETY: the brand keeps `self` inside the `with_context` closure, so the context is
        // alive; `run_scoped` pops it again on every exit path.
        unsafe { driver::ctx_push(self.raw.as_ptr()) }?;
        // SAFETY: as above, the context outlives `'ctx`.
        let guard = unsafe { ContextGuard::new_unchecked(self.raw) };
        run_scoped(guard, Teardown::Pop, f)
    }

    /// [`enter`](SharedContext::enter) for any error type, returning the closure's error
    /// and the teardown's together when both fail (see [`WithTeardown`]).
    ///
    /// ```no_run
    /// use cuda_brand::{with_context, ContextFlags, Device};
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let shared = ctx.share();
    ///     let worker = std::thread::scope(|s| {
    ///         s.spawn(move || shared.try_enter(|ctx| Ok::<_, anyhow::Error>(ctx.api_version()?)))
    ///             .join()
    ///             .unwrap()
    ///     });
    ///     if let Err(failed) = worker {
    ///         eprintln!("{failed}"); // the closure's error, then the teardown's if it failed too
    ///     }
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn try_enter<R, E>(
        self,
        f: impl FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    ) -> Result<R, WithTeardown<E>>
    where
        E: From<Error>,
    {
        let mut outcome = None;
        let torn_down = self.enter(|ctx| {
            outcome = Some(f(ctx));
            Ok(())
        });
        WithTeardown::settle("SharedContext::try_enter", outcome, torn_down)
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(self) -> CUcontext {
        self.raw.as_ptr()
    }

    /// The driver's handle (`CUcontext`), for calls this crate does not wrap.
    ///
    /// # Safety
    ///
    /// As for [`ContextGuard::as_raw`]: the context is not destroyed, reset or popped
    /// where this crate pushed it, the handle is not used after the context's closure has
    /// returned, and work queued through it uses this crate's memory as a scope would.
    #[inline]
    pub unsafe fn as_raw(self) -> CUcontext {
        self.raw()
    }
}

/// What to do with a context that the calling thread has on top of its stack once the
/// closure is done.
#[derive(Clone, Copy)]
enum Teardown {
    /// Only pop (a context another closure owns, whose teardown reports the failed
    /// releases of handles dropped meanwhile).
    Pop,
    /// Free what the crate keeps for the context (its bulk-copy staging), pop, and report
    /// the failed releases of the context's handles: a context someone else owns, who may
    /// destroy it once the crate's scope is over (`with_raw_context`).
    PopAndReport,
    /// Synchronize, pop, then give the context up (one the crate created or retained), and
    /// report the failed releases of its handles.
    Finish(Owned),
}

/// How a context the crate holds is given up.
#[derive(Clone, Copy)]
enum Owned {
    /// Destroy it (a context `with_context` created).
    Destroy,
    /// Release the primary context of this device.
    Release(CUdevice),
}

/// Calls `f` with `guard`, whose context the calling thread has on top of its stack, then
/// tears down as `teardown` says on every exit path (see [`run_then`]).
#[inline(always)]
fn run_scoped<'ctx, R, E>(
    guard: ContextGuard<'ctx>,
    teardown: Teardown,
    f: impl FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
) -> Result<R, E>
where
    E: From<Error>,
{
    run_then(|| f(guard), || tear_down(guard.raw(), teardown))
}

/// Pops `raw` off the calling thread's stack. The crate keeps the stack balanced, so `raw`
/// is on top; if unsafe code broke that, the pop took someone else's context: it is put back
/// and the mistake reported. (Checking after the pop costs one compare on the normal path,
/// unlike a `cuCtxGetCurrent` before it.)
#[inline(always)]
fn pop_exact(raw: CUcontext) -> Result<()> {
    match driver::ctx_pop() {
        Ok(top) if top == raw => Ok(()),
        Ok(other) => Err(put_back(other)),
        Err(e) => Err(e),
    }
}

#[cold]
#[inline(never)]
fn put_back(other: CUcontext) -> Error {
    // SAFETY: `other` was current on this thread a moment ago, so it is alive.
    let pushed = unsafe { driver::ctx_push(other) };
    let e = Error::with_detail(
        "cuCtxPopCurrent_v2",
        ErrorCode::InvalidContext,
        "the context is not on top of this thread's stack: unsafe code changed the current context and did not restore it",
    );
    match pushed {
        Ok(()) => e,
        Err(failed) => e.with_teardown_error(failed),
    }
}

/// Tears a context down as `teardown` says. A plain pop (entering a shared or raw context,
/// the hot case) is inlined at the call site; the full teardown is a call.
#[inline(always)]
fn tear_down(raw: CUcontext, teardown: Teardown) -> Result<()> {
    match teardown {
        Teardown::Pop => pop_exact(raw),
        Teardown::PopAndReport => {
            // SAFETY: `raw` is alive and on top of this thread's stack (current).
            unsafe { crate::staging::on_context_end(raw) };
            teardown::keep_both(pop_exact(raw), teardown::take_failed_releases(raw))
        }
        Teardown::Finish(owned) => tear_down_fully(raw, owned),
    }
}

/// Synchronizes, pops and destroys or releases, then takes the failed releases of the
/// context's handles ([`teardown::take_failed_releases`]); every step runs whatever failed
/// before, and every error is kept: the first is returned, the others chained on it as
/// its [`teardown_errors`](Error::teardown_errors), in the order they happened. If the pop
/// finds another context on top of the stack (unsafe code changed the stack and did not
/// restore it), the context is neither destroyed nor released: it is still somewhere on
/// this thread's stack, and destroying it would leave a dangling entry there. It is leaked,
/// and the error says so.
#[inline(never)]
fn tear_down_fully(raw: CUcontext, owned: Owned) -> Result<()> {
    let synced = driver::ctx_synchronize();
    // The bulk-copy staging is page-locked for this context: unregistered and freed while
    // the context is current, before it is destroyed or released. A primary context may
    // live on after the release (a nested or another thread's `with_primary_context`
    // holds it), but the crate cannot tell which release destroys it, and memory left
    // registered with a destroyed context leaks its registration (compute-sanitizer's
    // leak check found it): the next staged copy pins a staging again.
    // SAFETY: `raw` is alive and on top of this thread's stack (current).
    unsafe { crate::staging::on_context_end(raw) };
    let released = match pop_exact(raw) {
        Err(e) => Err(Error::with_detail(
            e.call(),
            e.code(),
            format!(
                "{}; the context was left alive (not destroyed or released) because it is still on this thread's stack",
                e.detail().unwrap_or("the context could not be popped")
            ),
        )),
        Ok(()) => match owned {
            // SAFETY: every value branded with this context is gone (the brand cannot leave
            // the closure), this is the context `with_context` created, and it is off the
            // stack.
            Owned::Destroy => unsafe { driver::ctx_destroy(raw) },
            Owned::Release(device) => {
                // SAFETY: balances the retain in `with_primary_context`; nothing branded
                // remains.
                let released = unsafe { driver::primary_ctx_release(device) };
                // frees the staging if the release destroyed the context
                crate::staging::after_primary_release(raw, device);
                released
            }
        },
    };
    let finished = teardown::keep_both(synced, released);
    teardown::keep_both(finished, teardown::take_failed_releases(raw))
}

/// Creates a context on `device`, runs `f` with its guard, and destroys the context.
///
/// The context is current on the calling thread for the whole closure (and whatever was
/// current before is current again afterwards). At the end, in this order: the context is
/// synchronized (a sticky error such as an illegal address from a kernel comes back as
/// `Err`), popped, and destroyed. If `f` panics, the context is torn down and the panic
/// resumes.
///
/// # Errors never lost
///
/// An error of the teardown becomes `E::from(error)` when `f` returned `Ok`. When `f`
/// returned an `Err` of this crate's [`Error`] and the teardown failed too, the teardown's
/// error is attached to it ([`Error::teardown_error`]); for other error types,
/// [`try_with_context`] returns both. Every step of the teardown runs whatever failed
/// before, and its errors are chained in order. Handles of the context whose release failed
/// when they were dropped (after a sticky error every free fails) are reported last: one
/// error naming the first failure and how many there were (`close()` on a handle returns
/// the error where it happens instead).
///
/// The closure must work for any lifetime `'ctx`, so nothing carrying the brand can leave
/// it (see the [module documentation](crate::context)).
///
/// # Inferring the error type
///
/// `E` is whatever the closure's `Err` is, converted from this crate's [`Error`] by `?`.
/// When the call is the function's result, the function's return type decides it:
///
/// ```no_run
/// use cuda_brand::{with_context, ContextFlags, Device};
///
/// fn api_version(device: &Device) -> cuda_brand::Result<u32> {
///     with_context(device, ContextFlags::default(), |ctx| {
///         ctx.synchronize()?;
///         Ok(ctx.api_version()?)
///     })
/// }
///
/// fn with_anyhow(device: &Device) -> anyhow::Result<u32> {
///     // any error type with `From<cuda_brand::Error>` works
///     with_context(device, ContextFlags::default(), |ctx| {
///         anyhow::ensure!(ctx.api_version()? >= 3020, "an old context API");
///         Ok(ctx.api_version()?)
///     })
/// }
///
/// fn with_box_dyn(device: &Device) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
///     with_context(device, ContextFlags::default(), |ctx| Ok(ctx.api_version()?))
/// }
/// ```
///
/// Where nothing decides it (the result is itself used with `?`), name it once with
/// `Ok::<_, cuda_brand::Error>(...)` or through a typed binding:
///
/// ```no_run
/// # use cuda_brand::{with_context, ContextFlags, Device};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let device = Device::get(0)?;
/// let version = with_context(&device, ContextFlags::default(), |ctx| {
///     Ok::<_, cuda_brand::Error>(ctx.api_version()?)
/// })?;
/// # Ok(()) }
/// ```
pub fn with_context<R, E, F>(device: &Device, flags: ContextFlags, f: F) -> Result<R, E>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    // cuCtxCreate pushes the new context on the calling thread's stack.
    let raw = driver::ctx_create(flags.bits(), device.as_raw())?;
    let raw = driver::non_null("cuCtxCreate_v2", raw)?;
    // SAFETY: the context was just created and is destroyed only after `f` returns.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    run_scoped(guard, Teardown::Finish(Owned::Destroy), f)
}

/// [`with_context`] whose teardown first runs `extra` with the context current (after `f`,
/// also on a panic), then synchronizes, pops and destroys it. Returns the first error.
///
/// # Safety
/// `extra` must be sound to run once every value branded with the context is gone.
pub(crate) unsafe fn with_context_then<R, E, F>(
    device: &Device,
    flags: ContextFlags,
    f: F,
    extra: fn(CUcontext) -> Result<()>,
) -> Result<R, E>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    let raw = driver::ctx_create(flags.bits(), device.as_raw())?;
    let raw = driver::non_null("cuCtxCreate_v2", raw)?;
    // SAFETY: the context was just created and is destroyed only after `f` returns.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    let raw = raw.as_ptr();
    run_then(
        || f(guard),
        || extra(raw).and(tear_down(raw, Teardown::Finish(Owned::Destroy))),
    )
}

/// Like [`with_context`], over the device's primary context: retains it (creating it on
/// first use, with the flags of [`Device::set_primary_context_flags`]), makes it current
/// for `f`, then synchronizes, pops and releases it.
///
/// The primary context is the one the CUDA runtime API uses, so this is the way to share a
/// context with libraries built on the runtime. Retaining it while it is already held is
/// cheap (0.05 µs for a retain and release while it is held, against 92 ms to create a
/// context and 52 ms to destroy it, measured on an H100: `docs/driver-facts.md`).
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// // the runtime API's context: libraries built on it see the same allocations
/// let free = with_primary_context(&device, |ctx| Ok::<_, cuda_brand::Error>(ctx.memory_info()?.0))?;
/// println!("{free} bytes free");
/// # Ok(()) }
/// ```
pub fn with_primary_context<R, E, F>(device: &Device, f: F) -> Result<R, E>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    let raw = driver::primary_ctx_retain(device.as_raw())?;
    let raw = driver::non_null("cuDevicePrimaryCtxRetain", raw)?;
    // SAFETY: just retained; the release comes after the pop below or in `run_scoped`.
    if let Err(e) = unsafe { driver::ctx_push(raw.as_ptr()) } {
        // SAFETY: balances the retain above; nothing used the context.
        let released = unsafe { driver::primary_ctx_release(device.as_raw()) };
        return Err(match released {
            Ok(()) => e,
            Err(failed) => e.with_teardown_error(failed),
        }
        .into());
    }
    // SAFETY: the retain keeps the context alive until `run_scoped` releases it after `f`.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    run_scoped(guard, Teardown::Finish(Owned::Release(device.as_raw())), f)
}

/// [`with_context`] for any error type: returns the closure's error and the teardown's
/// together when both fail, in a [`WithTeardown`]. (The plain [`with_context`] keeps both
/// only when the closure's error type is [`Error`]: it cannot attach an error to a value
/// of a type it does not know.)
///
/// ```no_run
/// use cuda_brand::{try_with_context, ContextFlags, Device};
///
/// fn run(device: &Device) -> anyhow::Result<u32> {
///     let version = try_with_context(device, ContextFlags::default(), |ctx| {
///         anyhow::ensure!(ctx.api_version()? >= 3020, "an old context API");
///         Ok(ctx.api_version()?)
///     });
///     version.map_err(|failed| match failed.teardown_error() {
///         // the context's teardown failed as well: say so
///         Some(teardown) => anyhow::anyhow!("{teardown}").context(failed.into_error()),
///         None => failed.into_error(),
///     })
/// }
/// ```
pub fn try_with_context<R, E, F>(
    device: &Device,
    flags: ContextFlags,
    f: F,
) -> Result<R, WithTeardown<E>>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    let mut outcome = None;
    let torn_down = with_context(device, flags, |ctx| {
        outcome = Some(f(ctx));
        Ok(())
    });
    WithTeardown::settle("try_with_context", outcome, torn_down)
}

/// [`with_primary_context`] for any error type: returns the closure's error and the
/// teardown's together when both fail, in a [`WithTeardown`].
///
/// ```no_run
/// use cuda_brand::{try_with_primary_context, Device};
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// let free = try_with_primary_context(&device, |ctx| {
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(ctx.memory_info()?.0)
/// });
/// match free {
///     Ok(free) => println!("{free} bytes free"),
///     Err(failed) => eprintln!("{failed}"), // both errors, when both failed
/// }
/// # Ok(()) }
/// ```
pub fn try_with_primary_context<R, E, F>(device: &Device, f: F) -> Result<R, WithTeardown<E>>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    let mut outcome = None;
    let torn_down = with_primary_context(device, |ctx| {
        outcome = Some(f(ctx));
        Ok(())
    });
    WithTeardown::settle("try_with_primary_context", outcome, torn_down)
}

/// Brands a context created elsewhere (by the runtime API, another library, raw driver
/// calls) for the length of `f`: pushes it, runs `f` with a guard, and pops it. The context
/// is neither synchronized nor destroyed. Handles of the context whose release failed when
/// they were dropped are reported by the pop, as by the teardown of [`with_context`] (no
/// other teardown of the crate would report them).
///
/// # Safety
///
/// `raw` must be a live context that nothing destroys, resets or pops while `f` runs, so
/// that it outlives every value branded inside `f`.
pub unsafe fn with_raw_context<R, E, F>(raw: CUcontext, f: F) -> Result<R, E>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    let Some(raw) = NonNull::new(raw) else {
        return Err(Error::with_detail(
            "with_raw_context",
            ErrorCode::InvalidContext,
            "the context handle is null",
        )
        .into());
    };
    // SAFETY: the caller promises the context is alive; it is popped after `f`.
    unsafe { driver::ctx_push(raw.as_ptr()) }?;
    // SAFETY: the caller promises the context outlives `f`, so it outlives `'ctx`.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    run_scoped(guard, Teardown::PopAndReport, f)
}
