//! The run-time rules of SM partitions, which every way into a context checks: which
//! devices are being partitioned (a second split of one would overlap the first), what is
//! refused inside a partitioned closure (every context but the partitions: `refuse_inside`)
//! and on a partitioned device (`refuse_partitioned`), which partitions this thread entered
//! (and their green contexts, for `cuGreenCtxStreamCreate`), which thread entered each
//! partition, and what a partition's values may do on the other threads.
//!
//! A partition's values on other threads. The driver lets a green context be used from one
//! thread at a time ("a green context can be current to only one thread at a time. There
//! is no internal synchronization to make API calls accessing the same green context from
//! multiple threads work", `cuGreenCtxCreate`; "This handle can be used safely from only
//! one CPU thread at a time", `CUgreenCtx`), and a partition's thread uses it for the whole
//! of `SmGroup::enter`. Its streams, events, buffers and modules are `Send` all the same
//! (what a partition makes has the types of what a plain context makes), so they reach
//! scoped threads spawned inside the partition's closure. On such a thread:
//!
//! * an operation on a partition's stream or event is refused
//!   ([`refuse_foreign_handle`]: `ErrorCode::NotPermitted`), as pushing the partition's
//!   context is ([`refuse_foreign`], which every operation on its memory and modules
//!   meets through `in_context`);
//! * a drop of a partition's stream, event, buffer or module does not reach the driver
//!   either: its release is parked ([`release_handle`], [`release_in`]) and run by the
//!   partition's own thread when the partition ends ([`run_parked`], from its teardown,
//!   with its context current), neither refused nor leaked.
//!
//! Nothing is parked after that: a value of a partition is branded `'p`, which no code
//! outside `SmGroup::enter`'s closure can name, so every thread that holds one is a scoped
//! thread joined before the closure returns, and the teardown runs after it. Pinned by
//! the type checker for the ways out of the closure: a thread of a scope opened outside
//! it (here in the partitioned closure),
//!
//! ```compile_fail,E0521
//! use cuda_brand::prelude::*;
//! use cuda_brand::with_partitions;
//!
//! # fn main() -> cuda_brand::Result<()> {
//! # let device = Device::get(0)?;
//! with_partitions(&device, |sms| {
//!     let (part, _) = sms.split(8)?;
//!     std::thread::scope(|outer| {
//!         part.enter(|p| {
//!             let buf = p.zeroed::<u32>(4)?;
//!             // dropped on a thread the partition's closure does not join: does not compile
//!             outer.spawn(move || drop(buf));
//!             Ok::<_, Error>(())
//!         })
//!     })
//! })
//! # }
//! ```
//!
//! a channel made outside it,
//!
//! ```compile_fail,E0521
//! use cuda_brand::prelude::*;
//! use cuda_brand::with_partitions;
//!
//! # fn main() -> cuda_brand::Result<()> {
//! # let device = Device::get(0)?;
//! with_partitions(&device, |sms| {
//!     let (part, _) = sms.split(8)?;
//!     let (send, receive) = std::sync::mpsc::channel();
//!     part.enter(|p| {
//!         // the buffer leaves the partition's closure: does not compile
//!         send.send(p.zeroed::<u32>(4)?).unwrap();
//!         Ok::<_, Error>(())
//!     })?;
//!     std::thread::scope(|t| {
//!         t.spawn(move || drop(receive.recv()));
//!     });
//!     Ok(())
//! })
//! # }
//! ```
//!
//! and a type-erased box kept outside it (the owning layer takes no partition's guard:
//! `bind` and `unbind` take a plain one).
//!
//! ```compile_fail,E0521
//! use cuda_brand::prelude::*;
//! use cuda_brand::with_partitions;
//!
//! # fn main() -> cuda_brand::Result<()> {
//! # let device = Device::get(0)?;
//! with_partitions(&device, |sms| {
//!     let (part, _) = sms.split(8)?;
//!     let mut kept: Vec<Box<dyn Send>> = Vec::new();
//!     part.enter(|p| {
//!         kept.push(Box::new(p.new_stream()?)); // outlives the partition: does not compile
//!         Ok::<_, Error>(())
//!     })?;
//!     std::thread::scope(|t| {
//!         t.spawn(move || drop(kept));
//!     });
//!     Ok(())
//! })
//! # }
//! ```
//!
//! Both checks are one atomic load while no partition lives (the process-wide lists are
//! empty).

use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use cuda_driver_sys::CUctx_st;

use crate::driver::{self, CUcontext, CUdevice, CUgreenCtx};
use crate::error::{Error, ErrorCode, Result};

thread_local! {
    /// Its address is this thread's [`thread_token`].
    static TOKEN: u8 = const { 0 };
    /// The entries of [`HANDLES`] this thread made (of partitions it entered), so that the
    /// partition's own thread passes [`refuse_foreign_handle`] without the list's lock.
    static MINE: RefCell<Vec<(usize, usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// A process-wide list behind a lock, with its length kept beside it for the fast path:
/// `is_empty` is one atomic load, so the checks made on every entry into a context cost
/// that alone while the list is empty. The length is set from the list's own, under the
/// lock, by every change ([`Listed::change`]).
pub(super) struct Listed<T> {
    list: Mutex<Vec<T>>,
    len: AtomicUsize,
}

impl<T> Listed<T> {
    pub(super) const fn new() -> Self {
        Listed {
            list: Mutex::new(Vec::new()),
            len: AtomicUsize::new(0),
        }
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the list under its lock, then records its length.
    pub(super) fn change<R>(&self, f: impl FnOnce(&mut Vec<T>) -> R) -> R {
        let mut list = self.lock();
        let r = f(&mut list);
        self.len.store(list.len(), Ordering::Release);
        r
    }
}

/// The partitions alive in the process: (`CUcontext` form, [`thread_token`] of the thread
/// that entered it) ([`refuse_foreign`] reads whether there are any alone while there are
/// none). A partition's values (streams, buffers, events, modules) are `Send` and `Sync`,
/// so they reach scoped threads; the driver lets a green context be current on one thread
/// at a time ("There is no internal synchronization to make API calls accessing the same
/// green context from multiple threads work", `cuGreenCtxCreate`), and the partition's
/// thread has it current for the whole of `SmGroup::enter`.
pub(super) static OWNERS: Listed<(usize, usize)> = Listed::new();

/// This thread, as a number no other live thread has: the address of its `TOKEN` (a
/// `const` thread-local without a destructor, so readable at any time, also while other
/// thread-locals are destroyed). A record holding it is removed before its thread leaves
/// `SmGroup::enter`, so an address reused by a later thread is never mistaken for it.
pub(super) fn thread_token() -> usize {
    TOKEN.with(|t| std::ptr::from_ref(t) as usize)
}

/// Whether `ctx` is the `CUcontext` form of a partition alive now (its `SmGroup::enter`
/// takes it out of the list before it is destroyed). One atomic load while none lives.
pub(crate) fn is_partition(ctx: CUcontext) -> bool {
    !OWNERS.is_empty() && OWNERS.lock().iter().any(|&(raw, _)| raw == ctx as usize)
}

/// `Err` if `ctx` is the `CUcontext` form of a partition entered on another thread: the
/// crate is about to make it current here (`in_context`), where the driver would have one
/// green context current on two threads. Called where a context is pushed for an
/// operation; one atomic load while no partition lives.
#[inline]
pub(crate) fn refuse_foreign(ctx: CUcontext) -> Result<()> {
    refuse_foreign_call("cuCtxPushCurrent_v2", ctx)
}

/// Whether no partition is alive in the process (one atomic load).
#[inline]
pub(super) fn none_alive() -> bool {
    OWNERS.is_empty()
}

/// Whether `ctx` is the `CUcontext` form of a partition alive now that another thread
/// entered (its values are refused here: `confined`).
pub(super) fn is_foreign(ctx: CUcontext) -> bool {
    let me = thread_token();
    OWNERS
        .lock()
        .iter()
        .any(|&(raw, owner)| raw == ctx as usize && owner != me)
}

/// Records `ctx` (a made-up `CUcontext` form) as a partition entered on this thread, for
/// the unit tests of `confined`.
#[cfg(test)]
pub(super) fn enter_for_test(ctx: CUcontext) {
    OWNERS.change(|owners| owners.push((ctx as usize, thread_token())));
}

/// Ends what [`enter_for_test`] began.
#[cfg(test)]
pub(super) fn leave_for_test(ctx: CUcontext) {
    OWNERS.change(|owners| owners.retain(|&(c, _)| c != ctx as usize));
}

/// [`refuse_foreign`] for a call (`call`) that reaches the driver with memory of the
/// context `ctx` without making it current (`ManagedBuffer::advise`), as a function's
/// attributes do ([`refuse_foreign_handle`]). One atomic load while no partition lives.
#[inline]
pub(crate) fn refuse_foreign_call(call: &'static str, ctx: CUcontext) -> Result<()> {
    if OWNERS.is_empty() {
        Ok(())
    } else {
        refuse_foreign_slow_in(call, ctx)
    }
}

#[inline(never)]
fn refuse_foreign_slow_in(call: &'static str, ctx: CUcontext) -> Result<()> {
    if is_foreign(ctx) {
        return Err(Error::with_detail(
            call,
            ErrorCode::NotPermitted,
            "the context of an SM partition is made current on the thread that entered it \
             only (the driver lets a green context be current on one thread at a time, with \
             no internal synchronization): use the partition's streams, buffers, events and \
             modules on that thread, or give this thread a partition of its own",
        ));
    }
    Ok(())
}

// How many partitioned closures (of `with_partitions` and of `SmGroup::enter`) run on this
// thread is counted in the driver layer's thread-local word, beside the host-function flag
// (`driver::partitioned_closures`), so that entering a context checks both in one load.
thread_local! {
    /// The partitions entered on this thread: (`CUcontext` form, green context, SMs).
    pub(super) static ENTERED: RefCell<Vec<(usize, usize, u32)>> = const { RefCell::new(Vec::new()) };
}

/// The devices a `with_partitions` closure is splitting, process-wide
/// ([`refuse_partitioned`] reads whether there are any alone while there are none).
static PARTITIONED: Listed<CUdevice> = Listed::new();

/// `Err` naming `call` if a partitioned closure runs on this thread: inside one, no
/// context but the partitions may be entered, so that no work is queued outside every
/// partition (checked by `with_context` and its forms, `with_raw_context`,
/// `SharedContext::enter` and the owning layer's `enter`). One thread-local load.
#[inline]
pub(crate) fn refuse_inside(call: &'static str) -> Result<()> {
    if driver::partitioned_closures() == 0 {
        Ok(())
    } else {
        Err(inside(call))
    }
}

/// Where a context of `device` is about to be entered (`with_context` and its forms):
/// [`refuse_inside`], and `Err` naming `call` if any thread's `with_partitions` closure is
/// splitting `device`. A scoped thread spawned inside a partitioned closure is not inside
/// it on its own thread, so the thread-local check alone would let it enter a plain context
/// of the device and queue work on every SM. One thread-local load and one atomic load
/// while no device is partitioned.
#[inline]
pub(crate) fn refuse_partitioned(call: &'static str, device: CUdevice) -> Result<()> {
    refuse_inside(call)?;
    if PARTITIONED.is_empty() {
        Ok(())
    } else {
        refuse_device(call, device)
    }
}

/// Whether no device is being partitioned (one atomic load).
#[inline]
pub(crate) fn none_partitioned() -> bool {
    PARTITIONED.is_empty()
}

/// Whether [`refuse_partitioned_context`] would pass without looking at the context, and
/// the driver's push would pass its host-function check: no partitioned closure and no host
/// function of the crate runs on this thread (one thread-local load for both,
/// [`driver::refuses_nothing`]), and no device is partitioned (one atomic load). The fast
/// path of entering a context (`enter::push_to_enter`); when it is false, the full checks
/// run.
#[inline(always)]
pub(crate) fn nothing_refused() -> bool {
    driver::refuses_nothing() && PARTITIONED.is_empty()
}

#[cold]
#[inline(never)]
pub(super) fn refuse_device(call: &'static str, device: CUdevice) -> Result<()> {
    if !PARTITIONED.lock().contains(&device) {
        return Ok(());
    }
    Err(Error::with_detail(
        call,
        ErrorCode::NotPermitted,
        "the device is partitioned (a `with_partitions` closure is running, on this thread or \
         another): work of another context on it would run outside every partition, on SMs a \
         partition counts on; make it a partition's work, or do it before `with_partitions` \
         begins or after it returns",
    ))
}

#[cold]
#[inline(never)]
fn inside(call: &'static str) -> Error {
    Error::with_detail(
        call,
        ErrorCode::NotPermitted,
        "called inside a partitioned closure (`with_partitions`): work of this context would \
         run outside every partition, on SMs a partition counts on; make it a partition's \
         work, or do it before `with_partitions` or after it returns",
    )
}

/// The green context of the partition whose `CUcontext` form is `raw`, if it was entered
/// on this thread (a partition's guard never leaves its thread).
pub(crate) fn green_of(raw: CUcontext) -> Option<CUgreenCtx> {
    entered(raw).map(|(green, _)| green)
}

/// The green context and the SM count of the partition whose `CUcontext` form is `raw`, if
/// it was entered on this thread.
pub(super) fn entered(raw: CUcontext) -> Option<(CUgreenCtx, u32)> {
    ENTERED.with(|e| {
        e.borrow()
            .iter()
            .find(|&&(ctx, _, _)| ctx == raw as usize)
            .map(|&(_, green, sms)| (green as CUgreenCtx, sms))
    })
}

/// Records that `device` is being partitioned, or refuses if it already is.
pub(super) fn claim(device: &super::Device) -> Result<()> {
    PARTITIONED.change(|devices| {
        if devices.contains(&device.as_raw()) {
            return Err(Error::with_detail(
                "with_partitions",
                ErrorCode::NotPermitted,
                format!(
                    "device {} is being partitioned already (by another `with_partitions` of \
                     this process): a second split would overlap the first's partitions",
                    device.ordinal()
                ),
            ));
        }
        devices.push(device.as_raw());
        Ok(())
    })
}

pub(super) fn unclaim(dev: CUdevice) {
    PARTITIONED.change(|devices| devices.retain(|&d| d != dev));
}

/// The streams, events and functions of the partitions alive now: (handle, the
/// partition's `CUcontext` form, the module of a function or 0). A stream or event is
/// listed from its creation (on the partition's thread) until its destruction, which
/// removes it before the driver call, so that a handle of the same address made later is
/// never mistaken for it; a function from its lookup until its module's unload.
static HANDLES: Listed<(usize, usize, usize)> = Listed::new();

/// A release parked for a partition's thread: what to release, and the driver calls.
type Release = (&'static str, Box<dyn FnOnce() -> Result<()> + Send>);

/// Releases parked by other threads, with the `CUcontext` form of their partition.
static PARKED: Mutex<Vec<(usize, Release)>> = Mutex::new(Vec::new());

/// Records `handle`, a stream or event just made in the partition whose `CUcontext` form
/// is `ctx` (on the partition's thread).
pub(crate) fn register_handle(handle: usize, ctx: CUcontext) {
    let entry = (handle, ctx as usize, 0);
    HANDLES.change(|handles| handles.push(entry));
    MINE.with(|mine| mine.borrow_mut().push(entry));
}

/// Whether this thread made `handle`'s entry.
fn is_mine(handle: usize) -> bool {
    MINE.with(|mine| mine.borrow().iter().any(|&(h, _, _)| h == handle))
}

/// Forgets this thread's entries that `keep` refuses.
fn forget_mine(keep: impl Fn(&(usize, usize, usize)) -> bool) {
    MINE.with(|mine| mine.borrow_mut().retain(keep));
}

/// Records `function`, just looked up in `module` of the context `ctx`, where `ctx` is a
/// partition's (once per function). One atomic load while no partition lives.
#[inline]
pub(crate) fn register_function(function: usize, module: usize, ctx: CUcontext) {
    if !is_partition(ctx) {
        return;
    }
    let entry = (function, ctx as usize, module);
    let new = HANDLES.change(|handles| {
        let new = !handles.iter().any(|&(h, _, _)| h == function);
        if new {
            handles.push(entry);
        }
        new
    });
    if new {
        MINE.with(|mine| mine.borrow_mut().push(entry));
    }
}

/// Forgets the functions of `module` (before its unload). One atomic load while no
/// partition has a handle listed.
#[inline]
pub(crate) fn forget_functions_of(module: usize) {
    if !HANDLES.is_empty() {
        HANDLES.change(|handles| handles.retain(|&(_, _, m)| m != module));
        forget_mine(|&(_, _, m)| m != module);
    }
}

/// The partition `handle` was made in, where it is a listed handle.
fn partition_of(handle: usize) -> Option<usize> {
    HANDLES
        .lock()
        .iter()
        .find(|&&(h, _, _)| h == handle)
        .map(|&(_, ctx, _)| ctx)
}

/// `Err` (`NotPermitted`, naming `call`) where `handle` is a stream or event of a partition
/// entered on another thread. One atomic load while no partition has a stream or event.
#[inline]
pub(crate) fn refuse_foreign_handle(call: &'static str, handle: usize) -> Result<()> {
    if HANDLES.is_empty() || is_mine(handle) {
        Ok(())
    } else {
        refuse_foreign_handle_slow(call, handle)
    }
}

#[cold]
#[inline(never)]
fn refuse_foreign_handle_slow(call: &'static str, handle: usize) -> Result<()> {
    match partition_of(handle) {
        Some(ctx) if is_foreign(ctx as CUcontext) => Err(Error::with_detail(
            call,
            ErrorCode::NotPermitted,
            "a stream, event or function of an SM partition is used on the thread that \
             entered the partition only (the driver lets a green context be used from one \
             thread at a time, with no internal synchronization): use it on that thread, or \
             give this thread a partition of its own",
        )),
        _ => Ok(()),
    }
}

/// Releases `handle` (a stream or event; `release` makes the driver call): now, unless it
/// is a partition's and this thread is not the partition's, which then runs `release` at
/// the partition's end (`None` here). The handle leaves the list before `release` runs.
#[inline]
pub(crate) fn release_handle<F>(handle: usize, what: &'static str, release: F) -> Option<Result<()>>
where
    F: FnOnce() -> Result<()> + Send + 'static,
{
    if HANDLES.is_empty() {
        return Some(release());
    }
    release_handle_slow(handle, what, release)
}

#[cold]
#[inline(never)]
fn release_handle_slow<F>(handle: usize, what: &'static str, release: F) -> Option<Result<()>>
where
    F: FnOnce() -> Result<()> + Send + 'static,
{
    let parked = HANDLES.change(|handles| {
        let i = handles.iter().position(|&(h, _, _)| h == handle)?;
        let ctx = handles[i].1;
        if is_foreign(ctx as CUcontext) {
            Some(ctx)
        } else {
            handles.swap_remove(i);
            None
        }
    });
    if parked.is_none() {
        forget_mine(|&(h, _, _)| h != handle);
    }
    match parked {
        Some(ctx) => {
            // stays listed until the partition's thread delists it at the partition's end,
            // just before its release (`run_parked`): its address is not reused before,
            // and other threads are still refused its use
            park(ctx, what, Box::new(release));
            None
        }
        None => Some(release()),
    }
}

/// Releases a value of the context `ctx` (a buffer's memory, a module; `release` makes
/// the driver calls, given `ctx`, which it makes current through `in_context`): now,
/// unless `ctx` is a partition entered on another thread, whose thread then runs `release`
/// at the partition's end (`None` here).
#[inline]
pub(crate) fn release_in<F>(
    ctx: NonNull<CUctx_st>,
    what: &'static str,
    release: F,
) -> Option<Result<()>>
where
    F: FnOnce(NonNull<CUctx_st>) -> Result<()> + Send + 'static,
{
    if none_alive() || !is_foreign(ctx.as_ptr()) {
        return Some(release(ctx));
    }
    let raw = ctx.as_ptr() as usize;
    let parked = move || {
        // the partition's context, as it was given (non-null), alive until its end
        let ctx = NonNull::new(raw as CUcontext)
            .ok_or(Error::new("release_in", ErrorCode::InvalidContext))?;
        release(ctx)
    };
    park(raw, what, Box::new(parked));
    None
}

#[cold]
fn park(ctx: usize, what: &'static str, release: Box<dyn FnOnce() -> Result<()> + Send>) {
    PARKED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((ctx, (what, release)));
}

/// Runs the releases other threads parked for the partition whose `CUcontext` form is
/// `ctx`, on its own thread with `ctx` current (its teardown, before the synchronization),
/// after forgetting every handle of it still listed: the parked ones (each leaves the list
/// before its release runs, as an unparked one does, since once the driver destroyed it
/// its address may be another handle's at once, which a listing left behind would take for
/// this partition's: refused on its own thread, or parked for this partition after its
/// releases were taken) and those forgotten with `mem::forget` (the green context's
/// destruction reclaims them). No value of the partition is left to use or drop them: `f`
/// has returned. Returns each failed release, for the teardown to record.
pub(crate) fn run_parked(ctx: CUcontext) -> Vec<(&'static str, Error)> {
    if !HANDLES.is_empty() {
        HANDLES.change(|handles| handles.retain(|&(_, c, _)| c != ctx as usize));
        forget_mine(|&(_, c, _)| c != ctx as usize);
    }
    let mine: Vec<Release> = {
        let mut parked = PARKED.lock().unwrap_or_else(PoisonError::into_inner);
        if parked.is_empty() {
            Vec::new()
        } else {
            let (mine, others) = std::mem::take(&mut *parked)
                .into_iter()
                .partition(|&(c, _)| c == ctx as usize);
            *parked = others;
            mine.into_iter().map(|(_, release)| release).collect()
        }
    };
    // outside the lock: a release takes other locks (the lane record's)
    mine.into_iter()
        .filter_map(|(what, release)| release().err().map(|e| (what, e)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A partition's handle is refused and its release parked on every thread but the
    /// partition's; the partition's own thread releases it at once; the parked release
    /// runs when the partition's thread ends the partition, which also forgets its handles.
    /// (Handles here are made-up numbers: nothing reaches the driver.)
    fn nn(ctx: CUcontext) -> NonNull<CUctx_st> {
        NonNull::new(ctx).unwrap()
    }

    #[test]
    fn a_partitions_handle_is_parked_on_other_threads_and_released_by_its_own() {
        let ctx = || 0x7a_5000 as CUcontext;
        let (stream, event) = (0x7a_5100_usize, 0x7a_5200_usize);
        enter_for_test(ctx());
        register_handle(stream, ctx());
        register_handle(event, ctx());
        let released = Arc::new(AtomicUsize::new(0));
        assert!(refuse_foreign_handle("here", stream).is_ok());
        assert!(refuse_foreign_call("here", ctx()).is_ok(), "its own thread");
        std::thread::scope(|s| {
            s.spawn(|| {
                let e = refuse_foreign_handle("Stream::synchronize", stream).unwrap_err();
                assert_eq!(
                    (e.call(), e.code()),
                    ("Stream::synchronize", ErrorCode::NotPermitted)
                );
                assert!(
                    refuse_foreign_handle("other", 0x7a_5300).is_ok(),
                    "not listed"
                );
                // a call on the partition's memory that makes no context current
                let e = refuse_foreign_call("ManagedBuffer::advise", ctx()).unwrap_err();
                assert_eq!(
                    (e.call(), e.code()),
                    ("ManagedBuffer::advise", ErrorCode::NotPermitted)
                );
                let r = Arc::clone(&released);
                let parked = release_handle(stream, "Stream", move || {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
                assert!(parked.is_none(), "a foreign drop is parked");
                let r = Arc::clone(&released);
                let parked = release_in(nn(ctx()), "DeviceBuffer", move |_| {
                    r.fetch_add(10, Ordering::SeqCst);
                    Err(Error::new("cuMemFreeAsync", ErrorCode::InvalidInput))
                });
                assert!(parked.is_none());
                // another thread is still refused the parked stream
                assert!(refuse_foreign_handle("again", stream).is_err());
            });
        });
        assert_eq!(released.load(Ordering::SeqCst), 0, "nothing released yet");
        // the partition's own thread releases its event now
        let r = Arc::clone(&released);
        let now = release_handle(event, "Event", move || {
            r.fetch_add(100, Ordering::SeqCst);
            Ok(())
        });
        assert!(matches!(now, Some(Ok(()))));
        assert_eq!(released.load(Ordering::SeqCst), 100);
        assert_eq!(partition_of(event), None, "delisted before its release");
        let failed = run_parked(ctx());
        assert_eq!(released.load(Ordering::SeqCst), 111);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].0, "DeviceBuffer");
        assert_eq!(
            partition_of(stream),
            None,
            "the partition's handles are forgotten"
        );
        assert!(run_parked(ctx()).is_empty(), "each release runs once");
        leave_for_test(ctx());
        // no partition: released at once on any thread
        let r = Arc::clone(&released);
        assert!(
            release_in(nn(ctx()), "DeviceBuffer", move |_| {
                r.fetch_add(1000, Ordering::SeqCst);
                Ok(())
            })
            .is_some()
        );
        assert_eq!(released.load(Ordering::SeqCst), 1111);
    }

    /// A parked handle leaves the list before its release runs (as an unparked one does):
    /// once the driver has destroyed it, its address may be another's at once, and a
    /// listing left behind would take the new handle for the old partition's. Here, while
    /// the partition's thread runs its parked releases, the address of each released
    /// handle is made again: by another partition's thread, which then drops its own
    /// stream, and by a thread of no partition, which uses its own stream. Neither may be
    /// refused or parked for the ending partition (a release parked then would never run,
    /// or run at the end of a later partition that the old one's address is reused for).
    #[test]
    fn a_parked_handle_leaves_the_list_before_its_release_runs() {
        let (a, b) = (0x7c_1000_usize, 0x7c_2000_usize);
        let (stream, event) = (0x7c_1100_usize, 0x7c_1200_usize);
        enter_for_test(a as CUcontext);
        register_handle(stream, a as CUcontext);
        register_handle(event, a as CUcontext);
        // what the threads that reuse the addresses saw: (released now, refused)
        let seen = Arc::new(Mutex::new(Vec::<(&str, bool)>::new()));
        let late = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|s| {
            s.spawn(|| {
                // a scoped thread of the partition drops both: parked
                let (seen_b, late_b) = (Arc::clone(&seen), Arc::clone(&late));
                let parked = release_handle(stream, "Stream", move || {
                    // destroyed: another partition's thread makes a stream at the address
                    // and drops it while the partition `a` still ends
                    std::thread::scope(|s| {
                        s.spawn(|| {
                            enter_for_test(b as CUcontext);
                            register_handle(stream, b as CUcontext);
                            let r = Arc::clone(&late_b);
                            let now = release_handle(stream, "Stream", move || {
                                r.fetch_add(1, Ordering::SeqCst);
                                Ok(())
                            });
                            seen_b
                                .lock()
                                .unwrap()
                                .push(("b's own stream released now", now.is_some()));
                            leave_for_test(b as CUcontext);
                        });
                    });
                    Ok(())
                });
                assert!(parked.is_none());
                let seen_plain = Arc::clone(&seen);
                let parked = release_handle(event, "Event", move || {
                    // destroyed: a plain context's stream gets the address, used on its
                    // own thread, which is in no partition
                    std::thread::scope(|s| {
                        s.spawn(|| {
                            let ok = refuse_foreign_handle("Stream::synchronize", event).is_ok();
                            seen_plain
                                .lock()
                                .unwrap()
                                .push(("a plain stream used on its thread", ok));
                        });
                    });
                    Ok(())
                });
                assert!(parked.is_none());
            });
        });
        assert!(run_parked(a as CUcontext).is_empty());
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("b's own stream released now", true),
                ("a plain stream used on its thread", true)
            ]
        );
        assert_eq!(late.load(Ordering::SeqCst), 1, "released by its own thread");
        // nothing was parked for `a` meanwhile: a later partition at its address runs none
        assert!(run_parked(a as CUcontext).is_empty());
        assert_eq!(late.load(Ordering::SeqCst), 1);
        leave_for_test(a as CUcontext);
        assert_eq!(partition_of(stream), None);
    }
}
