//! The owning layer's handles: [`OwnedContext`], a counted, `'static` handle to a context,
//! and entering it; and [`Owned<B>`], a branded value made `'static`, which remembers its
//! context and is bound again to a guard of it. The two are one concept (each names the
//! other: an owned value holds its context, and the context makes the owned values), so
//! they share this file.

use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cuda_driver_sys::CUctx_st;

use super::release;
use crate::context::{self, ContextFlags, ContextGuard, Device, Held};
use crate::driver;
use crate::error::{Error, Invalid, Result};
use crate::memory::{DeviceBuffer, DeviceCopy, ManagedBuffer, MemoryPool, PinnedBuffer};
use crate::module::Module;
use crate::span::Touched;
use crate::stream::{Event, EventKind, Stream};
use crate::synchronous;

pub(crate) mod sealed {
    /// A branded type with its brand set to `'static` (`Self`), and the same type at any
    /// brand (`At<'ctx>`). Only the crate's types are `Rebrand`: the owning layer moves a
    /// value between brands by a pointer cast, which is sound only for types whose brand is
    /// a lifetime parameter and nothing else (same layout, and the value's meaning does not
    /// depend on which lifetime it carries).
    #[diagnostic::on_unimplemented(
        message = "`{Self}` has no owned form",
        note = "owned forms exist for device, pinned and managed buffers, memory pools, streams, events, modules, and the cuBLAS, cuFFT and cuRAND handles (and kernels: `OwnedKernel`)",
        note = "see the guide, chapter 11 (`cuda_brand::guide`)"
    )]
    pub trait Rebrand: Send + Sized + 'static {
        /// The type at the brand `'ctx`.
        type At<'ctx>;

        /// The value at the brand `'ctx`.
        ///
        /// # Safety
        /// The value is of the context branded `'ctx`, alive for `'ctx`.
        #[inline(always)]
        unsafe fn at<'ctx>(&self) -> &Self::At<'ctx> {
            // SAFETY: `Self` and `At<'ctx>` differ in a lifetime only (the trait's
            // promise), so have one layout; the caller's promise makes the brand true.
            unsafe { &*(self as *const Self).cast::<Self::At<'ctx>>() }
        }

        /// As [`at`](Rebrand::at), exclusively.
        ///
        /// # Safety
        /// As for [`at`](Rebrand::at).
        #[inline(always)]
        unsafe fn at_mut<'ctx>(&mut self) -> &mut Self::At<'ctx> {
            // SAFETY: as in `at`.
            unsafe { &mut *(self as *mut Self).cast::<Self::At<'ctx>>() }
        }

        /// The value moved to the brand `'ctx`.
        ///
        /// # Safety
        /// As for [`at`](Rebrand::at).
        #[inline(always)]
        unsafe fn into_at<'ctx>(self) -> Self::At<'ctx> {
            let this = std::mem::ManuallyDrop::new(self);
            // SAFETY: as in `at`; `this` is not dropped, so the value moves exactly once.
            unsafe { std::ptr::read((&*this as *const Self).cast::<Self::At<'ctx>>()) }
        }

        /// A value of brand `'ctx` moved to `'static`, for an owned handle to keep.
        ///
        /// # Safety
        /// The value is only ever used again through [`at`](Rebrand::at),
        /// [`at_mut`](Rebrand::at_mut) or [`into_at`](Rebrand::into_at) with a brand of
        /// its own context, or dropped while its context is alive.
        #[inline(always)]
        unsafe fn from_at(value: Self::At<'_>) -> Self {
            let value = std::mem::ManuallyDrop::new(value);
            // SAFETY: as in `at`; `value` is not dropped, so it moves exactly once.
            unsafe { std::ptr::read((&*value as *const Self::At<'_>).cast::<Self>()) }
        }

        /// Whether the value is memory of a setup phase (freed by its phase's teardown).
        fn of_setup_phase(_value: &Self::At<'_>) -> bool {
            false
        }
    }

    /// A branded value that [`OwnedContext::unbind`](super::OwnedContext::unbind) takes
    /// over: `Static` is its owned form.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` has no owned form",
        note = "owned forms exist for device, pinned and managed buffers, memory pools, streams, events, modules, and the cuBLAS, cuFFT and cuRAND handles (and kernels: `OwnedKernel`)",
        note = "see the guide, chapter 11 (`cuda_brand::guide`)"
    )]
    pub trait Unbind<'ctx>: Sized {
        /// The owned form's type parameter (`DeviceBuffer<'static, T>` for a buffer).
        type Static: Rebrand<At<'ctx> = Self>;

        /// Whether the value is memory of a setup phase.
        fn of_setup_phase(&self) -> bool {
            <Self::Static as Rebrand>::of_setup_phase(self)
        }
    }
}

use sealed::{Rebrand, Unbind};

macro_rules! rebrand {
    ($(#[$doc:meta])* [$($gen:tt)*] $static:ty => $at:ty $(, setup: $setup:expr)?) => {
        impl<$($gen)*> Rebrand for $static {
            type At<'ctx> = $at;
            $(
                fn of_setup_phase(value: &Self::At<'_>) -> bool {
                    ($setup)(value)
                }
            )?
        }
        impl<'ctx, $($gen)*> sealed::Unbind<'ctx> for $at {
            type Static = $static;
        }
    };
}

rebrand!([T: DeviceCopy + Send + Sync] DeviceBuffer<'static, T> => DeviceBuffer<'ctx, T>,
    setup: |b: &DeviceBuffer<'_, T>| b.of_setup_phase());
rebrand!([T: DeviceCopy + Send + Sync] PinnedBuffer<'static, T> => PinnedBuffer<'ctx, T>,
    setup: |b: &PinnedBuffer<'_, T>| b.of_setup_phase());
rebrand!([T: DeviceCopy + Send + Sync] ManagedBuffer<'static, T> => ManagedBuffer<'ctx, T>,
    setup: |b: &ManagedBuffer<'_, T>| b.of_setup_phase());
rebrand!([] MemoryPool<'static> => MemoryPool<'ctx>);
rebrand!([] Stream<'static> => Stream<'ctx>);
rebrand!([K: EventKind] Event<'static, K> => Event<'ctx, K>);
rebrand!([] Module<'static> => Module<'ctx>);
#[cfg(feature = "cublas")]
rebrand!([] crate::cublas::Blas<'static> => crate::cublas::Blas<'ctx>);
#[cfg(feature = "cufft")]
rebrand!([I: 'static, O: 'static] crate::cufft::FftPlan<'static, I, O> => crate::cufft::FftPlan<'ctx, I, O>);
#[cfg(feature = "curand")]
rebrand!([] crate::curand::Rng<'static> => crate::curand::Rng<'ctx>);

/// A branded value made `'static`: `Send + Sync` (where the value is), storable in a
/// `static`, a struct an event loop owns, a task, a server's state. It remembers its
/// context and keeps it alive; dropped on any thread, it frees in that context. See the
/// [`owned` module](crate::owned).
///
/// Made by [`OwnedContext::unbind`]; used by binding it to a guard of its context
/// ([`bind`](Owned::bind), [`bind_mut`](Owned::bind_mut), [`into_bound`](Owned::into_bound)),
/// which checks that the guard is of the handle's context (one compare) and gives today's
/// branded type, on which every rule of the crate holds again. The `B` of a handle is the
/// branded type at the brand `'static` (`DeviceBuffer<'static, f32>`), never a value of its
/// own: use the aliases ([`OwnedDeviceBuffer<T>`] and the others).
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};
///
/// /// State an event loop owns between frames.
/// struct Renderer {
///     home: OwnedContext,
///     frame: OwnedDeviceBuffer<u32>,
/// }
///
/// impl Renderer {
///     fn draw(&mut self, value: u32) -> cuda_brand::Result<Vec<u32>> {
///         let Renderer { home, frame } = self;
///         home.enter(|ctx| {
///             let frame = frame.bind_mut(ctx)?; // `&mut DeviceBuffer<'ctx, u32>`
///             frame.fill(value)?;
///             frame.to_vec()
///         })
///     }
/// }
/// # fn main() -> cuda_brand::Result<()> {
/// let home = OwnedContext::primary(&Device::get(0)?)?;
/// let frame = home.enter(|ctx| {
///     let frame = ctx.zeroed::<u32>(64)?;
///     Ok::<_, cuda_brand::Error>(home.unbind(ctx, frame)?)
/// })?;
/// let mut renderer = Renderer { home, frame };
/// assert_eq!(renderer.draw(7)?, vec![7; 64]);
/// # Ok(()) }
/// ```
///
/// # The brand
///
/// The handle has no brand; a bound view has its guard's, and cannot outlive the guard's
/// closure (nor be stored where the handle can):
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};
///
/// fn keep(home: &OwnedContext, buf: &OwnedDeviceBuffer<u32>) -> cuda_brand::Result<()> {
///     let mut kept = None;
///     home.enter(|ctx| {
///         kept = Some(buf.bind(ctx)?); // the view cannot leave the closure
///         Ok::<_, cuda_brand::Error>(())
///     })?;
///     Ok(())
/// }
/// # fn main() {}
/// ```
pub struct Owned<B: Rebrand> {
    /// Dropped before `home`: the value frees in its context, which `home` keeps alive.
    value: ManuallyDrop<B>,
    home: OwnedContext,
}

/// A device buffer that outlives closures: [`Owned`] of a [`DeviceBuffer`].
pub type OwnedDeviceBuffer<T> = Owned<DeviceBuffer<'static, T>>;
/// Page-locked host memory that outlives closures: [`Owned`] of a [`PinnedBuffer`].
pub type OwnedPinnedBuffer<T> = Owned<PinnedBuffer<'static, T>>;
/// Managed memory that outlives closures: [`Owned`] of a [`ManagedBuffer`].
pub type OwnedManagedBuffer<T> = Owned<ManagedBuffer<'static, T>>;
/// A memory pool that outlives closures: [`Owned`] of a [`MemoryPool`].
pub type OwnedMemoryPool = Owned<MemoryPool<'static>>;
/// A stream that outlives closures: [`Owned`] of a [`Stream`]. Asynchronous work on it is
/// awaited with [`submit`](Owned::submit).
pub type OwnedStream = Owned<Stream<'static>>;
/// An event that outlives closures: [`Owned`] of an [`Event`].
pub type OwnedEvent<K = crate::stream::Timing> = Owned<Event<'static, K>>;
/// A module that outlives closures: [`Owned`] of a [`Module`]. Its kernels:
/// [`OwnedKernel`](crate::owned::OwnedKernel).
pub type OwnedModule = Owned<Module<'static>>;
/// A cuBLAS handle that outlives closures (feature `cublas`): [`Owned`] of a
/// [`Blas`](crate::cublas::Blas). `Send`, not `Sync`, as the handle.
#[cfg(feature = "cublas")]
pub type OwnedBlas = Owned<crate::cublas::Blas<'static>>;
/// A cuFFT plan that outlives closures (feature `cufft`): [`Owned`] of an
/// [`FftPlan`](crate::cufft::FftPlan). `Send`, not `Sync`, as the plan.
#[cfg(feature = "cufft")]
pub type OwnedFftPlan<I, O> = Owned<crate::cufft::FftPlan<'static, I, O>>;
/// A cuRAND generator that outlives closures (feature `curand`): [`Owned`] of an
/// [`Rng`](crate::curand::Rng). `Send`, not `Sync`, as the generator.
#[cfg(feature = "curand")]
pub type OwnedRng = Owned<crate::curand::Rng<'static>>;

impl<B: Rebrand> Owned<B> {
    /// # Safety
    /// `value` is of `home`'s context and not memory of a setup phase.
    pub(crate) unsafe fn from_branded(value: B::At<'_>, home: OwnedContext) -> Self {
        Owned {
            // SAFETY: from now on used only through `bind`, `bind_mut` and `into_bound`
            // after checking the guard's context against `home`, or dropped while `home`
            // keeps the context alive.
            value: ManuallyDrop::new(unsafe { B::from_at(value) }),
            home,
        }
    }

    /// The value, branded with `ctx`'s brand, if `ctx` is the handle's context (one
    /// compare); otherwise an error naming both contexts. Everything the crate checks at
    /// compile time holds for the result as for any value of `ctx`.
    #[inline]
    pub fn bind<'a, 'ctx>(&'a self, ctx: ContextGuard<'ctx>) -> Result<&'a B::At<'ctx>> {
        self.home.check(ctx, "Owned::bind")?;
        // SAFETY: the value is of `ctx`'s context (checked), which `home` keeps alive and
        // the guard proves alive for `'ctx`.
        Ok(unsafe { self.value.at() })
    }

    /// [`bind`](Owned::bind), exclusively: writes, and operations that need `&mut`.
    ///
    /// Replacing the value through the reference (`mem::swap` with another value of the
    /// brand) is sound: every value of an entered owned context's brand is made by its
    /// unphased guard, so any of them may be owned.
    #[inline]
    pub fn bind_mut<'a, 'ctx>(
        &'a mut self,
        ctx: ContextGuard<'ctx>,
    ) -> Result<&'a mut B::At<'ctx>> {
        self.home.check(ctx, "Owned::bind_mut")?;
        // SAFETY: as in `bind`, exclusively borrowed.
        Ok(unsafe { self.value.at_mut() })
    }

    /// The value itself, branded with `ctx`'s brand (the reverse of
    /// [`OwnedContext::unbind`]). The context lives on while the guard's closure runs (the
    /// entered handle's count), so the value is dropped in time like any value of the
    /// brand. If `ctx` is of another context, the error names both and the handle is
    /// dropped (ask [`OwnedContext::is`] first to keep it).
    pub fn into_bound<'ctx>(self, ctx: ContextGuard<'ctx>) -> Result<B::At<'ctx>> {
        self.home.check(ctx, "Owned::into_bound")?;
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is forgotten, so the value and the context handle each move out
        // exactly once.
        let value = unsafe { ManuallyDrop::take(&mut this.value) };
        // SAFETY: as above.
        let home = unsafe { std::ptr::read(&this.home) };
        // the context outlives the guard's closure: an owned entry holds a count of it until
        // it returns; a `with_primary_context` guard (or another record of the same primary
        // context) holds a retain of its own
        drop(home);
        // SAFETY: of `ctx`'s context (checked), alive for `'ctx` (the guard).
        Ok(unsafe { value.into_at() })
    }

    /// The value at the brand `'static`, for the crate's batches.
    ///
    /// # Safety
    /// Used only in a scope of the value's context, as [`Rebrand::at`] requires.
    #[inline]
    pub(crate) unsafe fn value(&self) -> &B {
        &self.value
    }

    /// As [`value`](Owned::value), exclusively.
    ///
    /// # Safety
    /// As for [`value`](Owned::value); the value is not replaced.
    #[inline]
    pub(crate) unsafe fn value_mut(&mut self) -> &mut B {
        &mut self.value
    }

    /// The handle of the value's context.
    #[inline]
    pub fn context(&self) -> &OwnedContext {
        &self.home
    }

    /// Enters the value's context and runs `f` with the guard and the bound value: a
    /// shorthand for `handle.context().enter(|ctx| f(ctx, handle.bind(ctx)?))`.
    pub fn enter<R, E, F>(&self, f: F) -> std::result::Result<R, E>
    where
        F: for<'ctx> FnOnce(ContextGuard<'ctx>, &B::At<'ctx>) -> std::result::Result<R, E>,
        E: From<Error>,
    {
        self.home.enter(|ctx| {
            // SAFETY: the value is of `home`'s context, entered here.
            let value = unsafe { self.value.at() };
            f(ctx, value)
        })
    }
}

/// Page-locked memory is host memory: an owned pinned buffer reads and writes as a slice
/// without entering its context. While a batch uses it, the batch owns it, so the host
/// cannot touch it then.
impl<T: DeviceCopy + Send + Sync> std::ops::Deref for Owned<PinnedBuffer<'static, T>> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        &self.value
    }
}

impl<T: DeviceCopy + Send + Sync> std::ops::DerefMut for Owned<PinnedBuffer<'static, T>> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.value
    }
}

impl<B: Rebrand> Drop for Owned<B> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; `home` (a later field) still keeps the context alive.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        if driver::in_host_fn() {
            // no driver call here: freed at the next release point, in its context, which
            // the clone keeps alive until then
            release::defer(Box::new((value, self.home.clone())));
            return;
        }
        // with its context current, so that a failed release is charged to it (a stream's
        // or an event's drop charges the current context), not to whatever this thread has
        let dropped = || {
            drop(value);
            Ok(())
        };
        // SAFETY: `home` keeps the context alive.
        let _ = unsafe { crate::context::in_context(self.home.raw(), dropped) };
        release::release_deferred();
    }
}

impl<B: Rebrand + fmt::Debug> fmt::Debug for Owned<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Owned")
            .field("value", &*self.value)
            .field("context", &self.home)
            .finish()
    }
}

// ---- the counted context -------------------------------------------------------------

/// A context that lives as long as any handle of it: `'static`, `Send + Sync` and `Clone`
/// (an [`Arc`] inside). The owning layer's root, as [`with_context`](crate::with_context) is
/// the closure layer's: see the [`owned` module](crate::owned).
///
/// [`enter`](OwnedContext::enter) makes the context current on the calling thread (any
/// thread) and hands a closure today's [`ContextGuard<'ctx>`](ContextGuard), with a fresh
/// brand, on which every rule of the crate holds as in `with_context`. Owned handles of the
/// context ([`Owned`], [`OwnedKernel`](crate::owned::OwnedKernel)) each hold a clone, so the
/// context outlives all of them; the last clone dropped, on whatever thread, tears the
/// context down as `with_context` does (synchronize, free the crate's state of it, destroy
/// it or release the primary context). [`close`](OwnedContext::close) does the same and
/// returns the teardown's error, which a drop cannot.
///
/// ```no_run
/// use std::sync::OnceLock;
/// use cuda_brand::prelude::*;
/// use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};
///
/// // GPU state in a `static`: what the closure layer cannot hold
/// static STATE: OnceLock<(OwnedContext, OwnedDeviceBuffer<f32>)> = OnceLock::new();
///
/// fn state() -> cuda_brand::Result<&'static (OwnedContext, OwnedDeviceBuffer<f32>)> {
///     if let Some(state) = STATE.get() {
///         return Ok(state);
///     }
///     let home = OwnedContext::primary(&Device::get(0)?)?;
///     let weights = home.enter(|ctx| {
///         let buf = ctx.from_slice(&[0.5f32; 1024])?;
///         Ok::<_, cuda_brand::Error>(home.unbind(ctx, buf)?)
///     })?;
///     Ok(STATE.get_or_init(|| (home, weights)))
/// }
///
/// # fn main() -> cuda_brand::Result<()> {
/// let (home, weights) = state()?;
/// let sum: f32 = home.enter(|ctx| {
///     let weights = weights.bind(ctx)?; // `&DeviceBuffer<'ctx, f32>`: the rules hold again
///     Ok::<_, cuda_brand::Error>(weights.to_vec()?.iter().sum())
/// })?;
/// assert_eq!(sum, 512.0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct OwnedContext {
    record: Arc<Record>,
}

/// The context and how it is held; shared by every handle of it.
struct Record {
    raw: NonNull<CUctx_st>,
    held: Held,
    /// What the crate keeps for awaited batches of the context, released with it.
    kept: Mutex<Kept>,
}

/// Driver objects the crate keeps per owned context for awaited batches.
#[derive(Default)]
struct Kept {
    /// Completion events, kept for the next batch (`take_event`).
    spare_events: Vec<usize>,
    /// The streams that run the stream callbacks waking awaited batches (`notifier`), made
    /// as batches need them.
    notifiers: Vec<Notifier>,
}

/// A stream that waits for awaited batches' events and runs their wake-up callbacks, with
/// the batch stream it serves now and how many of its callbacks are still to run.
struct Notifier {
    stream: usize,
    key: usize,
    load: Arc<AtomicUsize>,
}

/// The most notifier streams a context makes. A notifier serves one batch stream at a time
/// (its callbacks run in order, each after its batch's event: a batch of another stream
/// behind a long one would be woken only when the long one ends), so a context makes one
/// per stream with batches awaited at once, up to this many; beyond it, batches of
/// different streams share the least loaded notifier.
const MAX_NOTIFIERS: usize = 32;

/// Which notifier a batch of the stream `key` uses: the one serving `key` already, else an
/// idle one, else a new one (below [`MAX_NOTIFIERS`]: `None`), else the least loaded. A
/// load read here may be counted down meanwhile by a callback: a notifier then looks busier
/// than it is, never idler.
fn pick_notifier(notifiers: &[Notifier], key: usize) -> Option<usize> {
    let load = |n: &Notifier| n.load.load(Ordering::Acquire);
    let serving = notifiers.iter().position(|n| n.key == key && load(n) > 0);
    let idle = || notifiers.iter().position(|n| load(n) == 0);
    let least = || (0..notifiers.len()).min_by_key(|&i| load(&notifiers[i]));
    match serving.or_else(idle) {
        Some(i) => Some(i),
        None if notifiers.len() < MAX_NOTIFIERS => None,
        None => least(),
    }
}

/// `CU_EVENT_DISABLE_TIMING`: completion events only order.
const NO_TIMING: u32 = 0x2;

// SAFETY: a context handle may be used from any thread by making it current there; the
// record only holds it, and every use goes through `enter` (push and pop) or the teardown.
// The kept handles are used with the context current, under the lock.
unsafe impl Send for Record {}
// SAFETY: `&Record` reads the handle, and the kept handles only under the lock.
unsafe impl Sync for Record {}

impl Record {
    /// The teardown of the last handle: the kept streams and events are destroyed, then
    /// [`context::give_up`].
    fn give_up(self) -> Result<()> {
        let mut this = std::mem::ManuallyDrop::new(self);
        let kept = std::mem::take(this.kept.get_mut().unwrap_or_else(PoisonError::into_inner));
        let destroy = |_: ContextGuard<'_>| {
            let mut first = Ok(());
            for s in kept.notifiers.iter().map(|n| n.stream) {
                // SAFETY: streams of this context that only the crate uses; what is still
                // queued on them (the callbacks of forgotten batches) completes before the
                // driver releases them.
                let d = unsafe { driver::stream_destroy(s as driver::CUstream) };
                first = first.and(d);
            }
            for e in kept.spare_events {
                // SAFETY: events of this context, unused: every batch has given its event
                // back, or holds a count of the context (so this is not the last).
                let d = unsafe { driver::event_destroy(e as driver::CUevent) };
                first = first.and(d);
            }
            first
        };
        // SAFETY: the context is alive: this is its last count.
        let destroyed = unsafe { context::enter_held(this.raw, destroy) };
        // SAFETY: `this` is never used again; the mutex (its only field with a drop) holds
        // empty lists.
        unsafe { std::ptr::drop_in_place(&mut this.kept) };
        // SAFETY: the last count of this record: no owned handle of it is left (each holds
        // a count), so no value made through it is used again, and for a created context no
        // thread has it entered through the crate. A primary context may still be entered
        // elsewhere (`with_primary_context`, another record of it): those hold retains of
        // their own, and this releases only this record's.
        let given_up = unsafe { context::give_up(this.raw, this.held) };
        crate::context::teardown::keep_both(destroyed, given_up)
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let last = Record {
            raw: self.raw,
            held: self.held,
            kept: Mutex::new(std::mem::take(
                self.kept.get_mut().unwrap_or_else(PoisonError::into_inner),
            )),
        };
        if driver::in_host_fn() {
            // no driver call here: the teardown runs at the next release point (see
            // `release`); until then the context stays alive, so its address is not reused
            release::defer(Box::new(last));
            return;
        }
        // an error here has nowhere to go: `close` returns it
        let _ = last.give_up();
    }
}

impl OwnedContext {
    /// Creates a context on `device` (`cuCtxCreate`), held until the last handle of it is
    /// dropped or [`close`](OwnedContext::close)d. Nothing is left current on the calling
    /// thread.
    pub fn new(device: &Device, flags: ContextFlags) -> Result<OwnedContext> {
        release::release_deferred();
        let raw = context::create_held(device, flags)?;
        Ok(OwnedContext::from_record(raw, Held::Destroy))
    }

    /// Holds the primary context of `device` (`cuDevicePrimaryCtxRetain`, released with the
    /// last handle): the runtime API's context, which `with_primary_context` enters too, so
    /// an owned handle of it binds there as well.
    pub fn primary(device: &Device) -> Result<OwnedContext> {
        release::release_deferred();
        let raw = context::retain_held(device)?;
        Ok(OwnedContext::from_record(
            raw,
            Held::Release(device.as_raw()),
        ))
    }

    fn from_record(raw: NonNull<CUctx_st>, held: Held) -> OwnedContext {
        OwnedContext {
            record: Arc::new(Record {
                raw,
                held,
                kept: Mutex::new(Kept::default()),
            }),
        }
    }

    /// Makes the context current on the calling thread, runs `f` with a guard of a fresh
    /// brand, and restores what was current before, also when `f` panics (as
    /// [`SharedContext::enter`](crate::SharedContext::enter)). The borrow of `self` keeps
    /// the context alive for all of `f`.
    ///
    /// Inside, the closure layer's rules hold unchanged: nothing branded leaves `f`, values
    /// of two contexts never mix, asynchronous work happens in stream scopes.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::owned::OwnedContext;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let home = OwnedContext::new(&Device::get(0)?, ContextFlags::default())?;
    /// let worker = {
    ///     let home = home.clone();
    ///     std::thread::spawn(move || home.enter(|ctx| ctx.api_version())) // any thread
    /// };
    /// assert!(worker.join().unwrap()? > 0);
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn enter<R, E, F>(&self, f: F) -> std::result::Result<R, E>
    where
        F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> std::result::Result<R, E>,
        E: From<Error>,
    {
        release::release_deferred();
        // SAFETY: `self` is borrowed for the call, and holds a count of the context.
        unsafe { context::enter_held(self.record.raw, f) }
    }

    /// Takes a branded value of this context over: the result is `'static`, remembers its
    /// context, and frees in it when dropped (on any thread). `ctx` is the guard the value
    /// was made with (its brand says so); the check is that it is this context's (one
    /// compare). A value of another context is refused with an error naming both contexts,
    /// and dropped, in its own closure (ask [`is`](OwnedContext::is) first to keep it).
    ///
    /// A value lent to a stream scope cannot be moved here: the borrow checker keeps it
    /// until the scope has synchronized.
    pub fn unbind<'ctx, V: Unbind<'ctx>>(
        &self,
        ctx: ContextGuard<'ctx>,
        value: V,
    ) -> Result<Owned<V::Static>> {
        self.check(ctx, "OwnedContext::unbind")?;
        if value.of_setup_phase() {
            // not reachable through the types (a setup guard is of a context of its own),
            // checked all the same: a phase's teardown frees such memory
            return Err(Error::invalid_input(
                "OwnedContext::unbind",
                Invalid::argument(
                    "memory of a setup phase is freed by its phase's teardown and cannot be owned",
                ),
            ));
        }
        // SAFETY: the value is of this context (checked: `ctx` is this context, alive, and
        // the value's brand is `ctx`'s), and not of a setup phase (checked).
        Ok(unsafe { Owned::from_branded(value, self.clone()) })
    }

    /// Gives up this handle. If it was the last ([`handles`](Self::handles) is 1), the
    /// context is torn down here and the teardown's result returned: the context's
    /// synchronization (a sticky error such as an illegal address), its destruction or
    /// release, and the releases of its handles that failed when they were dropped. If
    /// other handles remain, nothing else happens and the result is `Ok(())`: the last
    /// handle's `close` (or drop) tears the context down.
    pub fn close(self) -> Result<()> {
        let Some(record) = Arc::into_inner(self.record) else {
            return Ok(());
        };
        if driver::in_host_fn() {
            // dropping defers it (see `Drop for Record`)
            drop(record);
            return Err(driver::driver_call_refused("OwnedContext::close"));
        }
        record.give_up()
    }

    /// How many handles of this context exist now: this one, its clones, and the one each
    /// [`Owned`] value, [`OwnedKernel`](crate::owned::OwnedKernel) and pending batch of it holds.
    /// Another thread may change it at any time; `1` means this handle's
    /// [`close`](Self::close) tears the context down unless a clone is made first.
    pub fn handles(&self) -> usize {
        Arc::strong_count(&self.record)
    }

    /// Whether `ctx` is a guard of this context: what [`bind`](Owned::bind) and
    /// [`unbind`](OwnedContext::unbind) check.
    #[inline]
    pub fn is(&self, ctx: ContextGuard<'_>) -> bool {
        ctx.as_non_null() == self.record.raw
    }

    /// Whether `other` is a handle of the same context.
    pub fn same_context(&self, other: &OwnedContext) -> bool {
        self.record.raw == other.record.raw
    }

    /// Checks that `ctx` is this context: `Ok` or an error naming both.
    #[inline]
    pub(crate) fn check(&self, ctx: ContextGuard<'_>, call: &'static str) -> Result<()> {
        if self.is(ctx) {
            Ok(())
        } else {
            Err(wrong_context(call, self.record.raw, ctx.as_non_null()))
        }
    }

    /// A completion event of this context (from the spares, or new), for an awaited batch.
    /// The context must be current.
    pub(crate) fn take_event(&self) -> Result<driver::CUevent> {
        let spare = lock(&self.record.kept).spare_events.pop();
        match spare {
            Some(e) => Ok(e as driver::CUevent),
            None => driver::event_create(NO_TIMING),
        }
    }

    /// A notifier stream of this context for a batch of the stream `key` ([`pick_notifier`]:
    /// made if none is free), and its load, counted up for this batch: the batch's callback
    /// counts it down when it runs (or the caller, if queueing it fails). The context must be
    /// current.
    pub(crate) fn notifier(&self, key: usize) -> Result<(driver::CUstream, Arc<AtomicUsize>)> {
        let mut kept = lock(&self.record.kept);
        let i = match pick_notifier(&kept.notifiers, key) {
            Some(i) => i,
            None => {
                // non-blocking: no implicit order with the legacy stream
                let stream = driver::stream_create(1, 0)? as usize;
                let load = Arc::new(AtomicUsize::new(0));
                kept.notifiers.push(Notifier { stream, key, load });
                kept.notifiers.len() - 1
            }
        };
        let n = &mut kept.notifiers[i];
        n.key = key;
        n.load.fetch_add(1, Ordering::AcqRel);
        Ok((n.stream as driver::CUstream, Arc::clone(&n.load)))
    }

    /// Keeps `event` for the next batch of this context.
    ///
    /// # Safety
    /// `event` came from [`take_event`](OwnedContext::take_event) of this context, and
    /// nothing uses it any more.
    pub(crate) unsafe fn put_event(&self, event: driver::CUevent) {
        lock(&self.record.kept).spare_events.push(event as usize);
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> NonNull<CUctx_st> {
        self.record.raw
    }

    /// The driver's handle (`CUcontext`), for calls this crate does not wrap, once every
    /// pending synchronous operation of the crate is done (waited for on the host, as
    /// [`ContextGuard::as_raw`] does).
    ///
    /// # Safety
    ///
    /// As for [`ContextGuard::as_raw`]: the context is not destroyed, reset or popped where
    /// this crate pushed it, the handle is not used after the last handle of the context is
    /// gone, and work queued through it uses this crate's memory as a scope would.
    pub unsafe fn as_raw(&self) -> crate::driver::handles::CUcontext {
        synchronous::before_raw_escape(Touched::Anything);
        self.record.raw.as_ptr().cast()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The error of a value or guard of one context given to a handle of another.
#[cold]
#[inline(never)]
pub(crate) fn wrong_context(
    call: &'static str,
    owned: NonNull<CUctx_st>,
    guard: NonNull<CUctx_st>,
) -> Error {
    // enter the handle's own context (its `OwnedContext::enter`) to use it
    Error::invalid_input(
        call,
        Invalid::WrongContext {
            what: "the owned handle",
            expected: guard.as_ptr() as u64,
            found: owned.as_ptr() as u64,
        },
    )
}

impl fmt::Debug for OwnedContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedContext")
            .field("raw", &self.record.raw)
            .field("held", &self.record.held)
            .field("handles", &Arc::strong_count(&self.record))
            .finish()
    }
}

// The thread rules of the owned library handles, as their docs state them: `Send`, not
// `Sync`, as the handles (so an `Arc` of one never reaches a second thread, and two threads
// never bind and use one handle at once).
#[cfg(any(feature = "cublas", feature = "cufft", feature = "curand"))]
mod facts {
    #[allow(unused_imports)]
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    #[cfg(feature = "cublas")]
    assert_impl_all!(super::OwnedBlas: Send);
    #[cfg(feature = "cublas")]
    assert_not_impl_any!(super::OwnedBlas: Sync);
    #[cfg(feature = "cufft")]
    assert_impl_all!(super::OwnedFftPlan<crate::cufft::Complex32, crate::cufft::Complex32>: Send);
    #[cfg(feature = "cufft")]
    assert_not_impl_any!(super::OwnedFftPlan<f64, crate::cufft::Complex64>: Sync);
    #[cfg(feature = "curand")]
    assert_impl_all!(super::OwnedRng: Send);
    #[cfg(feature = "curand")]
    assert_not_impl_any!(super::OwnedRng: Sync);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::{MAX_NOTIFIERS, Notifier, pick_notifier};

    /// Notifiers serving the streams (`key`) with these loads (their streams never used).
    fn notifiers(of: &[(usize, usize)]) -> Vec<Notifier> {
        of.iter()
            .map(|&(key, load)| Notifier {
                stream: 0,
                key,
                load: Arc::new(AtomicUsize::new(load)),
            })
            .collect()
    }

    #[test]
    fn a_batch_takes_its_streams_notifier_else_an_idle_one_else_a_new_one() {
        // the notifier serving this stream, even while another is idle
        assert_eq!(pick_notifier(&notifiers(&[(7, 0), (9, 2)]), 9), Some(1));
        // a busy notifier of another stream is never shared while one is idle
        assert_eq!(pick_notifier(&notifiers(&[(7, 3), (8, 0)]), 9), Some(1));
        // an idle notifier is taken over, whichever stream it served last
        assert_eq!(pick_notifier(&notifiers(&[(7, 0)]), 9), Some(0));
        // all busy with other streams: a new one
        assert_eq!(pick_notifier(&notifiers(&[(7, 1), (8, 5)]), 9), None);
        assert_eq!(pick_notifier(&notifiers(&[]), 9), None);
    }

    #[test]
    fn at_the_limit_batches_share_the_least_loaded_notifier() {
        let mut full: Vec<(usize, usize)> = (0..MAX_NOTIFIERS).map(|i| (i, 3)).collect();
        full[5].1 = 1;
        assert_eq!(pick_notifier(&notifiers(&full), 1000), Some(5));
    }
}
