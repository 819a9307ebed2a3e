//! Errors never lost at the end of a closure: the closure's error combined with its
//! teardown's, and the failed releases of handles dropped in the closure, kept until the
//! teardown of their context reports them.
//!
//! # The closure's error and the teardown's
//!
//! A closure-scoped entry point ([`with_context`](crate::with_context),
//! [`Stream::scope`](crate::Stream::scope), ...) runs a teardown after its closure. When
//! both fail, the plain entry points return the closure's error with the teardown's
//! attached ([`Error::teardown_error`]) if the closure's error type is
//! [`Error`]; they cannot attach it to a value of a type they do not know, so for other
//! types the `_and_teardown` entry points return both in a [`WithTeardown`](crate::WithTeardown).
//!
//! # Releases that fail in `drop`
//!
//! `Drop` cannot return an error. When releasing a handle fails there (a sticky error
//! poisons the context, and every free after it fails), the failure is recorded here,
//! keyed by the handle's context, and the teardown of the closure that owns the context
//! (`with_context`, `with_primary_context`, `with_raw_context`; not `SharedContext::enter`,
//! which only borrows it) takes the records of its context and returns an error naming
//! the first failure and how many there were. Streams and events do not know their
//! context without a driver call, which the success path must not pay for: theirs is the
//! context current on the dropping thread (their own, unless they are dropped inside a
//! nested context or on a thread that did not enter one), or, with none current, no
//! context, whose records the next teardown to run reports. Recording costs a lock, on the
//! failure path only; a teardown with nothing recorded anywhere costs one atomic load.
//! `close()` on each handle returns the error where it happens instead.
//!
//! # What the layers above keep per context
//!
//! The memory layer keeps page-locked memory per context (the bulk-copy staging), which
//! must be freed before the context is given up. This layer cannot name it, so the memory
//! layer registers what to run ([`EndHooks`], [`register_end_hooks`]) when it first keeps
//! anything for a context, and every teardown runs it at the same place:
//! [`run_before_give_up`] while the context is current, before `cuCtxDestroy`, before the
//! release of a primary context and before the pop of `with_raw_context`;
//! [`run_after_primary_release`] after a primary context's release. Before the first
//! registration there is nothing to free, and each costs one atomic load. Whether hooks are
//! registered and whether failed releases are recorded share one word ([`nothing_kept`]):
//! the teardown of `with_raw_context`, with neither, reads that one atomic for both.
//!
//! The synchronous layer (`crate::synchronous`) keeps sync streams per thread and context,
//! and a book of their pending writes. It registers its hooks ([`SyncHooks`],
//! [`register_sync_hooks`]) before it makes its first sync stream, and publishes how many
//! it made and how many live ([`count_sync_streams`]), so that a teardown ends the
//! context's sync streams made since its scope began ([`end_sync_streams`]; two atomic
//! loads while none was made since), a `ContextGuard::synchronize` waits for the pending
//! writes ([`wait_for_sync_writes`]), and a destroyed context's rings are freed
//! ([`run_after_destroy`]).

use std::any::TypeId;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use cuda_driver_sys::CUctx_st;

use crate::driver::{self, CUcontext, CUdevice};
use crate::error::{Error, Result};

/// The outcome of a closure and of its teardown, as the plain entry points return it: the
/// closure's error wins, with the teardown's attached when the error type is [`Error`]; a
/// teardown error alone becomes `E::from(error)`.
#[inline(always)]
pub(crate) fn combine<R, E: From<Error>>(
    outcome: std::result::Result<R, E>,
    torn_down: Result<()>,
) -> std::result::Result<R, E> {
    match torn_down {
        Ok(()) => outcome,
        Err(t) => Err(match outcome {
            Ok(_) => E::from(t),
            Err(e) => attach(e, t),
        }),
    }
}

/// `e` with `t` attached as its teardown error if `E` is [`Error`]; `e` unchanged
/// otherwise (the `_and_teardown` entry points exist for those types).
#[cold]
#[inline(never)]
fn attach<E: From<Error>>(e: E, t: Error) -> E {
    if type_id_ignoring_lifetimes::<E>() != TypeId::of::<Error>() {
        return e;
    }
    let e = ManuallyDrop::new(e);
    // SAFETY: `E` is `Error`: their type ids are equal, and `Error` has no lifetime
    // parameters, so the only type whose id (with lifetimes erased) equals `Error`'s is
    // `Error` itself. Reading it out of the `ManuallyDrop` moves it (never dropped twice).
    let error: Error = unsafe { std::ptr::read((&*e as *const E).cast::<Error>()) };
    E::from(error.with_teardown_error(t))
}

/// The `TypeId` of `T` with every lifetime in it replaced by `'static` (`TypeId::of`
/// itself needs `T: 'static`, which the entry points' error type is not required to be).
/// Equal to `TypeId::of::<U>()` for a `U` without lifetime parameters only if `T` is `U`.
fn type_id_ignoring_lifetimes<T: ?Sized>() -> TypeId {
    trait IdOfParameter {
        fn id(&self) -> TypeId
        where
            Self: 'static;
    }
    impl<T: ?Sized> IdOfParameter for PhantomData<T> {
        fn id(&self) -> TypeId
        where
            Self: 'static,
        {
            TypeId::of::<T>()
        }
    }
    let marker = PhantomData::<T>;
    let short: &dyn IdOfParameter = &marker;
    // SAFETY: only the trait object's lifetime bound changes, from the local borrow's to
    // `'static`; the object is a zero-sized `PhantomData` that is never read, and `id`
    // returns a `TypeId` (no reference escapes). Lifetimes do not exist in generated code:
    // the call runs `TypeId::of` for `T` with its lifetimes erased, which is all this
    // function promises (the technique of the `typeid` crate's `typeid::of`).
    let long =
        unsafe { std::mem::transmute::<&dyn IdOfParameter, &(dyn IdOfParameter + 'static)>(short) };
    long.id()
}

/// `first`'s error with `then`'s attached as its teardown error; `then`'s alone if
/// `first` succeeded (whose value is then dropped). For the steps of one teardown, which
/// all run whatever failed before, and for an operation and the pop after it.
#[inline(always)]
pub(crate) fn keep_both<T>(first: Result<T>, then: Result<()>) -> Result<T> {
    match (first, then) {
        (Ok(value), Ok(())) => Ok(value),
        (Ok(_), Err(t)) => Err(t),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(t)) => Err(e.with_teardown_error(t)),
    }
}

/// What a layer above frees of a context at its teardown (see the
/// [module documentation](self#what-the-layers-above-keep-per-context)).
pub(crate) struct EndHooks {
    /// Frees what is kept for a context the crate gives up and whose owner may destroy it
    /// next. Called with the context alive and current on the calling thread (its
    /// safety condition).
    pub(crate) before_give_up: unsafe fn(CUcontext),
    /// Called after `cuDevicePrimaryCtxRelease` of a context, the primary context of the
    /// device.
    pub(crate) after_primary_release: fn(CUcontext, CUdevice),
}

static END_HOOKS: OnceLock<EndHooks> = OnceLock::new();

/// What a teardown may have to do besides ending sync streams and popping, in one word, so
/// that a teardown with nothing of it to do reads one atomic ([`nothing_kept`]): [`HOOKS`]
/// once end hooks are registered, and above it, in units of [`ONE_FAILED`], how many entries
/// `FAILED` has (a teardown takes the lock only when there are some).
static KEPT: AtomicUsize = AtomicUsize::new(0);
#[cfg(feature = "staging")]
/// The bit of [`KEPT`] set once [`END_HOOKS`] is.
const HOOKS: usize = 1;
/// One entry of `FAILED` in [`KEPT`]'s count.
const ONE_FAILED: usize = 2;

#[cfg(feature = "staging")] // used by the bulk-copy staging alone
/// Registers the end hooks of the layer above (once: later calls change nothing). Called
/// before that layer keeps anything for a context, so that every teardown after it frees it.
pub(crate) fn register_end_hooks(hooks: EndHooks) {
    let _ = END_HOOKS.set(hooks);
    // after the hooks are set: a teardown that sees the bit finds them
    KEPT.fetch_or(HOOKS, Ordering::Release);
}

/// Whether no end hooks are registered and no failed release is recorded, for any context
/// (one atomic load): then a teardown has nothing to run but ending the context's sync
/// streams ([`end_sync_streams`]) and its pop, and
/// nothing to report after them (the fast path of `with_raw_context`'s).
#[inline(always)]
pub(crate) fn nothing_kept() -> bool {
    KEPT.load(Ordering::Acquire) == 0
}

/// Runs the registered [`EndHooks::before_give_up`], if any.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
#[inline]
pub(crate) unsafe fn run_before_give_up(raw: CUcontext) {
    // SAFETY: the caller's promise.
    unsafe { run_before_release(raw, 0) }
}

/// [`run_before_give_up`] for a scope that entered `raw` without holding it
/// (`with_raw_context`), began when the sync streams made numbered up to `mark`
/// ([`sync_streams_made`]) were made: ends only the sync streams of `raw` made since, the
/// others belonging to the holds they were made under.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
#[inline]
pub(crate) unsafe fn run_before_release(raw: CUcontext, mark: u64) {
    // SAFETY: the caller's promise, which is `end_sync_streams`'s condition.
    unsafe { end_sync_streams(raw, mark) };
    // SAFETY: the caller's promise.
    unsafe { run_end_hooks(raw) }
}

/// Runs the registered [`EndHooks::before_give_up`], if any (the second step of
/// [`run_before_release`]).
///
/// # Safety
/// `raw` is alive and current on the calling thread.
#[inline]
pub(crate) unsafe fn run_end_hooks(raw: CUcontext) {
    if let Some(hooks) = END_HOOKS.get() {
        // SAFETY: the caller's promise, which is the hook's condition.
        unsafe { (hooks.before_give_up)(raw) }
    }
}

/// Runs the registered [`EndHooks::after_primary_release`], if any, after the release of
/// `raw`, the primary context of `device`.
#[inline]
pub(crate) fn run_after_primary_release(raw: CUcontext, device: CUdevice) {
    if let Some(hooks) = END_HOOKS.get() {
        (hooks.after_primary_release)(raw, device);
    }
}

/// What the synchronous layer (`crate::synchronous`) does for a context's teardown and
/// where the crate promises every earlier write complete (see the
/// [module documentation](self#what-the-layers-above-keep-per-context)).
pub(crate) struct SyncHooks {
    /// Ends the sync streams of a context made after a mark ([`sync_streams_made`]; 0: all
    /// of them): [`end_sync_streams`] past its fast path. Called with the context alive and
    /// current on the calling thread (its safety condition).
    pub(crate) end_since: unsafe fn(CUcontext, u64),
    /// Waits on the host for every pending record of every sync stream.
    pub(crate) wait_on_host: fn() -> Result<()>,
    /// Called after `cuCtxDestroy` of a context succeeded: frees what could not be freed
    /// before (rings whose unregistering failed).
    pub(crate) after_destroy: fn(CUcontext),
    /// Whether a context has a sync stream made under a scope not yet torn down.
    #[cfg(feature = "staging")]
    pub(crate) holds: fn(CUcontext) -> bool,
}

static SYNC_HOOKS: OnceLock<SyncHooks> = OnceLock::new();
/// How many sync streams were made so far ([`count_sync_streams`]).
static SYNC_STREAMS_MADE: AtomicU64 = AtomicU64::new(0);
/// How many sync streams exist (a teardown's fast path).
static SYNC_STREAMS_LIVE: AtomicU64 = AtomicU64::new(0);
/// How many accesses of sync streams are pending ([`publish_sync_pending`]).
static SYNC_PENDING: AtomicU64 = AtomicU64::new(0);

/// Registers the synchronous layer's hooks (once: later calls change nothing). Called
/// before that layer makes a sync stream, so that every teardown after it ends it.
pub(crate) fn register_sync_hooks(hooks: SyncHooks) {
    let _ = SYNC_HOOKS.set(hooks);
}

/// Publishes the synchronous layer's counts, under its book's lock after every change:
/// `made`, how many sync streams were made so far (it only grows); `live`, how many exist.
#[inline]
pub(crate) fn count_sync_streams(made: u64, live: u64) {
    SYNC_STREAMS_LIVE.store(live, Ordering::Release);
    SYNC_STREAMS_MADE.store(made, Ordering::Release);
}

/// How many sync streams were made so far: a scope that enters a context without holding
/// it (`with_raw_context`, `with_primary_context`) takes this mark when it begins, and its
/// teardown ends only the sync streams made since ([`end_sync_streams`]). One atomic load.
#[inline]
pub(crate) fn sync_streams_made() -> u64 {
    SYNC_STREAMS_MADE.load(Ordering::Acquire)
}

/// Teardown of `raw` (alive and current): every sync stream of the context, of any thread,
/// made after `mark` ([`sync_streams_made`]; 0: all of them), is waited for on the host
/// and ended; a sync stream busy on another thread (a primary context entered on two
/// threads) is ended by its own operation. Two atomic loads while no sync stream was made
/// since `mark` (or none exists).
///
/// Every sync stream is made while the crate holds its context for a scope (one it
/// entered, or one that has a sync stream not doomed already), and the teardown of every
/// such scope ends the context's sync streams made since it began. A context
/// `with_context` created, or the owning layer holds, has all of them ended (`mark` 0:
/// none was made in it before). A `with_primary_context` or `with_raw_context` scope ends
/// only the ones made during it: the earlier ones are ended by the scope they were made
/// under, which holds the context still (an outer scope on this thread, or one on another
/// thread) or ended them already.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
#[inline(always)]
pub(crate) unsafe fn end_sync_streams(raw: CUcontext, mark: u64) {
    // the count only grows, and is published under the book's lock after every making: a
    // sync stream of `raw` made since `mark` on any thread was made before this teardown
    // (its scope is inside the one ending here, or began after `mark`) and is counted
    if sync_streams_made() <= mark || SYNC_STREAMS_LIVE.load(Ordering::Acquire) == 0 {
        return;
    }
    // a sync stream was made, so the hooks were registered before it (and published
    // before the count read above)
    if let Some(hooks) = SYNC_HOOKS.get() {
        // SAFETY: the caller's promise, which is the hook's condition.
        unsafe { (hooks.end_since)(raw, mark) }
    }
}

/// Publishes how many accesses of sync streams are pending, for the readers without the
/// synchronous layer's book ([`sync_writes_settled`]). Called under the book's lock after
/// every change.
#[inline]
pub(crate) fn publish_sync_pending(pending: u64) {
    SYNC_PENDING.store(pending, Ordering::Release);
}

/// Whether no synchronous write of the crate is pending: no work needs to wait for any
/// sync stream. One atomic load.
#[inline(always)]
pub(crate) fn sync_writes_settled() -> bool {
    SYNC_PENDING.load(Ordering::Acquire) == 0
}

/// Waits on the host for every synchronous write of the crate still pending on the GPU, in
/// any context (`ContextGuard::synchronize`, a setup phase's frees, every scope's end): one
/// atomic load while none is pending ([`sync_writes_settled`]).
#[inline(always)]
pub(crate) fn wait_for_sync_writes() -> Result<()> {
    if sync_writes_settled() {
        return Ok(());
    }
    wait_for_pending_sync_writes()
}

/// [`wait_for_sync_writes`] past its fast path: the synchronous layer's wait (something is
/// pending, so the hooks were registered before it).
#[cold]
#[inline(never)]
fn wait_for_pending_sync_writes() -> Result<()> {
    match SYNC_HOOKS.get() {
        Some(hooks) => (hooks.wait_on_host)(),
        None => Ok(()),
    }
}

/// Runs the registered [`SyncHooks::after_destroy`], if any, after `cuCtxDestroy` of `raw`
/// succeeded.
#[inline]
pub(crate) fn run_after_destroy(raw: CUcontext) {
    if let Some(hooks) = SYNC_HOOKS.get() {
        (hooks.after_destroy)(raw);
    }
}

#[cfg(feature = "staging")] // used by the bulk-copy staging alone
/// Whether `raw` has a sync stream made under a scope that has not torn down yet
/// ([`SyncHooks::holds`]).
pub(crate) fn sync_streams_hold(raw: CUcontext) -> bool {
    SYNC_HOOKS.get().is_some_and(|hooks| (hooks.holds)(raw))
}

/// The failed releases of one context (or of no known context), not yet reported.
struct Failed {
    /// The context's handle as a number; 0 for no known context.
    ctx: usize,
    /// The first failure, and what kind of handle it was.
    first: Error,
    what: &'static str,
    /// Every failure so far, the first included.
    count: usize,
}

/// The failed releases not yet reported; how many entries it has is counted in [`KEPT`].
static FAILED: Mutex<Vec<Failed>> = Mutex::new(Vec::new());

/// Records that releasing a `what` of context `ctx` (`None`: not known) failed in `drop`,
/// for the teardown of the context to report. Called on the failure path only.
#[cold]
#[inline(never)]
pub(crate) fn record_failed_release(ctx: Option<NonNull<CUctx_st>>, what: &'static str, e: Error) {
    let key = ctx.map_or(0, |c| c.as_ptr() as usize);
    // a poisoned lock still holds a consistent list: every critical section is a push, a
    // count or a removal
    let mut failed = FAILED.lock().unwrap_or_else(PoisonError::into_inner);
    match failed.iter_mut().find(|f| f.ctx == key) {
        Some(f) => f.count = f.count.saturating_add(1),
        None => {
            failed.push(Failed {
                ctx: key,
                first: e,
                what,
                count: 1,
            });
            KEPT.fetch_add(ONE_FAILED, Ordering::Release);
        }
    }
}

/// The context current on the calling thread, if any: the context a failed release of a
/// stream or an event is charged to (see the [module documentation](self)).
#[cold]
pub(crate) fn current_context() -> Option<NonNull<CUctx_st>> {
    driver::ctx_get_current().ok().and_then(NonNull::new)
}

/// Whether any failed release is recorded, for any context (one atomic load): a teardown
/// with none to take skips [`take_failed_releases`].
#[inline(always)]
pub(crate) fn any_failed_releases() -> bool {
    KEPT.load(Ordering::Acquire) >= ONE_FAILED
}

/// Takes the failed releases recorded for `ctx`, and those of no known context, as one
/// error (each kind's first failure, the count in its detail). Called by the teardown of
/// the closure that owns `ctx`, on every path, so that no record outlives its context
/// (whose handle a later context may get again).
#[inline]
pub(crate) fn take_failed_releases(ctx: CUcontext) -> Result<()> {
    if !any_failed_releases() {
        return Ok(());
    }
    take_slow(ctx as usize)
}

#[cold]
#[inline(never)]
fn take_slow(key: usize) -> Result<()> {
    let mut failed = FAILED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut taken = Ok(());
    let mut i = 0;
    while i < failed.len() {
        if failed[i].ctx == key || failed[i].ctx == 0 {
            let f = failed.remove(i);
            KEPT.fetch_sub(ONE_FAILED, Ordering::Release);
            taken = keep_both(taken, Err(report(f)));
        } else {
            i += 1;
        }
    }
    taken
}

/// The error a teardown returns for the failed releases `f`.
fn report(f: Failed) -> Error {
    let Failed {
        ctx,
        first,
        what,
        count,
    } = f;
    let cause = first
        .detail()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    let whose = if ctx == 0 {
        " (dropped where no context was current, so reported by the next teardown)"
    } else {
        ""
    };
    let how_many = match count {
        1 => "the only handle whose release failed in `drop`".to_owned(),
        n => format!("the first of {n} handles whose release failed in `drop`"),
    };
    Error::with_detail(
        first.call(),
        first.code(),
        format!(
            "`{what}::drop` failed{whose}{cause}: {how_many}; `close()` returns such an error where it happens"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn the_type_id_ignoring_lifetimes_tells_error_from_other_types() {
        fn id_of<T>(_: &T) -> TypeId {
            type_id_ignoring_lifetimes::<T>()
        }
        let local = String::from("borrowed");
        let borrowed: &str = &local;
        assert_eq!(
            id_of(&Error::new("x", ErrorCode::Unknown)),
            TypeId::of::<Error>()
        );
        assert_ne!(id_of(&borrowed), TypeId::of::<Error>());
        assert_eq!(id_of(&borrowed), TypeId::of::<&'static str>());
        assert_ne!(
            type_id_ignoring_lifetimes::<Box<dyn std::error::Error>>(),
            TypeId::of::<Error>()
        );
    }

    #[test]
    fn combine_keeps_both_errors_for_error_and_the_closures_for_other_types() {
        let closure = Error::new("my step", ErrorCode::InvalidInput);
        let teardown = Error::new("cuCtxSynchronize", ErrorCode::IllegalAddress);
        // both failed, E = Error: both reach the caller
        let e = combine::<(), Error>(Err(closure.clone()), Err(teardown.clone())).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(e.teardown_error(), Some(&teardown));
        // only the teardown failed: its error, converted
        let e = combine::<u32, Error>(Ok(7), Err(teardown.clone())).unwrap_err();
        assert_eq!(e, teardown);
        // only the closure failed
        let e = combine::<(), Error>(Err(closure.clone()), Ok(())).unwrap_err();
        assert_eq!(e, closure);
        assert_eq!(combine::<u32, Error>(Ok(7), Ok(())), Ok(7));
        // another error type: the closure's error, unchanged
        let e = combine::<(), Box<dyn std::error::Error>>(Err("mine".into()), Err(teardown))
            .unwrap_err();
        assert_eq!(e.to_string(), "mine");
    }

    #[test]
    fn keep_both_chains_in_order() {
        let a = Error::new("cuCtxSynchronize", ErrorCode::IllegalAddress);
        let b = Error::new("cuCtxDestroy_v2", ErrorCode::IllegalAddress);
        assert_eq!(keep_both(Ok(()), Ok(())), Ok(()));
        assert_eq!(keep_both::<()>(Err(a.clone()), Ok(())), Err(a.clone()));
        assert_eq!(keep_both(Ok(5), Ok(())), Ok(5));
        assert_eq!(keep_both(Ok(5), Err(a.clone())), Err(a.clone()));
        assert_eq!(keep_both(Ok(()), Err(b.clone())), Err(b.clone()));
        let both = keep_both::<()>(Err(a.clone()), Err(b.clone())).unwrap_err();
        assert_eq!(both.call(), "cuCtxSynchronize");
        assert_eq!(both.teardown_error(), Some(&b));
    }

    #[test]
    fn failed_releases_are_reported_once_by_their_contexts_teardown() {
        // fake context handles: only compared, never passed to the driver
        let (a, b) = (0x1000 as CUcontext, 0x2000 as CUcontext);
        let code = ErrorCode::IllegalAddress;
        record_failed_release(
            NonNull::new(a),
            "DeviceBuffer",
            Error::new("cuMemFreeAsync", code),
        );
        record_failed_release(
            NonNull::new(a),
            "Module",
            Error::new("cuModuleUnload", code),
        );
        record_failed_release(
            NonNull::new(a),
            "DeviceBuffer",
            Error::new("cuMemFreeAsync", code),
        );
        record_failed_release(
            NonNull::new(b),
            "Stream",
            Error::with_detail("cuStreamDestroy_v2", code, "why"),
        );
        let e = take_failed_releases(a).unwrap_err();
        assert_eq!((e.call(), e.code()), ("cuMemFreeAsync", code));
        assert_eq!(
            e.detail(),
            Some(
                "`DeviceBuffer::drop` failed: the first of 3 handles whose release failed in `drop`; `close()` returns such an error where it happens"
            )
        );
        assert_eq!(e.teardown_errors().count(), 0);
        assert_eq!(take_failed_releases(a), Ok(()), "reported once");
        let e = take_failed_releases(b).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cuStreamDestroy_v2 failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered): `Stream::drop` failed (why): the only handle whose release failed in `drop`; `close()` returns such an error where it happens"
        );
        assert_eq!(take_failed_releases(b), Ok(()));
        // no context known: the next teardown reports it, whichever context it ends
        record_failed_release(None, "Event", Error::new("cuEventDestroy_v2", code));
        let e = take_failed_releases(b).unwrap_err();
        assert_eq!(e.call(), "cuEventDestroy_v2");
        assert!(
            e.detail()
                .unwrap()
                .starts_with("`Event::drop` failed (dropped where no context was current"),
            "{e}"
        );
        assert_eq!(take_failed_releases(a), Ok(()));
    }
}
