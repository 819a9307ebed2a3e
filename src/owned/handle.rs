//! [`Owned<B>`]: a branded value made `'static`, bound again to a guard of its context.

use std::fmt;
use std::mem::ManuallyDrop;

use super::home::OwnedContext;
use super::release;
use crate::context::ContextGuard;
use crate::driver;
use crate::error::{Error, Result};
use crate::memory::{DeviceBuffer, DeviceCopy, ManagedBuffer, MemoryPool, PinnedBuffer};
use crate::module::Module;
use crate::stream::{Event, EventKind, Stream};

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

use sealed::Rebrand;

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
