//! The slots of host functions: their states, the chunks they live in, and [`HostFns`],
//! the list a scope keeps and finishes at its end.

use crate::driver::{self, HostFnFlag};
use crate::error::Result;
use std::alloc::Layout;
use std::any::Any;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

// ---- the host function's slot and its states -----------------------------------------------

/// Queued: the driver may call it.
pub(super) const PENDING: u8 = 0;
/// The driver called it; the closure is running or has returned (its chunk's count says
/// which).
pub(super) const RUNNING: u8 = 1;
/// The scope ended without the driver having called it: it must not run any more.
pub(super) const ABANDONED: u8 = 3;

/// The bytes of a chunk: the slots of a scope's host functions are placed one after the
/// other in chunks of this size (a closure too large for one gets a chunk of its own size),
/// so queueing a function allocates nothing most of the time, and the end of the scope frees
/// a chunk without reading its slots when every function in it has run.
pub(super) const CHUNK_BYTES: usize = 4096;

/// The head of a chunk, shared with the driver's thread: how many of its functions have run
/// to the end, and the first panic among them. Aligned to a cache line of its own, so that
/// the driver's thread counting here does not take the line of the slots the scope writes.
#[repr(C, align(64))]
pub(super) struct Chunk {
    /// Functions of the chunk that ran and returned (or panicked): the last thing each
    /// trampoline touches (release), after which the scope may free the chunk.
    pub(super) done: AtomicUsize,
    /// The first panic of a function of the chunk (the functions of one scope run one at a
    /// time, in queue order: the first to lock is the first queued to panic).
    pub(super) panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// The type-independent head of a host function's slot ([`Slot`]), which the scope's list
/// and the trampoline share.
#[repr(C)]
pub(super) struct Header {
    pub(super) state: AtomicU8,
    /// The chunk the slot is in.
    pub(super) chunk: NonNull<Chunk>,
    /// Drops the closure without calling it (after `PENDING` -> `ABANDONED`).
    pub(super) drop_closure: unsafe fn(NonNull<Header>),
}

/// A host function's slot in a chunk: the header, then the closure.
#[repr(C)]
pub(super) struct Slot<F> {
    pub(super) header: Header,
    pub(super) closure: UnsafeCell<ManuallyDrop<F>>,
}

/// The closure of a queued host function, taken by whoever moves its state out of
/// `PENDING` first.
///
/// # Safety
/// `h` is the header of a live `Slot<F>`, whose state the caller moved out of `PENDING`.
pub(super) unsafe fn drop_closure<F>(h: NonNull<Header>) {
    // SAFETY: the caller's promise: a live `Slot<F>`.
    let slot = unsafe { h.cast::<Slot<F>>().as_ref() };
    let closure = slot.closure.get();
    // SAFETY: the caller won the state, so nobody else touches the closure; it has not been
    // taken (only the winner of `PENDING` takes it, once).
    let closure = unsafe { &mut *closure };
    // SAFETY: as above: dropped once, never used again.
    unsafe { ManuallyDrop::drop(closure) };
}

/// What the driver calls (`CUhostFn`): runs the closure of the `Slot<F>` at `data` once,
/// with the crate's driver calls refused, catching a panic; then counts itself done in its
/// chunk, its last access.
///
/// # Safety
/// `data` is a `Slot<F>` queued by [`StreamScope::host_fn`], whose chunk stays allocated as
/// long as the driver may call this (see the module docs: freed only once every function
/// of the chunk has counted itself done, leaked when one was abandoned).
pub(super) unsafe extern "C" fn trampoline<F: FnOnce()>(data: *mut c_void) {
    // SAFETY: the caller's promise.
    let slot = unsafe { &*data.cast::<Slot<F>>() };
    if slot
        .header
        .state
        .compare_exchange(PENDING, RUNNING, Ordering::Acquire, Ordering::Acquire)
        .is_err()
    {
        return; // abandoned by its scope: the closure is gone
    }
    let chunk = slot.header.chunk;
    // SAFETY: this call won `PENDING`, so nobody else touches the closure.
    let closure = unsafe { &mut *slot.closure.get() };
    // SAFETY: as above: it is still there, and taken once.
    let closure = unsafe { ManuallyDrop::take(closure) };
    let outcome = {
        let _refuse_driver_calls = HostFnFlag::set();
        catch_unwind(AssertUnwindSafe(closure))
    };
    // SAFETY: the chunk stays allocated until this function has counted itself done below
    // (the scope waits for the count before it frees the chunk).
    let chunk = unsafe { chunk.as_ref() };
    if let Err(payload) = outcome {
        keep_first_panic(&chunk.panic, payload);
    }
    chunk.done.fetch_add(1, Ordering::Release);
    // the scope may free the chunk from here on: no access after the count
}

/// A chunk of slots, as the scope keeps it.
pub(super) struct ChunkEntry {
    pub(super) base: NonNull<Chunk>,
    pub(super) layout: Layout,
    /// Where the next slot may start, in bytes from `base`.
    pub(super) used: usize,
    /// The chunk's slots are `slots[first..first + queued]` of [`Queued::slots`].
    pub(super) first: usize,
    pub(super) queued: usize,
}

/// A pointer to a queued slot. The slot's closure is `Send`, and the scope's list (the
/// only owner) stays on the scope's thread: the wrapper only keeps raw pointers out of the
/// compiler's explanation of why scopes are not `Send` (see `ScopesStayOnTheirThread`).
pub(super) struct SlotPtr(NonNull<Header>);

// SAFETY: see the type's docs; the pointee is shared with the driver's thread only through
// the atomic state protocol and its chunk's count.
unsafe impl Send for SlotPtr {}

/// The chunks of a scope and the slots in them, in queue order.
#[derive(Default)]
pub(super) struct Queued {
    pub(super) chunks: Vec<ChunkEntry>,
    pub(super) slots: Vec<SlotPtr>,
}

// SAFETY: as `SlotPtr`: the chunks are shared with the driver's threads only through their
// atomic count and their lock.
unsafe impl Send for Queued {}

/// Keeps `p` in `first` if it holds no panic yet; a later one is forgotten (dropping a
/// payload may run code that panics, maybe while a panic unwinds or in a frame that must
/// not unwind).
fn keep_first_panic(first: &Mutex<Option<Box<dyn Any + Send>>>, p: Box<dyn Any + Send>) {
    let mut first = lock(first);
    match *first {
        None => *first = Some(p),
        Some(_) => std::mem::forget(p),
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The host functions a scope queued on its stream, finished at the scope's end.
pub(crate) struct HostFns {
    pub(super) used: AtomicBool,
    pub(super) queued: Mutex<Queued>,
    pub(super) panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl HostFns {
    pub(crate) const fn new() -> Self {
        HostFns {
            used: AtomicBool::new(false),
            queued: Mutex::new(Queued {
                chunks: Vec::new(),
                slots: Vec::new(),
            }),
            panic: Mutex::new(None),
        }
    }

    /// Places `f` in a slot of the scope's chunks (a new chunk when the last one is full)
    /// and lists it, for [`HostFns::finish`]: the driver may be given the slot from here on.
    pub(super) fn place<F: FnOnce() + Send>(&self, f: F) -> NonNull<Header> {
        let slot_layout = Layout::new::<Slot<F>>();
        let mut queued = lock(&self.queued);
        let queued = &mut *queued;
        let fits = queued.chunks.last().and_then(|c| {
            let start = c.used.checked_next_multiple_of(slot_layout.align())?;
            let end = start.checked_add(slot_layout.size())?;
            (end <= c.layout.size() && slot_layout.align() <= c.layout.align()).then_some(start)
        });
        let start = match fits {
            Some(start) => start,
            None => {
                let (layout, start) = Layout::new::<Chunk>()
                    .extend(slot_layout)
                    .expect("a host function's closure fits in memory");
                let layout =
                    Layout::from_size_align(layout.size().max(CHUNK_BYTES), layout.align())
                        .expect("a host function's closure fits in memory");
                // SAFETY: the layout is not zero-sized (it holds a `Chunk`).
                let base = unsafe { std::alloc::alloc(layout) }.cast::<Chunk>();
                let Some(base) = NonNull::new(base) else {
                    std::alloc::handle_alloc_error(layout)
                };
                // SAFETY: freshly allocated with room and alignment for a `Chunk` at its start.
                unsafe {
                    base.write(Chunk {
                        done: AtomicUsize::new(0),
                        panic: Mutex::new(None),
                    })
                };
                queued.chunks.push(ChunkEntry {
                    base,
                    layout,
                    used: start,
                    first: queued.slots.len(),
                    queued: 0,
                });
                start
            }
        };
        let chunk = queued.chunks.last_mut().expect("a chunk was found or made");
        // SAFETY: `start..start + size` lies inside the chunk's allocation and is aligned for
        // `Slot<F>` (checked above, or by `Layout::extend`), and no other slot uses it.
        let slot = unsafe { chunk.base.cast::<u8>().add(start).cast::<Slot<F>>() };
        // SAFETY: as above: in bounds, aligned, unused.
        unsafe {
            slot.write(Slot {
                header: Header {
                    state: AtomicU8::new(PENDING),
                    chunk: chunk.base,
                    drop_closure: drop_closure::<F>,
                },
                closure: UnsafeCell::new(ManuallyDrop::new(f)),
            })
        };
        chunk.used = start + slot_layout.size();
        chunk.queued += 1;
        let header = slot.cast::<Header>();
        queued.slots.push(SlotPtr(header));
        self.used.store(true, Ordering::Relaxed);
        header
    }

    /// Queues `f` on `stream`.
    ///
    /// # Safety
    /// `stream` is live; [`HostFns::finish`] runs after the stream's final wait and before
    /// anything `f` borrows goes away.
    pub(super) unsafe fn queue<F: FnOnce() + Send>(
        &self,
        stream: driver::CUstream,
        f: F,
    ) -> Result<()> {
        if driver::in_host_fn() {
            // refused before a slot is placed: the call would be refused too (nothing queued),
            // and the slot's chunk would be kept for good as abandoned
            return Err(driver::driver_call_refused("cuLaunchHostFunc"));
        }
        // listed before the call: whatever the call returns, the slot is finished by the scope
        // (an error may be an earlier operation's, and this function may still be queued)
        let header = self.place(f);
        // SAFETY: the trampoline matches the slot's type; the slot stays allocated while the
        // driver may call it (`finish`); the caller guarantees the stream.
        unsafe { driver::launch_host_func(stream, trampoline::<F>, header.as_ptr().cast()) }
    }

    /// Finishes every queued function, once the scope's streams have been waited for (also
    /// after a failed wait). A chunk whose functions all counted themselves done is freed
    /// without reading its slots. In any other chunk each function that has not started is
    /// abandoned, the others are waited for until they have counted themselves done, and
    /// then the abandoned closures are dropped here (after every slot's state is settled, so
    /// that a drop that panics strands none); the chunk is freed only if none was abandoned
    /// (the driver may still hold an abandoned slot's address): else it is leaked. Keeps
    /// the first panic found, chunk by chunk (a host function's, then an abandoned
    /// closure's drop's), for [`HostFns::take_panic`].
    pub(crate) fn finish(&self) {
        if !self.used.load(Ordering::Relaxed) {
            return;
        }
        let Queued { chunks, slots } = std::mem::take(&mut *lock(&self.queued));
        for entry in chunks {
            // SAFETY: a live chunk (freed only below, once).
            let chunk = unsafe { entry.base.as_ref() };
            // the slots this call abandoned: first all of them (no user code runs while the
            // states move), then their closures dropped, so that a closure whose drop panics
            // leaves no slot of the scope `PENDING` behind
            let mut abandoned = Vec::new();
            if chunk.done.load(Ordering::Acquire) != entry.queued {
                for &SlotPtr(h) in &slots[entry.first..entry.first + entry.queued] {
                    // SAFETY: a live slot in a live chunk.
                    let header = unsafe { h.as_ref() };
                    let won = header.state.compare_exchange(
                        PENDING,
                        ABANDONED,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    if won.is_ok() {
                        abandoned.push(h);
                    }
                }
                // every other function started: wait until each has counted itself done
                while chunk.done.load(Ordering::Acquire) != entry.queued - abandoned.len() {
                    std::thread::yield_now();
                }
            }
            // the count (acquire) says the trampolines wrote the panic before and touch
            // nothing of the chunk after
            if let Some(p) = lock(&chunk.panic).take() {
                keep_first_panic(&self.panic, p);
            }
            for &h in &abandoned {
                // SAFETY: a live slot whose state this call moved out of `PENDING`, so no
                // trampoline takes its closure; the chunk is leaked below (the driver may
                // still hold the slot's address, and the trampoline reads the state first).
                let header = unsafe { h.as_ref() };
                // a captured value's drop may panic: kept as the scope's panic (resumed at
                // its end), and the other closures are still dropped
                // SAFETY: as above; each abandoned closure is dropped once.
                let dropped =
                    catch_unwind(AssertUnwindSafe(|| unsafe { (header.drop_closure)(h) }));
                if let Err(p) = dropped {
                    keep_first_panic(&self.panic, p);
                }
            }
            if abandoned.is_empty() {
                // SAFETY: every closure was taken by its trampoline, which is done with the
                // chunk; the head's drop is its lock's (the payload was taken above).
                unsafe { std::ptr::drop_in_place(entry.base.as_ptr()) };
                // SAFETY: allocated with this layout in `place`; nothing uses it any more.
                unsafe { std::alloc::dealloc(entry.base.as_ptr().cast(), entry.layout) };
            }
        }
    }

    /// The first panic of a host function, if there was one, once [`HostFns::finish`] has
    /// run: the scope's end ([`run_scope`](crate::scope::run_scope), shared by every scope
    /// form) resumes it or, while another panic unwinds, forgets it.
    pub(crate) fn take_panic(&self) -> Option<Box<dyn Any + Send>> {
        if !self.used.load(Ordering::Relaxed) {
            return None;
        }
        lock(&self.panic).take()
    }
}

impl Drop for HostFns {
    fn drop(&mut self) {
        // Only reached with chunks left when `finish` did not run, which the scopes never
        // allow; leak them rather than free what the driver may still call.
        std::mem::forget(std::mem::take(&mut *lock(&self.queued)));
        // Only reached with a payload if the scope's end did not take it; dropping it may
        // run code that panics, maybe while a panic unwinds: forgotten.
        std::mem::forget(lock(&self.panic).take());
    }
}
