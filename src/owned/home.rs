//! [`OwnedContext`]: a counted, `'static` handle to a context, and entering it.

use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cuda_driver_sys::CUctx_st;

use super::handle::{Owned, sealed::Unbind};
use super::release;
use crate::context::{self, ContextFlags, ContextGuard, Device, Held};
use crate::driver::{self, CUcontext};
use crate::error::{Error, ErrorCode, Result};

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
    /// The streams that run the host functions waking awaited batches (`notifier`), made
    /// at the first armed batch.
    notifiers: Vec<usize>,
}

/// How many notifier streams a context has: batches of one stream complete in order, so
/// each stream's batches share one notifier, and streams rarely collide.
const NOTIFIERS: usize = 4;

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
            for s in kept.notifiers {
                // SAFETY: streams of this context that only the crate uses; what is still
                // queued on them (the host functions of forgotten batches) completes before
                // the driver releases them.
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
            return Err(Error::with_detail(
                "OwnedContext::unbind",
                ErrorCode::InvalidValue,
                "memory of a setup phase is freed by its phase's teardown and cannot be owned",
            ));
        }
        // SAFETY: the value is of this context (checked: `ctx` is this context, alive, and
        // the value's brand is `ctx`'s), and not of a setup phase (checked).
        Ok(unsafe { Owned::from_branded(value, self.clone()) })
    }

    /// Gives up this handle. If it was the last, the context is torn down here and the
    /// teardown's result returned (`Some`): the context's synchronization (a sticky error
    /// such as an illegal address), its destruction or release, and the releases of its
    /// handles that failed when they were dropped. If other handles remain, nothing
    /// happens and the result is `None`.
    pub fn close(self) -> Option<Result<()>> {
        let record = Arc::into_inner(self.record)?;
        if driver::in_host_fn() {
            // dropping defers it (see `Drop for Record`)
            drop(record);
            return Some(Err(driver::driver_call_refused("OwnedContext::close")));
        }
        Some(record.give_up())
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

    /// The notifier stream of this context for batches of the stream `key` (made with the
    /// others on first use). The context must be current.
    pub(crate) fn notifier(&self, key: usize) -> Result<driver::CUstream> {
        let mut kept = lock(&self.record.kept);
        while kept.notifiers.len() < NOTIFIERS {
            // non-blocking: no implicit order with the legacy stream
            kept.notifiers.push(driver::stream_create(1, 0)? as usize);
        }
        // streams are allocations at least 16 bytes apart
        Ok(kept.notifiers[(key >> 4) % NOTIFIERS] as driver::CUstream)
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

    /// The driver's handle (`CUcontext`), for calls this crate does not wrap.
    ///
    /// # Safety
    ///
    /// As for [`ContextGuard::as_raw`]: the context is not destroyed, reset or popped where
    /// this crate pushed it, the handle is not used after the last handle of the context is
    /// gone, and work queued through it uses this crate's memory as a scope would.
    pub unsafe fn as_raw(&self) -> CUcontext {
        self.record.raw.as_ptr()
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
    Error::with_detail(
        call,
        ErrorCode::InvalidContext,
        format!(
            "the owned handle belongs to context {owned:p}, the guard to context {guard:p}: enter the handle's own context (its `OwnedContext::enter`) to use it"
        ),
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
