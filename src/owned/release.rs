//! Releases that could not run where they were asked for: an owned handle dropped inside a
//! host function, where no driver call is allowed (`cuLaunchHostFunc`'s rule). The handle
//! is parked here and released at the next release point outside a host function: entering
//! or creating an owned context, dropping an owned handle, polling an awaited operation, or
//! [`release_deferred`]. This is PyO3's reference pool in this crate's terms, for releases
//! only (never for anything that makes a reference: PyO3 #4105).

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::driver;

/// Parked releases.
static PARKED: Mutex<Vec<Box<dyn Any + Send>>> = Mutex::new(Vec::new());
/// Whether [`PARKED`] may hold anything: one load on the common path.
static DIRTY: AtomicBool = AtomicBool::new(false);

/// Parks `item`, to be dropped at the next release point.
pub(crate) fn defer(item: Box<dyn Any + Send>) {
    PARKED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(item);
    DIRTY.store(true, Ordering::Release);
}

/// Releases what owned handles dropped inside host functions left parked (on the calling
/// thread, now), and returns how many there were. The crate calls this itself at every
/// release point; call it where a program wants the memory back at a moment of its
/// choosing. Inside a host function it does nothing and returns 0.
///
/// ```no_run
/// // after a burst of work whose host functions dropped owned buffers
/// let released = cuda_brand::owned::release_deferred();
/// println!("{released} parked releases done");
/// ```
#[inline]
pub fn release_deferred() -> usize {
    if !DIRTY.load(Ordering::Acquire) || driver::in_host_fn() {
        return 0;
    }
    release_parked()
}

#[cold]
#[inline(never)]
fn release_parked() -> usize {
    let parked = {
        let mut parked = PARKED.lock().unwrap_or_else(PoisonError::into_inner);
        DIRTY.store(false, Ordering::Release);
        std::mem::take(&mut *parked)
    };
    let n = parked.len();
    // dropped outside the lock: a drop may park again (it does not, outside a host
    // function) or take a while (a context's teardown)
    drop(parked);
    n
}
