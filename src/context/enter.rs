//! Entering a context and tearing it down: [`with_context`], [`with_primary_context`], their
//! `_and_teardown` forms, [`with_raw_context`], [`SharedContext::enter`]. The one way the
//! crate makes a context current for an operation, `in_context`, is beside the guard
//! (`context/mod.rs`).

use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

use cuda_driver_sys::CUctx_st;

use super::{ContextFlags, ContextGuard, Device, SharedContext};
use super::{confined, teardown};
use crate::driver::{self, CUcontext, CUdevice};
use crate::error::{Error, ErrorCode, Result, WithTeardown};

/// Runs `body`, then `teardown`, also while a panic of `body` unwinds (then in a drop
/// guard, after `body`'s frame, and so every borrow it held, is gone; its error is dropped
/// and the panic resumes). `teardown` is `Copy` (it captures handles and references only),
/// so the guard needs no flag: it is forgotten on the normal path. The closure's error
/// comes first: a teardown error becomes `E::from(error)` when `body` returned `Ok`, and
/// is attached to the closure's error when that is an [`Error`] (see
/// [`teardown::combine`]). The guard is local, so no user code can `mem::forget` it. Used
/// by every closure-scoped entry point: contexts, shared contexts and stream scopes.
///
/// On the normal path `teardown` runs through [`Teardown::run`], inlined at the call site
/// (a plain pop is a handful of instructions there); the guard's call is a cold function of
/// its own, off that path.
#[inline(always)]
pub(crate) fn run_then<R, E: From<Error>, T: Teardown>(
    body: impl FnOnce() -> Result<R, E>,
    teardown: T,
) -> Result<R, E> {
    struct OnUnwind<T: Teardown>(T);
    impl<T: Teardown> Drop for OnUnwind<T> {
        fn drop(&mut self) {
            unwinding(self.0);
        }
    }
    let on_unwind = OnUnwind(teardown);
    let outcome = body();
    std::mem::forget(on_unwind);
    let torn_down = teardown.run();
    teardown::combine(outcome, torn_down)
}

/// The teardown of [`run_then`] while a panic unwinds: out of line, off the normal path.
#[cold]
#[inline(never)]
fn unwinding<T: Teardown>(teardown: T) {
    let _ = teardown.run();
}

/// What [`run_then`] runs after its body: any `Copy` closure returning the crate's
/// [`Result`], or one of the context teardowns below ([`Pop`], [`PopAndReport`],
/// [`Finish`]), whose `run` is inlined at the call site whatever the optimizer thinks of
/// the closure around it.
pub(crate) trait Teardown: Copy {
    /// Runs the teardown once.
    fn run(self) -> Result<()>;
}

impl<F: FnOnce() -> Result<()> + Copy> Teardown for F {
    #[inline(always)]
    fn run(self) -> Result<()> {
        self()
    }
}

/// Pops the context (checked: [`on_top`]) through the push's table ([`driver::Pushed`]):
/// entering a context that another closure owns ([`SharedContext::enter`], the owning
/// layer's [`enter_held`]), whose teardown reports the failed releases of handles dropped
/// meanwhile.
#[derive(Clone, Copy)]
struct Pop(CUcontext, driver::Pushed);

impl Teardown for Pop {
    #[inline(always)]
    fn run(self) -> Result<()> {
        on_top(self.0, self.1.pop())
    }
}

/// The teardown of [`with_raw_context`]: waits on the host for every pending synchronous
/// operation of the crate ([`teardown::wait_for_sync_writes`]: the caller's code runs
/// next, which the crate does not order), frees what the crate keeps for the context (its
/// sync streams made during the scope, its bulk-copy staging: the end hooks), pops it, and
/// reports the failed releases of its handles, for a context someone else owns, who may
/// destroy it once the crate's scope is over. With nothing pending, no sync stream made
/// during the scope, no end hooks registered and nothing recorded (the common case), that
/// is the pop and a few atomic loads (the synchronous layer's settled check,
/// [`teardown::end_sync_streams`]'s and
/// [`teardown::nothing_kept`]).
/// The second field: the push ([`Pop`]'s); the third: [`teardown::sync_streams_made`]
/// when the scope began.
#[derive(Clone, Copy)]
struct PopAndReport(CUcontext, driver::Pushed, u64);

impl Teardown for PopAndReport {
    #[inline(always)]
    fn run(self) -> Result<()> {
        let raw = self.0;
        // the writes of sync streams made before the scope, which `end_sync_streams` keeps
        let waited = teardown::wait_for_sync_writes();
        // SAFETY: `raw` is alive and on top of this thread's stack (current): `run_then`
        // runs this after the closure, which cannot change the stack through safe code.
        // (These two steps are `teardown::run_before_release`, split by the check below.)
        unsafe { teardown::end_sync_streams(raw, self.2) };
        // no hooks to run and no failed release to report (read after the sync streams
        // ended, whose releases may fail, and after every drop of the closure)
        let popped = match teardown::nothing_kept() {
            true => on_top(raw, self.1.pop()),
            // SAFETY: as above.
            false => unsafe { pop_and_report(raw, self.1) },
        };
        teardown::keep_both(waited, popped)
    }
}

/// The rest of [`PopAndReport`] when something is kept: runs the end hooks, pops, and takes
/// the failed releases of `raw` ([`teardown::take_failed_releases`]), out of line.
///
/// # Safety
/// `raw` is alive and on top of this thread's stack, pushed by `pushed`.
#[inline(never)]
unsafe fn pop_and_report(raw: CUcontext, pushed: driver::Pushed) -> Result<()> {
    // SAFETY: the caller's promise: `raw` is alive and current.
    unsafe { teardown::run_end_hooks(raw) };
    let popped = on_top(raw, pushed.pop());
    if !teardown::any_failed_releases() {
        return popped;
    }
    teardown::keep_both(popped, teardown::take_failed_releases(raw))
}

/// Synchronizes, pops, then gives the context up (one the crate created or retained) and
/// reports the failed releases of its handles: [`tear_down_fully`], out of line. The third
/// field: [`teardown::sync_streams_made`] when the scope began.
#[derive(Clone, Copy)]
struct Finish(CUcontext, Held, u64);

impl Teardown for Finish {
    #[inline(always)]
    fn run(self) -> Result<()> {
        tear_down_fully(self.0, self.1, self.2)
    }
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
    #[inline]
    pub fn enter<R, E>(self, f: impl FnOnce(ContextGuard<'ctx>) -> Result<R, E>) -> Result<R, E>
    where
        E: From<Error>,
    {
        // SAFETY: the brand keeps `self` inside the `with_context` closure, so the context is
        // alive; `run_scoped` pops it again on every exit path.
        let pushed = unsafe { push_to_enter("SharedContext::enter", self.raw.as_ptr()) }?;
        // SAFETY: as above, the context outlives `'ctx`.
        let guard = unsafe { ContextGuard::new_unchecked(self.raw) };
        run_scoped(guard, Pop(self.raw.as_ptr(), pushed), f)
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
    ///         s.spawn(move || {
    ///             shared.enter_and_teardown(|ctx| Ok::<_, anyhow::Error>(ctx.api_version()?))
    ///         })
    ///         .join()
    ///         .unwrap()
    ///     });
    ///     if let Err(failed) = worker {
    ///         eprintln!("{failed}"); // the closure's error, then the teardown's if it failed too
    ///     }
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn enter_and_teardown<R, E>(
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
        WithTeardown::settle("SharedContext::enter_and_teardown", outcome, torn_down)
    }
}

/// How a context the crate holds is given up.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Held {
    /// Destroy it (a context `with_context` created).
    Destroy,
    /// Release the primary context of this device.
    Release(CUdevice),
}

/// Calls `f` with `guard`, whose context the calling thread has on top of its stack, then
/// runs `teardown` ([`Pop`], [`PopAndReport`] or [`Finish`] of the guard's context) on every
/// exit path (see [`run_then`]).
#[inline(always)]
fn run_scoped<'ctx, R, E>(
    guard: ContextGuard<'ctx>,
    teardown: impl Teardown,
    f: impl FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
) -> Result<R, E>
where
    E: From<Error>,
{
    run_then(|| f(guard), teardown)
}

/// Pops `raw` off the calling thread's stack. The crate keeps the stack balanced, so `raw`
/// is on top; if unsafe code broke that, the pop took someone else's context: it is put back
/// and the mistake reported. (Checking after the pop costs one compare on the normal path,
/// unlike a `cuCtxGetCurrent` before it.)
#[inline(always)]
pub(super) fn pop_exact(raw: CUcontext) -> Result<()> {
    on_top(raw, driver::ctx_pop())
}

/// The check of [`pop_exact`] on the outcome of a pop, `popped`.
#[inline(always)]
fn on_top(raw: CUcontext, popped: Result<CUcontext>) -> Result<()> {
    match popped {
        Ok(top) if top == raw => Ok(()),
        Ok(other) => Err(put_back(other)),
        Err(e) => Err(e),
    }
}

/// [`refuse_partitioned`] for an entry point that has a context, not a device
/// (`with_raw_context`, `SharedContext::enter`, the owning layer's `enter`): while a device
/// is partitioned, the context's device is asked of the driver (a push, `cuCtxGetDevice`,
/// a pop).
///
/// # Safety
/// `ctx` is a live context.
#[inline]
unsafe fn refuse_partitioned_context(call: &'static str, ctx: CUcontext) -> Result<()> {
    confined::refuse_inside(call)?;
    if confined::none_partitioned() {
        return Ok(());
    }
    confined::refuse_foreign(ctx)?;
    // SAFETY: the caller's promise; popped again right after.
    unsafe { driver::ctx_push(ctx) }?;
    let device = driver::ctx_get_device();
    pop_exact(ctx)?;
    confined::refuse_device(call, device?)
}

/// Pushes `raw` to enter it for a closure of the entry point `call`, after the checks every
/// such entry makes ([`refuse_partitioned_context`](refuse_partitioned_context):
/// no partitioned closure on this thread, no context of a partitioned device; and the push's
/// own, no host function on this thread). While nothing can be refused
/// ([`nothing_refused`](super::confined::nothing_refused): one thread-local load for the
/// thread's two rules, one atomic load for the devices) that is the push alone; otherwise
/// the full checks run, out of line. The [`driver::Pushed`] pops it again.
///
/// # Safety
/// `raw` is a live context, popped again before it goes away.
#[inline(always)]
unsafe fn push_to_enter(call: &'static str, raw: CUcontext) -> Result<driver::Pushed> {
    if super::confined::nothing_refused() {
        // SAFETY: the caller's promise; `nothing_refused` found no host function running on
        // this thread.
        unsafe { driver::ctx_push_unrefused(raw) }
    } else {
        // SAFETY: the caller's promise.
        unsafe { push_to_enter_checked(call, raw) }
    }
}

/// [`push_to_enter`] when something may be refused: every check, in the order they always
/// ran (the partition rules first, then the push's host-function check).
///
/// # Safety
/// As [`push_to_enter`].
#[cold]
#[inline(never)]
unsafe fn push_to_enter_checked(call: &'static str, raw: CUcontext) -> Result<driver::Pushed> {
    // SAFETY: the caller's promise: `raw` is alive.
    unsafe { refuse_partitioned_context(call, raw) }?;
    // SAFETY: the caller's promise.
    unsafe { driver::ctx_push_entering(raw) }
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

/// Synchronizes, pops and destroys or releases, then takes the failed releases of the
/// context's handles ([`teardown::take_failed_releases`]); every step runs whatever failed
/// before, and every error is kept: the first is returned, the others chained on it as
/// its [`teardown_errors`](Error::teardown_errors), in the order they happened. If the pop
/// finds another context on top of the stack (unsafe code changed the stack and did not
/// restore it), the context is neither destroyed nor released: it is still somewhere on
/// this thread's stack, and destroying it would leave a dangling entry there. It is leaked,
/// and the error says so.
///
/// The sync streams of the context made since `mark` end here (`teardown::end_sync_streams`):
/// all of a context `with_context` created (nothing was made in it before), those a
/// `with_primary_context` made (an enclosing one, on this thread or another, ends its own).
#[inline(never)]
fn tear_down_fully(raw: CUcontext, owned: Held, mark: u64) -> Result<()> {
    // no longer held (`held`), before anything kept for it is freed, so that nothing is
    // kept for it again: no staging, and no page-locked ring (`destroys_itself`)
    match owned {
        Held::Destroy => disown(raw),
        Held::Release(_) => unhold_primary(raw),
    }
    let synced = driver::ctx_synchronize();
    // The bulk-copy staging is page-locked for this context: unregistered and freed while
    // the context is current, before it is destroyed or released. A primary context may
    // live on after the release (a nested or another thread's `with_primary_context`
    // holds it), but the crate cannot tell which release destroys it, and memory left
    // registered with a destroyed context leaks its registration (compute-sanitizer's
    // leak check found it): the next staged copy pins a staging again.
    // (The staging belongs to the memory layer, which registers its release as an end hook:
    // `teardown::register_end_hooks`.)
    // SAFETY: `raw` is alive and on top of this thread's stack (current).
    unsafe { teardown::run_before_release(raw, mark) };
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
            Held::Destroy => {
                // SAFETY: every value branded with this context is gone (the brand cannot
                // leave the closure, and the owning layer gives a context up with its last
                // handle), this is a context the crate created (`create`: `with_context`,
                // `with_phases`, `OwnedContext::new`), and it is off the stack.
                let destroyed = unsafe { driver::ctx_destroy(raw) };
                if destroyed.is_ok() {
                    // its registrations are gone: rings whose unregistering failed are freed
                    teardown::run_after_destroy(raw);
                }
                destroyed
            }
            Held::Release(device) => {
                // SAFETY: balances the retain in `with_primary_context`; nothing branded
                // remains.
                let released = unsafe { driver::primary_ctx_release(device) };
                // frees the staging if the release destroyed the context
                teardown::run_after_primary_release(raw, device);
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
/// [`with_context_and_teardown`] returns both. Every step of the teardown runs whatever failed
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
    super::confined::refuse_partitioned("with_context", device.as_raw())?;
    let raw = create(device, flags)?;
    // SAFETY: the context was just created and is destroyed only after `f` returns.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    run_scoped(guard, Finish(raw.as_ptr(), Held::Destroy, 0), f)
}

/// [`with_context`] whose teardown first runs `extra` with the context current (after `f`,
/// also on a panic), then synchronizes, pops and destroys it. Returns the first error, with the later ones chained on it.
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
    super::confined::refuse_partitioned("with_phases", device.as_raw())?;
    let raw = create(device, flags)?;
    // SAFETY: the context was just created and is destroyed only after `f` returns.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    let raw = raw.as_ptr();
    run_then(
        || f(guard),
        // both run; an error of `extra` comes first, the teardown's chained on it
        || teardown::keep_both(extra(raw), tear_down_fully(raw, Held::Destroy, 0)),
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
/// let free = with_primary_context(&device, |ctx| Ok::<_, cuda_brand::Error>(ctx.memory_info()?.free))?;
/// println!("{free} bytes free");
/// # Ok(()) }
/// ```
pub fn with_primary_context<R, E, F>(device: &Device, f: F) -> Result<R, E>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    super::confined::refuse_partitioned("with_primary_context", device.as_raw())?;
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
    hold_primary(raw.as_ptr());
    // SAFETY: the retain keeps the context alive until `run_scoped` releases it after `f`.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    let teardown = Finish(
        raw.as_ptr(),
        Held::Release(device.as_raw()),
        teardown::sync_streams_made(),
    );
    run_scoped(guard, teardown, f)
}

/// [`with_context`] for any error type: returns the closure's error and the teardown's
/// together when both fail, in a [`WithTeardown`]. (The plain [`with_context`] keeps both
/// only when the closure's error type is [`Error`]: it cannot attach an error to a value
/// of a type it does not know.)
///
/// ```no_run
/// use cuda_brand::{with_context_and_teardown, ContextFlags, Device};
///
/// fn run(device: &Device) -> anyhow::Result<u32> {
///     let version = with_context_and_teardown(device, ContextFlags::default(), |ctx| {
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
pub fn with_context_and_teardown<R, E, F>(
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
    WithTeardown::settle("with_context_and_teardown", outcome, torn_down)
}

/// [`with_primary_context`] for any error type: returns the closure's error and the
/// teardown's together when both fail, in a [`WithTeardown`].
///
/// ```no_run
/// use cuda_brand::{with_primary_context_and_teardown, Device};
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// let free = with_primary_context_and_teardown(&device, |ctx| {
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(ctx.memory_info()?.free)
/// });
/// match free {
///     Ok(free) => println!("{free} bytes free"),
///     Err(failed) => eprintln!("{failed}"), // both errors, when both failed
/// }
/// # Ok(()) }
/// ```
pub fn with_primary_context_and_teardown<R, E, F>(
    device: &Device,
    f: F,
) -> Result<R, WithTeardown<E>>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    let mut outcome = None;
    let torn_down = with_primary_context(device, |ctx| {
        outcome = Some(f(ctx));
        Ok(())
    });
    WithTeardown::settle("with_primary_context_and_teardown", outcome, torn_down)
}

/// Brands a context created elsewhere (by the runtime API, another library, raw driver
/// calls) for the length of `f`: pushes it, runs `f` with a guard, and pops it. The context
/// is neither synchronized nor destroyed, but every synchronous operation of the crate
/// still pending when `f` returns (a `fill` or a device-to-device copy may still run on
/// the GPU when it returns: `docs/design/ordering.md`) is waited for on the host before
/// the pop: the caller's code runs next, which the crate does not order, and finds that
/// memory written (memory of its own that `f` adopted and wrote, say). One atomic load
/// while nothing is pending. Handles of the context whose release failed when they were
/// dropped are reported by the pop, as by the teardown of [`with_context`] (no other
/// teardown of the crate would report them); so is a failed wait (a sticky error).
///
/// # Safety
///
/// `raw` must be a live context that nothing destroys, resets or pops while `f` runs, so
/// that it outlives every value branded inside `f`.
#[inline]
pub unsafe fn with_raw_context<R, E, F>(
    raw: crate::driver::handles::CUcontext,
    f: F,
) -> Result<R, E>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    let raw: CUcontext = raw.cast();
    let Some(raw) = NonNull::new(raw) else {
        return Err(Error::with_detail(
            "with_raw_context",
            ErrorCode::InvalidContext,
            "the context handle is null",
        )
        .into());
    };
    // SAFETY: the caller promises the context is alive; it is popped after `f`.
    let pushed = unsafe { push_to_enter("with_raw_context", raw.as_ptr()) }?;
    // SAFETY: the caller promises the context outlives `f`, so it outlives `'ctx`.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    let teardown = PopAndReport(raw.as_ptr(), pushed, teardown::sync_streams_made());
    run_scoped(guard, teardown, f)
}

/// Creates a context on `device` for the owning layer and takes it off the calling thread's
/// stack again (`cuCtxCreate` pushes it): the caller holds it, unentered, until
/// [`give_up`].
pub(crate) fn create_held(device: &Device, flags: ContextFlags) -> Result<NonNull<CUctx_st>> {
    let raw = create(device, flags)?;
    // on failure it is still on this thread's stack somewhere: destroying it would leave a
    // dangling entry, so it is leaked, as the teardown does, and no longer the crate's
    if let Err(e) = pop_exact(raw.as_ptr()) {
        disown(raw.as_ptr());
        return Err(e);
    }
    Ok(raw)
}

/// Creates a context on `device` (`cuCtxCreate`, which pushes it on the calling thread's
/// stack) that the crate destroys itself, through [`tear_down_fully`] with
/// [`Held::Destroy`]; known as the crate's until then ([`destroys_itself`]: the bounce
/// rings of its sync streams are page-locked).
fn create(device: &Device, flags: ContextFlags) -> Result<NonNull<CUctx_st>> {
    let raw = driver::ctx_create(flags.bits(), device.as_raw())?;
    let raw = driver::non_null("cuCtxCreate_v2", raw)?;
    created().push(raw.as_ptr() as usize);
    Ok(raw)
}

/// Retains the primary context of `device` for the owning layer (balanced by [`give_up`]).
pub(crate) fn retain_held(device: &Device) -> Result<NonNull<CUctx_st>> {
    let raw = driver::primary_ctx_retain(device.as_raw())?;
    let raw = driver::non_null("cuDevicePrimaryCtxRetain", raw)?;
    hold_primary(raw.as_ptr());
    Ok(raw)
}

/// The primary contexts the crate holds now (`with_primary_context`, the owning layer's
/// [`retain_held`]; not `with_partitions`, whose teardown frees nothing kept for the primary
/// context), once per hold, from the retain to the start of the teardown that releases it
/// ([`tear_down_fully`]). Its own lock, never held across a driver call.
static HELD_PRIMARIES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn held_primaries() -> MutexGuard<'static, Vec<usize>> {
    // every critical section is one push, search or removal
    HELD_PRIMARIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

fn hold_primary(raw: CUcontext) {
    held_primaries().push(raw as usize);
}

/// Ends one hold of the primary context `raw` ([`hold_primary`]).
fn unhold_primary(raw: CUcontext) {
    let mut held = held_primaries();
    if let Some(i) = held.iter().position(|&c| c == raw as usize) {
        held.swap_remove(i);
    }
}

/// The contexts the crate created and destroys itself ([`create`]), from their making to
/// the start of their destroying teardown ([`tear_down_fully`]), or to a failed pop that
/// leaves one alive. Its own lock, never held across a driver call, so that making a
/// context never waits for the synchronous layer's book (held across waits for the GPU).
static CREATED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn created() -> MutexGuard<'static, Vec<usize>> {
    // every critical section is one push, search or removal
    CREATED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `raw` is about to be destroyed (or was left alive by a failed pop, the crate no longer
/// holding it): from now on it is not [`destroys_itself`]'s.
fn disown(raw: CUcontext) {
    created().retain(|&c| c != raw as usize);
}

/// Whether the crate created `raw` and destroys it itself, with a teardown that ends its
/// sync streams after synchronizing it, not begun yet: the synchronous layer page-locks the
/// bounce rings of its sync streams there (`synchronous/lifecycle.rs`).
pub(crate) fn destroys_itself(raw: CUcontext) -> bool {
    created().contains(&(raw as usize))
}

#[cfg(feature = "staging")] // used by the bulk-copy staging alone
/// Whether a scope of the crate holds `raw` now, so that its teardown frees what the
/// layers above keep for the context (`teardown::run_before_give_up`): a context the crate
/// created, or one with a sync stream of a scope not yet torn down
/// (`teardown::sync_streams_hold`), a
/// primary context the crate retained, or an SM partition. A context another library made
/// current (cudarc's `bind_to_thread`, the runtime API) is not, unless one of those holds
/// it too; neither is a `with_raw_context`'s with no sync stream yet (its teardown frees
/// what is kept anyway, but the crate cannot tell its context from a foreign one without a
/// record on every entry). The answer stays true until such a teardown begins: a created
/// or primary context is taken out of these lists, and its sync streams are ended, before
/// anything kept for it is freed (a partition's context is current on its own thread only,
/// whose teardown it is).
pub(crate) fn held(raw: CUcontext) -> bool {
    // the synchronous layer's book last: its lock may be held across a wait for the GPU
    held_primaries().contains(&(raw as usize))
        || super::confined::is_partition(raw)
        || destroys_itself(raw)
        || teardown::sync_streams_hold(raw)
}

/// Enters a context that the owning layer holds: pushes it, runs `f` with a guard, pops it
/// on every exit path ([`SharedContext::enter`] with a count as the proof of life).
///
/// # Safety
/// `raw` is alive, and stays alive while `f` runs (the caller holds a count of it).
#[inline]
pub(crate) unsafe fn enter_held<R, E, F>(raw: NonNull<CUctx_st>, f: F) -> Result<R, E>
where
    F: for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<R, E>,
    E: From<Error>,
{
    // SAFETY: the caller's promise: `raw` is alive; `run_scoped` pops it again on every exit
    // path.
    let pushed = unsafe { push_to_enter("OwnedContext::enter", raw.as_ptr()) }?;
    // SAFETY: the caller's count keeps the context alive for all of `f`, so for `'ctx`.
    let guard = unsafe { ContextGuard::new_unchecked(raw) };
    run_scoped(guard, Pop(raw.as_ptr(), pushed), f)
}

/// Gives up a context that the owning layer held: pushes it, then the teardown of
/// [`with_context`] (synchronize, free the crate's per-context state, pop, destroy or
/// release, report the failed releases of its handles).
///
/// # Safety
/// `raw` is alive and held as `held` says; no value made through this hold is used
/// afterwards, and for a created context no thread has it entered (entering needs a count,
/// and this is the last one). A primary context may be entered elsewhere through retains of
/// its own: this releases only the caller's.
pub(crate) unsafe fn give_up(raw: NonNull<CUctx_st>, held: Held) -> Result<()> {
    // SAFETY: the caller's promise: alive.
    if let Err(e) = unsafe { driver::ctx_push(raw.as_ptr()) } {
        // left retained, but no teardown of the crate's will free what is kept for it
        if let Held::Release(_) = held {
            unhold_primary(raw.as_ptr());
        }
        return Err(e);
    }
    tear_down_fully(raw.as_ptr(), held, 0)
}
