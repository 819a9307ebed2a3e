//! The `repoll-thread` feature: one thread of the crate that wakes the futures of awaited
//! batches polled inside a host function (an executor that polls in its waker's `wake`,
//! which a batch's stream callback calls), where no driver call can finish them. Started
//! the first time that happens, it then waits on a condition variable, wakes each waker it
//! is handed, outside any host function (so that an executor polling inside `wake` polls
//! on this thread, where the batch can finish), and waits again. It makes no driver call.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once, PoisonError};
use std::task::Waker;

/// Wakers handed to the thread, woken in order.
static LATER: Mutex<Vec<Waker>> = Mutex::new(Vec::new());
static HANDED: Condvar = Condvar::new();
static STARTED: Once = Once::new();
/// Set if the system refused the thread.
static SPAWN_FAILED: AtomicBool = AtomicBool::new(false);

fn lock(m: &Mutex<Vec<Waker>>) -> MutexGuard<'_, Vec<Waker>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hands `waker` to the thread (starting it on first use), which wakes it at once.
pub(super) fn wake_later(waker: &Waker) {
    STARTED.call_once(|| {
        let started = std::thread::Builder::new()
            .name("cuda-brand-repoll".into())
            .spawn(repoll);
        // without the thread (the system refused one), each waker is woken here, at once,
        // as without the feature
        if started.is_err() {
            SPAWN_FAILED.store(true, Ordering::Relaxed);
        }
    });
    if SPAWN_FAILED.load(Ordering::Relaxed) {
        wake_here(waker.clone());
        return;
    }
    lock(&LATER).push(waker.clone());
    HANDED.notify_one();
}

/// Wakes `waker`; an unwind of the executor's code is caught and its payload forgotten (a
/// panicking drop of it would end the thread).
fn wake_here(waker: Waker) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| waker.wake())) {
        std::mem::forget(payload);
    }
}

/// The thread: wakes what it is handed, outside the lock, and waits for more.
fn repoll() {
    let mut later = lock(&LATER);
    loop {
        if later.is_empty() {
            later = HANDED.wait(later).unwrap_or_else(PoisonError::into_inner);
            continue;
        }
        let wakers = std::mem::take(&mut *later);
        drop(later);
        for waker in wakers {
            wake_here(waker);
        }
        later = lock(&LATER);
    }
}
