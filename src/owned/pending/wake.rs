//! How an awaited batch learns that its work is done: a host function queued after the
//! work (the fast path), and a watchdog thread for what a host function cannot report.
//!
//! After an error of its context the driver runs no host function at all, so a future
//! waiting only on one would never be woken. The watchdog, one thread of the crate started
//! at the first armed batch, queries each pending batch's event every [`TICK`] (and looks
//! for new ones every 50 ms while none is pending); an event that is complete or reports an error wakes its batch.
//! It also wakes the batches polled where the crate can make no driver call (an executor
//! that polls inside a host function), which must finish elsewhere.

use std::ffi::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once, PoisonError};
use std::task::Waker;
use std::time::Duration;

use crate::context;
use crate::driver::{self, CUevent, CUstream, HostFnFlag};
use crate::error::Result;
use crate::owned::handle::OwnedContext;

/// How often the watchdog looks at pending batches.
pub(crate) const TICK: Duration = Duration::from_millis(5);

/// How long the watchdog sleeps while no batch is listed. Listing a batch does not wake it
/// (that would put a system call on every armed batch's path): a batch listed while it
/// sleeps is looked at within `IDLE` + [`TICK`].
const IDLE: Duration = Duration::from_millis(50);

/// The completion of one batch, shared by its future, its host function and the watchdog.
#[derive(Default)]
pub(crate) struct Signal {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Signal {
    /// Whether the batch's work has been seen to end (done, or failed).
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Keeps `waker` to be woken when the work ends.
    pub(crate) fn register(&self, waker: &Waker) {
        let mut slot = lock(&self.waker);
        match &*slot {
            Some(kept) if kept.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
    }

    /// Marks the work ended and wakes the future. Makes no driver call (runs in host
    /// functions), and no wake can unwind out of it.
    pub(crate) fn fire(&self) {
        self.done.store(true, Ordering::Release);
        let waker = lock(&self.waker).take();
        if let Some(waker) = waker {
            // an executor's wake runs its code: no driver call there (the flag), no unwind
            // into the driver's thread
            let _flag = HostFnFlag::set();
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| waker.wake())) {
                // dropping a payload runs its code, which may panic: never here
                std::mem::forget(payload);
            }
        }
    }
}

/// The host function queued after a batch's work.
///
/// # Safety
/// `data` is an `Arc<Signal>` turned into a raw pointer by [`queue_host_fn`], passed once.
unsafe extern "C" fn signal_done(data: *mut c_void) {
    // SAFETY: the caller's promise: one count of the signal, given to this call.
    let signal = unsafe { Arc::from_raw(data.cast::<Signal>().cast_const()) };
    signal.fire();
}

/// Queues [`signal_done`] on `stream` after the work queued so far.
///
/// # Safety
/// `stream` is alive.
pub(crate) unsafe fn queue_host_fn(stream: CUstream, signal: &Arc<Signal>) -> Result<()> {
    let data = Arc::into_raw(Arc::clone(signal))
        .cast_mut()
        .cast::<c_void>();
    // SAFETY: the caller's promise; the count is `signal_done`'s (or leaked if the driver
    // never calls it, after an error of the context: a few bytes).
    let queued = unsafe { driver::launch_host_func(stream, signal_done, data) };
    if queued.is_err() {
        // SAFETY: not queued, so the count is still ours.
        drop(unsafe { Arc::from_raw(data.cast::<Signal>().cast_const()) });
    }
    queued
}

/// A batch the watchdog looks at.
pub(crate) struct Watch {
    pub(crate) signal: Arc<Signal>,
    event: CUevent,
    /// The event's context, kept alive while the watchdog may query the event.
    home: OwnedContext,
}

// SAFETY: an event handle and a context handle, which any thread may use with the context
// current; the watchdog makes it current for each query.
unsafe impl Send for Watch {}
// SAFETY: as above; `&Watch` only reads the handles.
unsafe impl Sync for Watch {}

impl Watch {
    pub(crate) fn new(signal: Arc<Signal>, event: CUevent, home: &OwnedContext) -> Arc<Watch> {
        Arc::new(Watch {
            signal,
            event,
            home: home.clone(),
        })
    }

    /// Whether the event is complete or failed (anything but `CUDA_ERROR_NOT_READY`).
    fn ended(&self) -> bool {
        let query = || {
            // SAFETY: the event is alive while the watch is listed (its batch removes the
            // watch before it destroys the event); its context is current.
            unsafe { driver::event_query(self.event) }
        };
        // SAFETY: the context is alive (`home`).
        let queried = unsafe { context::in_context(self.home.raw(), query) };
        !matches!(queried, Ok(false))
    }
}

struct Watched {
    watches: Vec<Arc<Watch>>,
    /// Wakers to call from the watchdog's thread (polled where no driver call is allowed).
    later: Vec<Waker>,
}

static WATCHED: Mutex<Watched> = Mutex::new(Watched {
    watches: Vec::new(),
    later: Vec::new(),
});
static TICKS: Condvar = Condvar::new();
static STARTED: Once = Once::new();

/// Lists `watch` for the watchdog (starting it on first use).
pub(crate) fn watch(watch: Arc<Watch>) {
    start();
    lock(&WATCHED).watches.push(watch);
}

/// Removes `watch` (its batch is finishing, and will destroy the event).
pub(crate) fn unwatch(watch: &Arc<Watch>) {
    lock(&WATCHED).watches.retain(|w| !Arc::ptr_eq(w, watch));
}

/// Wakes `waker` from the watchdog's thread at its next tick.
pub(crate) fn wake_later(waker: &Waker) {
    start();
    lock(&WATCHED).later.push(waker.clone());
    TICKS.notify_one();
}

fn start() {
    STARTED.call_once(|| {
        let started = std::thread::Builder::new()
            .name("cuda-brand-watchdog".into())
            .spawn(watchdog);
        // without the thread, host functions still wake every batch whose context stays
        // healthy; a failed context's batches are then finished by `Pending::wait` or drop
        drop(started);
    });
}

fn watchdog() {
    let mut watched = lock(&WATCHED);
    loop {
        if watched.watches.is_empty() && watched.later.is_empty() {
            watched = TICKS
                .wait_timeout(watched, IDLE)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            continue;
        }
        let later = std::mem::take(&mut watched.later);
        let mut ended = Vec::new();
        watched.watches.retain(|w| {
            let e = w.ended();
            if e {
                ended.push(Arc::clone(&w.signal));
            }
            !e
        });
        drop(watched);
        for signal in ended {
            signal.fire();
        }
        for waker in later {
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| waker.wake())) {
                // a panicking drop of the payload would end the watchdog
                std::mem::forget(payload);
            }
        }
        watched = lock(&WATCHED);
        if !watched.later.is_empty() {
            continue;
        }
        watched = TICKS
            .wait_timeout(watched, TICK)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}
