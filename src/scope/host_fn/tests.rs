//! Unit tests of host functions and their slots, without a GPU.

use super::slots::*;
use super::*;
use crate::driver::host_fn_flag::in_host_fn;
use crate::error::{Error, ErrorCode};
use std::any::Any;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A queued slot as `HostFns::queue` makes it, without the driver, and its trampoline.
#[derive(Clone, Copy)]
struct Placed {
    h: NonNull<Header>,
    run: unsafe extern "C" fn(*mut c_void),
}

fn placed<F: FnOnce() + Send>(fns: &HostFns, f: F) -> Placed {
    Placed {
        h: fns.place(f),
        run: trampoline::<F>,
    }
}

/// Calls a slot's trampoline, as the driver does.
///
/// # Safety
/// `p` is a slot made by `placed`, whose chunk is still allocated.
unsafe fn call(p: Placed) {
    // SAFETY: `run` is the trampoline of the slot's type, given the slot.
    unsafe { (p.run)(p.h.as_ptr().cast()) }
}

/// Places `n` functions that count their runs in `ran`, each owning a value that counts its
/// drop in `dropped`.
fn place_counted<'a>(
    fns: &HostFns,
    n: usize,
    ran: &'a AtomicUsize,
    dropped: &'a AtomicUsize,
) -> Vec<Placed> {
    (0..n)
        .map(|_| {
            let owned = Dropped(dropped);
            placed(fns, move || {
                let _owned = owned;
                ran.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect()
}

/// Counts its drops.
struct Dropped<'a>(&'a AtomicUsize);
impl Drop for Dropped<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_host_function_runs_once_with_the_driver_refused_and_its_panic_is_kept() {
    let (ran, dropped) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let owned = Dropped(&dropped);
    let fns = HostFns::new();
    let runs = placed(&fns, || {
        let _owned = owned;
        assert!(in_host_fn());
        // every crate entry point is refused before the driver (loaded or not)
        let e = crate::driver::driver_version().unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotPermitted);
        assert_eq!(e.call(), "cuDriverGetVersion");
        ran.fetch_add(1, Ordering::Relaxed);
    });
    let panics = placed(&fns, || panic!("inside a host function"));
    for p in [runs, panics] {
        // SAFETY: live slots, called once each, as the driver would
        unsafe { call(p) };
    }
    assert!(!in_host_fn(), "the flag is reset after the call");
    assert_eq!(ran.load(Ordering::Relaxed), 1);
    assert_eq!(
        dropped.load(Ordering::Relaxed),
        1,
        "the closure's values dropped once"
    );
    fns.finish();
    let payload = lock(&fns.panic).take().expect("the panic was kept");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"inside a host function")
    );
}

/// The end of a scope as `OpenScopes` makes it, over one scope's host functions.
struct Ends<'a>(&'a HostFns);
impl crate::scope::ScopeEnd for Ends<'_> {
    fn end(&self) -> Result<()> {
        self.0.finish();
        Ok(())
    }
    fn take_host_panic(&self) -> Option<Box<dyn Any + Send>> {
        self.0.take_panic()
    }
}

/// Every scope form ends through `run_scope`, with or without a bounded wait first (the
/// deadline forms): a host function's panic, kept by `finish`, is resumed by both, after
/// the function's output was written; a second panic is not.
#[test]
fn a_host_functions_panic_is_resumed_by_the_end_every_scope_form_shares() {
    for bounded in [false, true] {
        let mut out = [0u32; 2];
        let (first, then) = out.split_at_mut(1);
        let fns = HostFns::new();
        let panics = placed(&fns, move || {
            first[0] = 5;
            std::panic::panic_any("the first");
        });
        let second = placed(&fns, move || {
            then[0] = 6;
            panic!("the second");
        });
        for p in [panics, second] {
            // SAFETY: live slots, called once each, as the driver would
            unsafe { call(p) };
        }
        let waited = std::cell::Cell::new(false);
        let mut wait = || {
            waited.set(true);
            Ok(())
        };
        let wait: Option<&mut dyn FnMut() -> Result<()>> =
            if bounded { Some(&mut wait) } else { None };
        let caught = catch_unwind(AssertUnwindSafe(|| {
            crate::scope::run_scope(&Ends(&fns), wait, || Ok::<_, Error>(()))
        }))
        .expect_err("the scope resumes the host function's panic");
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"the first"));
        assert_eq!(waited.get(), bounded);
        assert!(fns.take_panic().is_none(), "taken once");
        assert_eq!(out, [5, 6], "both functions ran to their panics");
    }
}

#[test]
fn an_abandoned_host_function_is_dropped_uncalled_and_never_runs() {
    let (ran, dropped) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (owned, ran) = (Dropped(&dropped), &ran);
    let fns = HostFns::new();
    let p = placed(&fns, move || {
        let _owned = owned;
        ran.fetch_add(1, Ordering::Relaxed);
    });
    fns.finish(); // the stream never reached it
    assert_eq!(dropped.load(Ordering::Relaxed), 1, "dropped by the scope");
    // the driver calling it late finds it abandoned
    // SAFETY: the chunk is leaked, so still allocated.
    unsafe { call(p) };
    assert_eq!(ran.load(Ordering::Relaxed), 0);
    assert_eq!(dropped.load(Ordering::Relaxed), 1);
    // SAFETY: as above.
    let state = unsafe { p.h.as_ref() }.state.load(Ordering::Relaxed);
    assert_eq!(state, ABANDONED);
}

/// A closure larger than a chunk, one aligned beyond a chunk's head, and enough small
/// ones to fill several chunks: each runs once with its own values, the first panic in
/// queue order is kept across chunks, and every closure is dropped once.
#[test]
fn slots_of_every_size_and_alignment_fill_chunks_and_each_runs_once() {
    #[repr(align(256))]
    struct Aligned(u64);
    let (sum, dropped) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (sum, dropped) = (&sum, &dropped);
    let fns = HostFns::new();
    let mut all = Vec::new();
    for i in 0..1000usize {
        let owned = Dropped(dropped);
        all.push(match i % 3 {
            0 => placed(&fns, move || {
                let _owned = owned;
                sum.fetch_add(i, Ordering::Relaxed);
            }),
            1 => {
                let big = [i as u8; 5000];
                placed(&fns, move || {
                    let _owned = owned;
                    sum.fetch_add(
                        big.iter().map(|&b| b as usize).sum::<usize>() / 5000,
                        Ordering::Relaxed,
                    );
                })
            }
            _ => {
                let a = Aligned(i as u64);
                placed(&fns, move || {
                    let _owned = owned;
                    assert_eq!(&a as *const Aligned as usize % 256, 0);
                    sum.fetch_add(a.0 as usize, Ordering::Relaxed);
                    if a.0 == 500 || a.0 == 800 {
                        std::panic::panic_any(a.0);
                    }
                })
            }
        });
    }
    let chunks = lock(&fns.queued).chunks.len();
    assert!(
        chunks > 300,
        "the large closures got chunks of their own: {chunks}"
    );
    for &p in &all {
        // SAFETY: live slots, called once each, in queue order, as the driver would
        unsafe { call(p) };
    }
    fns.finish();
    let expected: usize = (0..1000usize)
        .map(|i| if i % 3 == 1 { i % 256 } else { i })
        .sum();
    assert_eq!(sum.load(Ordering::Relaxed), expected);
    assert_eq!(dropped.load(Ordering::Relaxed), 1000);
    let payload = fns.take_panic().expect("a panic was kept");
    assert_eq!(
        payload.downcast_ref::<u64>(),
        Some(&500),
        "the first queued"
    );
    assert!(lock(&fns.queued).chunks.is_empty());
}

/// A context error in the middle: the functions the driver ran are counted, those it did
/// not are abandoned (dropped uncalled, their chunks kept), and the scope's end returns
/// with every closure dropped once.
#[test]
fn a_chunk_with_functions_run_and_abandoned_is_finished_and_kept() {
    let (ran, dropped) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (ran, dropped) = (&ran, &dropped);
    let fns = HostFns::new();
    let all = place_counted(&fns, 600, ran, dropped);
    for &p in &all[..250] {
        // SAFETY: live slots, called once each
        unsafe { call(p) };
    }
    fns.finish();
    assert_eq!(ran.load(Ordering::Relaxed), 250);
    assert_eq!(
        dropped.load(Ordering::Relaxed),
        600,
        "250 ran, 350 abandoned"
    );
    for &p in &all[250..] {
        // SAFETY: chunks with an abandoned slot are leaked, so still allocated
        unsafe { call(p) };
    }
    assert_eq!(ran.load(Ordering::Relaxed), 250, "a late call runs nothing");
    assert!(fns.take_panic().is_none());
}

/// A captured value whose drop panics, in an abandoned closure: `finish` still abandons
/// every slot after it (none stays `PENDING` for a late call to run with data the scope
/// has let go), drops every other closure once, and keeps the drop's panic as the scope's.
#[test]
fn an_abandoned_closure_whose_drop_panics_strands_no_slot() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("a captured value's drop");
        }
    }
    let (ran, dropped) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (ran, dropped) = (&ran, &dropped);
    let fns = HostFns::new();
    let bad = PanicsOnDrop;
    let first = placed(&fns, move || {
        let _bad = bad;
        ran.fetch_add(1, Ordering::Relaxed);
    });
    // after it in the same chunk, and enough to fill further chunks
    let rest = place_counted(&fns, 300, ran, dropped);
    let finished = catch_unwind(AssertUnwindSafe(|| fns.finish()));
    assert!(finished.is_ok(), "the drop's panic does not leave `finish`");
    assert_eq!(
        dropped.load(Ordering::Relaxed),
        300,
        "every other closure dropped"
    );
    for &p in std::iter::once(&first).chain(&rest) {
        // SAFETY: chunks with an abandoned slot are leaked, so still allocated.
        let state = unsafe { p.h.as_ref() }.state.load(Ordering::Relaxed);
        assert_eq!(state, ABANDONED);
        // SAFETY: as above; a late call of an abandoned slot runs nothing.
        unsafe { call(p) };
    }
    assert_eq!(ran.load(Ordering::Relaxed), 0, "no closure ran");
    let panic = fns.take_panic().expect("the drop's panic is the scope's");
    assert_eq!(
        panic.downcast_ref::<&str>(),
        Some(&"a captured value's drop")
    );
}

/// A function still running when the scope ends (another thread here) is waited for:
/// `finish` returns only after it has counted itself done.
#[test]
fn finish_waits_for_a_function_that_started() {
    let fns = HostFns::new();
    let (started, released) = (AtomicBool::new(false), AtomicBool::new(false));
    let (started, released) = (&started, &released);
    let finished = AtomicBool::new(false);
    let p = placed(&fns, move || {
        started.store(true, Ordering::Release);
        while !released.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    });
    struct SendPlaced(Placed);
    // SAFETY: the slot's closure is `Send`; the test's threads stand for the driver's.
    unsafe impl Send for SendPlaced {}
    let sp = SendPlaced(p);
    std::thread::scope(|t| {
        t.spawn(move || {
            let sp = sp;
            // SAFETY: a live slot, called once, as the driver would, on its own thread
            unsafe { call(sp.0) }
        });
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        t.spawn(|| {
            fns.finish();
            finished.store(true, Ordering::Release);
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!finished.load(Ordering::Acquire), "finish waits for it");
        released.store(true, Ordering::Release);
    });
    assert!(finished.load(Ordering::Acquire));
}
