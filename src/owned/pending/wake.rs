//! How an awaited batch learns that its work is done: a stream callback queued after the
//! work (`cuStreamAddCallback`) marks the batch's [`Signal`] and wakes its future.
//!
//! The driver calls a stream callback also after an error of its context, with the error
//! as its status (it runs no host function then, `cuLaunchHostFunc`'s kind), so the future
//! is woken whether the work ended or failed, and no thread of the crate watches for
//! either. Any status wakes it: the future then reads the work's own status from its event
//! ([`Op::finish`](super::Op)). Queueing the callback after the error is known fails with
//! the error, and the poll that tried finishes the batch at once. Callbacks are refused in
//! a stream capture; the crate queues them only on its notifier streams, which no capture
//! contains (a capture runs on a private stream that nothing else can join).
//!
//! A future polled inside a host function (an executor that polls in its waker's `wake`,
//! which the callback calls) cannot finish there: no driver call is allowed. Its waker is
//! woken again from outside ([`wake_later`]): with the `repoll-thread` feature from one
//! thread of the crate, started the first time this happens; without it at once, so that
//! an executor that runs its tasks on threads of its own polls the future again there
//! (one that polls inside `wake` itself would poll it again inside the host function,
//! and find it pending each time).

use std::ffi::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use crate::driver::{self, CUstream, HostFnFlag};
use crate::error::Result;

/// The completion of one batch, shared by its future and its stream callback.
#[derive(Default)]
pub(crate) struct Signal {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
    /// The load of the notifier stream whose callback wakes the batch, counted down when
    /// the callback runs (`OwnedContext::notifier`).
    load: Mutex<Option<Arc<AtomicUsize>>>,
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

    /// Marks the work ended and wakes the future. Makes no driver call (runs in stream
    /// callbacks), and no wake can unwind out of it.
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

/// The stream callback queued after a batch's work: marks its signal done and wakes its
/// future, whatever the status (the future reads the work's status from its event). Makes
/// no driver call, and nothing unwinds out of it into the driver's thread.
///
/// # Safety
/// `data` is an `Arc<Signal>` turned into a raw pointer by [`queue_callback`], passed once.
unsafe extern "C" fn signal_done(_stream: CUstream, _status: u32, data: *mut c_void) {
    // driver calls refused for the whole call: the last count of the signal may drop a
    // waker here, which runs an executor's code
    let _flag = HostFnFlag::set();
    let ended = panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller's promise: one count of the signal, given to this call.
        let signal = unsafe { Arc::from_raw(data.cast::<Signal>().cast_const()) };
        if let Some(load) = lock(&signal.load).take() {
            load.fetch_sub(1, Ordering::AcqRel);
        }
        signal.fire();
    }));
    if let Err(payload) = ended {
        // a panicking drop of the payload would unwind into the driver
        std::mem::forget(payload);
    }
}

/// Queues [`signal_done`] on `stream` after the work queued so far (`cuStreamAddCallback`);
/// the callback counts `load` (the stream's, counted up for it) down when it runs.
///
/// # Safety
/// `stream` is alive, and in no stream capture.
pub(crate) unsafe fn queue_callback(
    stream: CUstream,
    signal: &Arc<Signal>,
    load: &Arc<AtomicUsize>,
) -> Result<()> {
    *lock(&signal.load) = Some(Arc::clone(load));
    let data = Arc::into_raw(Arc::clone(signal))
        .cast_mut()
        .cast::<c_void>();
    // SAFETY: the caller's promise; `signal_done` makes no driver call, and the count is
    // its own (the driver calls a callback it queued also after an error of the context;
    // one it never calls leaks the count: a few bytes).
    let queued = unsafe { driver::stream_add_callback(stream, signal_done, data) };
    if queued.is_err() {
        // SAFETY: not queued, so the count is still ours.
        drop(unsafe { Arc::from_raw(data.cast::<Signal>().cast_const()) });
        // the caller counts the load down
        lock(&signal.load).take();
    }
    queued
}

/// Wakes `waker` again from outside a host function (a poll found itself inside one): from
/// the `repoll-thread` feature's thread.
#[cfg(feature = "repoll-thread")]
pub(crate) fn wake_later(waker: &Waker) {
    super::repoll::wake_later(waker);
}

/// Wakes `waker` again from outside a host function (a poll found itself inside one): at
/// once, for the executor to poll again from where it runs its tasks (no thread of the
/// crate without the `repoll-thread` feature).
#[cfg(not(feature = "repoll-thread"))]
pub(crate) fn wake_later(waker: &Waker) {
    // inside a host function already: the flag is set, no unwind leaves the poll
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| waker.wake_by_ref())) {
        std::mem::forget(payload);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    /// Counts its wakes, notes whether driver calls were refused and on which thread it
    /// was woken, and panics on its first wake if asked to.
    #[derive(Default)]
    struct Probe {
        wakes: AtomicUsize,
        refused: AtomicBool,
        panic_once: AtomicBool,
        thread: Mutex<Option<std::thread::ThreadId>>,
    }

    impl Wake for Probe {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.wakes.fetch_add(1, Ordering::SeqCst);
            self.refused.store(driver::in_host_fn(), Ordering::SeqCst);
            *lock(&self.thread) = Some(std::thread::current().id());
            if self.panic_once.swap(false, Ordering::SeqCst) {
                panic!("an executor's wake panics");
            }
        }
    }

    fn call_back(signal: &Arc<Signal>, status: u32) {
        let data = Arc::into_raw(Arc::clone(signal))
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: one count of the signal, given to this call, as `queue_callback` does.
        unsafe { signal_done(std::ptr::null_mut(), status, data) };
    }

    #[test]
    fn the_callback_marks_the_batch_done_and_wakes_it_with_driver_calls_refused() {
        for status in [0, 719] {
            let probe = Arc::new(Probe::default());
            let signal = Arc::new(Signal::default());
            signal.register(&Waker::from(Arc::clone(&probe)));
            assert!(!signal.is_done());
            call_back(&signal, status);
            assert!(signal.is_done(), "status {status} ends the wait too");
            assert_eq!(probe.wakes.load(Ordering::SeqCst), 1);
            assert!(
                probe.refused.load(Ordering::SeqCst),
                "no driver call in a wake"
            );
            assert!(!driver::in_host_fn(), "the flag is put back");
            assert_eq!(
                Arc::strong_count(&signal),
                1,
                "the callback's count is dropped"
            );
        }
    }

    #[test]
    fn the_callback_counts_its_notifiers_load_down() {
        let signal = Arc::new(Signal::default());
        let load = Arc::new(AtomicUsize::new(2));
        *lock(&signal.load) = Some(Arc::clone(&load));
        call_back(&signal, 0);
        assert_eq!(load.load(Ordering::SeqCst), 1, "one callback, one count");
        assert!(lock(&signal.load).is_none(), "the signal keeps no load");
        call_back(&signal, 0); // a second call finds no load to count down
        assert_eq!(load.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_callback_holding_the_last_count_frees_the_signal_and_still_wakes() {
        // the future was dropped (or forgotten with its op's count given up): only the
        // callback's count is left, and the signal is freed inside the callback
        let probe = Arc::new(Probe::default());
        let signal = Arc::new(Signal::default());
        signal.register(&Waker::from(Arc::clone(&probe)));
        let data = Arc::into_raw(signal).cast_mut().cast::<c_void>();
        // SAFETY: the last count of the signal, given to this call.
        unsafe { signal_done(std::ptr::null_mut(), 0, data) };
        assert_eq!(probe.wakes.load(Ordering::SeqCst), 1);
        assert_eq!(
            Arc::strong_count(&probe),
            1,
            "the waker was consumed, not kept"
        );
        assert!(!driver::in_host_fn());
    }

    #[test]
    fn a_panicking_wake_never_unwinds_out_of_the_callback() {
        let probe = Arc::new(Probe::default());
        probe.panic_once.store(true, Ordering::SeqCst);
        let signal = Arc::new(Signal::default());
        signal.register(&Waker::from(Arc::clone(&probe)));
        call_back(&signal, 0);
        assert!(signal.is_done());
        assert_eq!(probe.wakes.load(Ordering::SeqCst), 1);
        assert!(!driver::in_host_fn());
    }

    #[test]
    fn a_future_polled_inside_a_host_function_is_woken_again_from_outside() {
        let probe = Arc::new(Probe::default());
        let waker = Waker::from(Arc::clone(&probe));
        {
            let _flag = HostFnFlag::set();
            wake_later(&waker);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while probe.wakes.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(probe.wakes.load(Ordering::SeqCst), 1);
        let woken_on = lock(&probe.thread).expect("woken");
        if cfg!(feature = "repoll-thread") {
            // by the feature's thread, outside any host function
            assert_ne!(woken_on, std::thread::current().id());
            assert!(!probe.refused.load(Ordering::SeqCst));
        } else {
            // at once, here (still inside the host function)
            assert_eq!(woken_on, std::thread::current().id());
            assert!(probe.refused.load(Ordering::SeqCst));
        }
    }
}
