//! The registry of stagings per context, the leases that check one out for a copy, and
//! what a context's teardown frees.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::{MAX_STAGINGS_PER_CONTEXT, Staging};
use crate::context::{self, ContextGuard};
use crate::driver::{self, CUcontext, CUdevice};
use crate::error::Result;

/// The stagings of one context.
struct Entry {
    /// The context's handle as a number (a key, never dereferenced or passed on).
    key: usize,
    /// Distinguishes this entry from a later one of a context with the same handle.
    generation: u64,
    /// Stagings no copy is using.
    idle: Vec<Staging>,
    /// Stagings that exist or are being created, idle or leased.
    live: usize,
    /// No more allocations ([`freeze`]).
    frozen: bool,
    /// An allocation failed: no more attempts until [`reserve`] or the context's end.
    unavailable: bool,
}

struct Registry {
    entries: Vec<Entry>,
    generations: u64,
}

impl Registry {
    fn position(&self, key: usize) -> Option<usize> {
        self.entries.iter().position(|e| e.key == key)
    }

    /// The entry of `key`, made if there is none.
    fn entry(&mut self, key: usize) -> &mut Entry {
        let i = match self.position(key) {
            Some(i) => i,
            None => {
                // from the first entry on, every context teardown frees its context's
                register_end_hooks();
                self.generations += 1;
                self.entries.push(Entry {
                    key,
                    generation: self.generations,
                    idle: Vec::new(),
                    live: 0,
                    frozen: false,
                    unavailable: false,
                });
                ENTRIES.store(self.entries.len(), Ordering::SeqCst);
                self.entries.len() - 1
            }
        };
        &mut self.entries[i]
    }

    /// The entry of `key` if it is still the one of `generation`.
    fn entry_of(&mut self, key: usize, generation: u64) -> Option<&mut Entry> {
        self.entries
            .iter_mut()
            .find(|e| e.key == key && e.generation == generation)
    }

    fn remove(&mut self, key: usize) -> Option<Entry> {
        let i = self.position(key)?;
        let entry = self.entries.swap_remove(i);
        ENTRIES.store(self.entries.len(), Ordering::SeqCst);
        Some(entry)
    }
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    entries: Vec::new(),
    generations: 0,
});
/// Signalled whenever a staging goes back to the registry, an entry goes away, or a
/// context is unfrozen: what a copy waiting for a staging waits for.
static RETURNED: Condvar = Condvar::new();
/// The number of entries: teardown looks at the registry only when it is not zero.
static ENTRIES: AtomicUsize = AtomicUsize::new(0);

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A staging checked out of the registry for one copy; it goes back when dropped (also
/// while a panic unwinds), or is freed then if its context's entry went away meanwhile.
pub(crate) struct Lease {
    key: usize,
    generation: u64,
    staging: Option<Staging>,
}

impl Lease {
    pub(super) fn staging(&self) -> Option<&Staging> {
        self.staging.as_ref()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(staging) = self.staging.take() {
            check_in(self.key, self.generation, staging);
        }
    }
}

/// A staging for a copy in context `key`: an idle one, a new one from `create` (if the
/// context may have another), or one another thread gives back (waiting for it). `None`:
/// the copy takes the driver's path (frozen with none, allocation failed, or the context
/// has no entry and `held` says no scope of the crate holds it, so that no teardown would
/// free what it is given).
///
/// `held` is asked with the entry already made (and counted in `ENTRIES`), under the
/// registry's lock: a teardown stops holding its context (under the lock `held` reads)
/// before [`on_context_end`] reads `ENTRIES`, so either `held` saw it stop and the entry is
/// taken out again here, or that teardown sees the entry and takes it out (waiting for the
/// registry's lock).
pub(super) fn acquire(
    key: usize,
    held: impl FnOnce() -> bool,
    create: impl FnOnce() -> Result<Staging>,
) -> Option<Lease> {
    let mut reg = registry();
    if reg.position(key).is_none() {
        reg.entry(key);
        if !held() {
            reg.remove(key);
            return None;
        }
    }
    loop {
        let e = reg.entry(key);
        if let Some(staging) = e.idle.pop() {
            return Some(Lease {
                key,
                generation: e.generation,
                staging: Some(staging),
            });
        }
        if !e.frozen && !e.unavailable && e.live < MAX_STAGINGS_PER_CONTEXT {
            e.live += 1;
            let generation = e.generation;
            drop(reg);
            return match create() {
                Ok(staging) => Some(Lease {
                    key,
                    generation,
                    staging: Some(staging),
                }),
                Err(_) => {
                    give_up(key, generation, true);
                    None
                }
            };
        }
        if e.live == 0 {
            return None;
        }
        // Another copy of this context holds every staging it may have: wait for one.
        reg = RETURNED.wait(reg).unwrap_or_else(PoisonError::into_inner);
    }
}

/// Undoes the `live += 1` of a creation that failed.
fn give_up(key: usize, generation: u64, failed: bool) {
    let mut reg = registry();
    if let Some(e) = reg.entry_of(key, generation) {
        e.live -= 1;
        e.unavailable |= failed;
    }
    drop(reg);
    RETURNED.notify_all();
}

fn check_in(key: usize, generation: u64, staging: Staging) {
    let mut reg = registry();
    match reg.entry_of(key, generation) {
        Some(e) => {
            e.idle.push(staging);
            drop(reg);
            RETURNED.notify_all();
        }
        // The context's entry went away while the copy ran: free it now (the copy's
        // context is still current here).
        None => {
            drop(reg);
            drop(staging);
        }
    }
}

/// Removes the entry of `key` and returns its idle stagings (leased ones are freed by
/// their copies).
fn retire(key: usize) -> Vec<Staging> {
    if ENTRIES.load(Ordering::SeqCst) == 0 {
        return Vec::new();
    }
    let removed = registry().remove(key);
    RETURNED.notify_all();
    removed.map(|e| e.idle).unwrap_or_default()
}

fn reserve_with(key: usize, create: impl FnOnce() -> Result<Staging>) -> Result<()> {
    let mut reg = registry();
    let e = reg.entry(key);
    if e.live > 0 {
        return Ok(());
    }
    e.live += 1;
    e.unavailable = false;
    let generation = e.generation;
    drop(reg);
    match create() {
        Ok(staging) => {
            check_in(key, generation, staging);
            Ok(())
        }
        Err(err) => {
            give_up(key, generation, false);
            Err(err)
        }
    }
}

fn freeze_key(key: usize, frozen: bool) {
    registry().entry(key).frozen = frozen;
    RETURNED.notify_all();
}

#[cfg(any(test, feature = "test-hooks"))]
fn live_of(key: usize) -> usize {
    let reg = registry();
    reg.position(key).map_or(0, |i| reg.entries[i].live)
}

fn key(ctx: ContextGuard<'_>) -> usize {
    ctx.as_non_null().as_ptr() as usize
}

/// Allocates the first staging of `ctx` now, unless it has one: for a setup phase, before
/// [`freeze`]. An error says why the memory could not be allocated or page-locked (the
/// context's copies then take the driver's path).
pub(crate) fn reserve(ctx: ContextGuard<'_>) -> Result<()> {
    ctx.with_current(|| reserve_with(key(ctx), Staging::create))
}

/// Freezes (`true`) or unfreezes the stagings of `ctx`: a frozen context allocates no
/// staging; its bulk copies use the stagings it has ([`reserve`]) or the driver's path.
pub(crate) fn freeze(ctx: ContextGuard<'_>, frozen: bool) {
    freeze_key(key(ctx), frozen);
}

#[cfg(feature = "test-hooks")]
/// Frees the idle stagings of `ctx` now and forgets its reservation and freeze; a later
/// bulk copy allocates again.
pub(crate) fn release(ctx: ContextGuard<'_>) -> Result<()> {
    ctx.with_current(|| {
        drop(retire(key(ctx)));
        Ok(())
    })
}

#[cfg(feature = "test-hooks")]
/// The bytes of staging `ctx` has (idle, in use, or being created).
pub(crate) fn bytes_of(ctx: ContextGuard<'_>) -> usize {
    live_of(key(ctx)) * super::STAGING_BYTES
}

/// Has every context teardown run [`on_context_end`] and [`after_primary_release`] (the
/// context layer, below this one, cannot name them). Registered before the first entry is
/// made: until then no context has anything to free, and a teardown costs one atomic load.
fn register_end_hooks() {
    context::teardown::register_end_hooks(context::teardown::EndHooks {
        before_give_up: on_context_end,
        after_primary_release,
    });
}

/// Teardown hook of a context the crate gives up and whose owner may destroy it next
/// (`with_context` before `cuCtxDestroy`, `with_raw_context` before its pop): unregisters
/// and frees its idle stagings. One atomic load when no context has any.
///
/// # Safety
/// `raw` is alive and current on the calling thread.
#[inline]
pub(crate) unsafe fn on_context_end(raw: CUcontext) {
    if ENTRIES.load(Ordering::Relaxed) != 0 {
        drop(retire(raw as usize));
    }
}

/// Teardown hook after `cuDevicePrimaryCtxRelease` of `raw`, the primary context of
/// `device`: if the release left it inactive, the driver destroyed it (and unregistered
/// its memory), so its stagings are freed; otherwise someone still holds it and they stay.
#[inline]
pub(crate) fn after_primary_release(raw: CUcontext, device: CUdevice) {
    if ENTRIES.load(Ordering::Relaxed) != 0 {
        after_primary_release_slow(raw as usize, device);
    }
}

#[cold]
#[inline(never)]
fn after_primary_release_slow(key: usize, device: CUdevice) {
    if registry().position(key).is_none() {
        return;
    }
    // Only a context known to be gone: were it alive (or its state unknown), freeing memory
    // it still has page-locked could let the allocator hand the addresses out again while
    // the driver maps them to the old pages.
    let Ok((_, false)) = driver::primary_ctx_state(device) else {
        return;
    };
    for mut staging in retire(key) {
        staging.forget_registration();
    }
}

#[cfg(feature = "test-hooks")]
/// The host addresses of the idle stagings of `ctx` (for `__staging`).
pub(super) fn addresses_of(ctx: ContextGuard<'_>) -> Vec<usize> {
    let key = key(ctx);
    let reg = registry();
    reg.position(key).map_or_else(Vec::new, |i| {
        reg.entries[i]
            .idle
            .iter()
            .map(|s| s.base.as_ptr() as usize)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::super::SLOT_BYTES;
    use super::*;
    use crate::error::{Error, ErrorCode};

    fn fake(bytes: usize) -> impl FnOnce() -> Result<Staging> {
        move || Staging::allocate(bytes).ok_or_else(|| Error::new("fake", ErrorCode::OutOfMemory))
    }

    fn failing() -> Result<Staging> {
        Err(Error::new("fake", ErrorCode::OutOfMemory))
    }

    fn held() -> bool {
        true
    }

    // Keys no real context has (and distinct per test: the registry is shared).
    const A: usize = 0xdead_0001;
    const B: usize = 0xdead_0002;
    const C: usize = 0xdead_0003;
    const D: usize = 0xdead_0004;
    const E: usize = 0xdead_0005;

    #[test]
    fn a_context_reuses_its_staging_and_has_at_most_the_maximum() {
        let first = acquire(A, held, fake(SLOT_BYTES)).expect("created");
        let base = first.staging().unwrap().base.as_ptr() as usize;
        drop(first);
        let again = acquire(A, held, failing).expect("the idle one, nothing created");
        assert_eq!(again.staging().unwrap().base.as_ptr() as usize, base);
        let second =
            acquire(A, held, fake(SLOT_BYTES)).expect("a second one while the first is busy");
        assert_eq!(live_of(A), MAX_STAGINGS_PER_CONTEXT);
        // a third copy waits until one comes back, and gets that one
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                acquire(A, held, failing).map(|l| l.staging().unwrap().base.as_ptr() as usize)
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiter.is_finished(), "waits for a staging");
            drop(again);
            assert_eq!(waiter.join().unwrap(), Some(base));
        });
        drop(second);
        assert_eq!(live_of(A), 2);
        drop(retire(A));
        assert_eq!(live_of(A), 0);
    }

    #[test]
    fn a_frozen_context_never_allocates_and_uses_its_reservation() {
        freeze_key(B, true);
        assert!(
            acquire(B, held, fake(SLOT_BYTES)).is_none(),
            "frozen with none: driver path"
        );
        assert_eq!(live_of(B), 0);
        reserve_with(B, fake(SLOT_BYTES)).unwrap();
        reserve_with(B, failing).expect("already reserved: nothing to do");
        assert_eq!(live_of(B), 1);
        let lease = acquire(B, held, failing).expect("the reserved one");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| acquire(B, held, failing).is_some());
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiter.is_finished(), "frozen: waits for the reserved one");
            drop(lease);
            assert!(waiter.join().unwrap());
        });
        assert_eq!(live_of(B), 1, "never more than the reservation");
        drop(retire(B));
    }

    #[test]
    fn a_failed_allocation_falls_back_and_is_not_retried() {
        assert!(acquire(C, held, failing).is_none());
        assert_eq!(live_of(C), 0);
        assert!(acquire(C, held, fake(SLOT_BYTES)).is_none(), "not retried");
        assert!(reserve_with(C, failing).is_err());
        reserve_with(C, fake(SLOT_BYTES)).expect("a reservation tries again");
        assert!(acquire(C, held, failing).is_some());
        drop(retire(C));
    }

    #[test]
    fn a_context_no_scope_holds_gets_no_first_staging() {
        assert!(acquire(E, || false, fake(SLOT_BYTES)).is_none());
        assert_eq!(live_of(E), 0);
        assert!(registry().position(E).is_none(), "no entry left behind");
        // once the context has an entry (made while held), `held` is not asked again
        reserve_with(E, fake(SLOT_BYTES)).unwrap();
        let lease = acquire(E, || panic!("asked"), failing).expect("the reserved one");
        drop(lease);
        drop(retire(E));
        assert!(
            acquire(E, || false, fake(SLOT_BYTES)).is_none(),
            "retired: asked again"
        );
    }

    #[test]
    fn a_staging_in_use_when_its_context_ends_is_freed_by_its_copy() {
        let lease = acquire(D, held, fake(SLOT_BYTES)).unwrap();
        assert!(retire(D).is_empty(), "the only staging is in use");
        drop(lease); // its entry is gone: freed
        assert_eq!(live_of(D), 0);
        // a new entry for the same key starts afresh
        let lease = acquire(D, held, fake(SLOT_BYTES)).unwrap();
        drop(lease);
        assert_eq!(live_of(D), 1);
        drop(retire(D));
    }
}
