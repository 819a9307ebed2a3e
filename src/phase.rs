//! Setup and run phases ([`with_phases`]): a context whose programs allocate, load and
//! create only while setting up, then run with a guard that cannot.
//!
//! Safety-critical coding rules (AUTOSAR C++14 A18-5-5 and A18-5-7, MISRA C++:2023 21.6.1,
//! NVIDIA's CUDA guidelines for robust and safety-critical programming) allow dynamic memory
//! only while a program initializes. [`with_phases`] makes that a compile-time property:
//!
//! 1. [`Phases::setup`] hands its closure a `ContextGuard<'ctx, Setup<'s>>`: buffers, pools,
//!    streams, events and modules are created with it exactly as with a plain guard.
//!    `'s` ends with the closure, so this guard cannot be kept for later.
//! 2. It returns what the closure built together with a `ContextGuard<'ctx, Run>`, which
//!    cannot allocate, load or create: every constructor that does takes a guard bounded by
//!    [`Allocating`], which `Run` is not, so calling one with the run guard is a compile
//!    error with that trait's message (the list is below). Streams created during setup are
//!    `Stream<'ctx, Preallocated>`: their scopes copy, fill and launch, and draw scratch
//!    memory only from a pool reserved during setup
//!    ([`StreamScope::alloc_in`](crate::StreamScope::alloc_in),
//!    [`alloc_zeroed_in`](crate::StreamScope::alloc_zeroed_in)), which fails with
//!    `CUDA_ERROR_OUT_OF_MEMORY` once the pool's bound is reached and is freed, in stream
//!    order, when the scope ends; the scope methods that allocate from the crate's pool do
//!    not exist for them.
//! 3. Memory created during setup is never freed before the context's teardown, whichever
//!    way it was made (device buffers from the crate's pool or from a pool of the program's,
//!    pinned, managed and pitched buffers): dropping one during the run phase (say, popped
//!    from a `Vec`) frees nothing, and a pool's [`used_bytes`](crate::MemoryPool::used_bytes)
//!    still count it; the teardown of [`with_phases`] frees every one of them, after
//!    synchronizing the context.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::{with_phases, MemoryPool};
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! let host: Vec<f32> = (0..1024).map(|i| i as f32).collect();
//! with_phases(&device, ContextFlags::default(), |phases| {
//!     // setup: every allocation of the program
//!     let ((a, mut c, stream, scratch, module), _run) = phases.setup(|ctx| {
//!         Ok::<_, Error>((
//!             ctx.from_slice(&host)?,
//!             ctx.zeroed::<f32>(host.len())?,
//!             ctx.stream()?,
//!             MemoryPool::with_max_size(ctx, 1 << 20)?,
//!             ctx.load_ptx(include_str!("../kernels/kernels.ptx"))?,
//!         ))
//!     })?;
//!     // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t).
//!     let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
//!     // run: no allocation possible but from the bounded pool
//!     let mut out = vec![0.0f32; host.len()];
//!     for _ in 0..10 {
//!         stream.scope(|s| {
//!             let tmp = s.alloc_zeroed_in::<f32>(&scratch, host.len())?;
//!             let c = s.bind_mut(&mut c);
//!             s.launch(&add, add.config_for(host.len())?, (&a, &a, tmp))?;
//!             s.launch(&add, add.config_for(host.len())?, (tmp, &a, c))?;
//!             s.copy_to_host(&mut out, c)
//!         })?;
//!     }
//!     assert_eq!(out[3], 9.0);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! The phases cost nothing where the program runs: `ContextGuard<'ctx, Run>` and
//! `Stream<'ctx, Preallocated>` are one pointer wide like their plain forms (asserted in
//! the crate root), and a scope of a preallocated stream is the same code as any other.
//!
//! The staging memory of bulk copies is frozen when the run phase starts (reserve it in
//! setup with [`ContextGuard::reserve_staging`], or run-phase copies take the driver's
//! plain path).
//!
//! # Every path that allocates or creates
//!
//! * **Takes a guard bounded by [`Allocating`]** (a plain or a setup guard; the run guard is
//!   a compile error, `ui-tests/fail/9_typestate/phase_run_guard_*`), and what it makes
//!   with the setup guard is freed only by the teardown:
//!   [`DeviceBuffer`](crate::DeviceBuffer)'s `zeroed`, `from_slice`, `uninitialized` and
//!   their pool forms `zeroed_in`, `from_slice_in`, `uninitialized_in` (the guard's
//!   `zeroed`, `from_slice`, `zeroed_in`, `from_slice_in`);
//!   [`PinnedBuffer`](crate::PinnedBuffer)'s `zeroed` and `from_slice` (`pinned_zeroed`,
//!   `pinned_from_slice`); [`ManagedBuffer`](crate::ManagedBuffer)'s `zeroed` and
//!   `from_slice`; [`DeviceBuffer2D::zeroed`](crate::DeviceBuffer2D::zeroed) and
//!   [`DeviceBuffer3D::zeroed`](crate::DeviceBuffer3D::zeroed).
//! * **Takes a guard bounded by [`Allocating`], destroyed when dropped** (dropping one in
//!   the run phase destroys it: none of them is memory the program computes in):
//!   [`MemoryPool`](crate::MemoryPool)'s `new`, `with_max_size`, `of_device` and
//!   `device_default`; [`Stream`](crate::Stream)'s `new` and `with_priority` (`stream`);
//!   [`Event`](crate::Event)'s `new` and `without_timing` (`event`,
//!   `event_without_timing`); [`Module`](crate::Module)'s constructors (`load_ptx`,
//!   `load_ptx_with`); [`ContextGuard::set_limit`] (the heap and stack limits reserve
//!   device memory). A pool destroyed while memory of it is still allocated (setup buffers,
//!   which only the teardown frees) returns at once; the driver releases the pool once
//!   that memory is freed (`cuMemPoolDestroy`).
//! * **Takes a plain guard only**, so it is offered neither in setup nor in the run phase
//!   (a phased context never hands out a plain guard; passing a phase's guard is a type
//!   mismatch): graph capture ([`ContextGuard::capture`]), peer access
//!   ([`ContextGuard::enable_peer_access`]), [`Library::function`](crate::Library::function)
//!   and [`Library::kernel`](crate::Library::kernel), NVRTC's program loading and NCCL's
//!   communicators (features `nvrtc`, `nccl`).
//! * **Scratch of a preallocated stream's scope**: `alloc_in` and `alloc_zeroed_in` from a
//!   pool made in setup, bounded by the pool, freed when the scope ends (2. above). The
//!   bound is the one the program gives: a pool of
//!   [`MemoryPool::with_max_size`](crate::MemoryPool::with_max_size) with a size. A pool
//!   without one (`with_max_size(ctx, 0)`, `new`, and the device's pools that `of_device`
//!   and `device_default` view) is bounded only by the device's memory, and so is every
//!   pool on a driver older than CUDA 12.2, which ignores the size (see `with_max_size`).
//!
//! What the phases do not cover:
//!
//! * looking a kernel up ([`Module::function`](crate::Module::function),
//!   [`Module::kernel`](crate::Module::kernel)) takes the module, not a guard, and a kernel
//!   borrows its module, so it is looked up after the setup closure has returned. With lazy
//!   loading (`CUDA_MODULE_LOADING=LAZY`, the default on Linux since CUDA 12.2) a module's
//!   load does not load its kernels: the lookup does (`cuModuleGetFunction`), with device
//!   memory for their code. Look every kernel up once before the loop that must not
//!   allocate, as the example above does, or set `CUDA_MODULE_LOADING=EAGER`;
//! * a scope over several preallocated streams ([`Stream::scope_with`](crate::Stream::scope_with),
//!   [`Stream::scope_all`](crate::Stream::scope_all)) creates one event per stream the first
//!   time it orders that stream's work before another's, and destroys it when the scope
//!   ends (a driver object, no memory the program computes in);
//! * a [`Library`](crate::Library) is loaded with no guard (it belongs to no context), so
//!   one may be loaded during the run phase; its kernels reach a context only through a
//!   plain guard, but with `CUDA_MODULE_LOADING=EAGER` the driver loads a new library into
//!   every existing context, a phased one included;
//! * [`with_context`](crate::with_context), [`with_primary_context`](crate::with_primary_context)
//!   and [`with_phases`] called during the run phase create (or retain) a context of their
//!   own, with memory of its own: the phases govern one context;
//! * host memory (`Vec`, and the crate's own bookkeeping: a scope's list of allocations,
//!   error messages) is the program's own.

use std::marker::PhantomData;
use std::sync::Mutex;

use crate::context::{self, ContextFlags, ContextGuard};
use crate::device::Device;
use crate::driver::{self, CUcontext, CUdeviceptr};
use crate::error::{Error, Result};

mod sealed {
    pub trait Phase {}
    pub trait StreamKind {}
}

/// The phase a [`ContextGuard`] is in: [`Unphased`] (a plain [`with_context`](crate::with_context)
/// guard), [`Setup`] or [`Run`]. Sealed.
pub trait Phase: sealed::Phase + Copy {
    /// The kind of the streams a guard of this phase creates: [`Dynamic`] without phases,
    /// [`Preallocated`] in setup. (A run-phase guard creates none; its `Preallocated` only
    /// keeps the signatures of the creating methods free of the [`Allocating`] bound, so
    /// that calling one with it is the `Allocating` error, not a missing method.)
    type Streams: StreamKind;
}

/// A phase whose guard may allocate, load and create: [`Unphased`] and [`Setup`]. Sealed.
///
/// Every public constructor that allocates memory (device, pool, pinned, managed, pitched)
/// or creates a pool, stream, event or module takes a guard of such a phase, or has no
/// phased form at all (it takes a plain guard, which a phased context never hands out).
/// With a run-phase guard each is this trait's error.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot allocate, load or create: this guard is in the run phase",
    label = "a run-phase guard, given where a guard that may allocate is needed",
    note = "in `with_phases`, every buffer, pool, stream, event and module is made in `Phases::setup`: move this there",
    note = "see `cuda_brand::phase`"
)]
pub trait Allocating: Phase {
    /// Whether memory made with this guard is freed only by the teardown.
    #[doc(hidden)]
    const DEFERS_FREES: bool;
}

/// The guard of a context without phases: every operation is available at any time.
#[derive(Debug, Clone, Copy)]
pub struct Unphased;

/// The guard of the setup phase of [`with_phases`]; `'s` is the setup closure's, so the
/// guard cannot outlive it.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'s>(PhantomData<fn(&'s ()) -> &'s ()>);

/// The guard of the run phase of [`with_phases`]: queries and synchronization only; no
/// method that allocates, loads or creates.
#[derive(Debug, Clone, Copy)]
pub struct Run;

impl sealed::Phase for Unphased {}
impl Phase for Unphased {
    type Streams = Dynamic;
}
impl sealed::Phase for Setup<'_> {}
impl Phase for Setup<'_> {
    type Streams = Preallocated;
}
impl sealed::Phase for Run {}
impl Phase for Run {
    type Streams = Preallocated;
}

impl Allocating for Unphased {
    const DEFERS_FREES: bool = false;
}

impl Allocating for Setup<'_> {
    const DEFERS_FREES: bool = true;
}

/// What a stream's scopes may do with memory: [`Dynamic`] or [`Preallocated`]. Sealed.
pub trait StreamKind: sealed::StreamKind {}

/// A stream of a context without phases: its scopes may allocate from the crate's pool
/// ([`StreamScope::alloc`](crate::StreamScope::alloc) and the like).
#[derive(Debug, Clone, Copy)]
pub struct Dynamic;

/// A stream created during the setup phase of [`with_phases`]: its scopes draw scratch
/// memory only from pools ([`StreamScope::alloc_in`](crate::StreamScope::alloc_in)).
#[derive(Debug, Clone, Copy)]
pub struct Preallocated;

impl sealed::StreamKind for Dynamic {}
impl StreamKind for Dynamic {}
impl sealed::StreamKind for Preallocated {}
impl StreamKind for Preallocated {}

/// The context of [`with_phases`] before its setup: [`Phases::setup`] is the only way on.
pub struct Phases<'ctx> {
    guard: ContextGuard<'ctx>,
}

impl std::fmt::Debug for Phases<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Phases")
            .field("context", &self.guard)
            .finish()
    }
}

impl<'ctx> Phases<'ctx> {
    /// Runs the setup phase: `f` creates what the program needs with a setup guard. Returns
    /// what `f` returned and the run-phase guard. Called once: it consumes `self`.
    pub fn setup<T, E, F>(self, f: F) -> std::result::Result<(T, ContextGuard<'ctx, Run>), E>
    where
        F: for<'s> FnOnce(ContextGuard<'ctx, Setup<'s>>) -> std::result::Result<T, E>,
    {
        let built = f(self.guard.with_phase())?;
        // the run phase allocates no staging for bulk copies: it uses what setup reserved
        // (`ContextGuard::reserve_staging`), or the driver's own path
        crate::staging::freeze(self.guard, true);
        Ok((built, self.guard.with_phase()))
    }
}

impl ContextGuard<'_, Setup<'_>> {
    /// Reserves the page-locked staging memory that bulk copies between the device and
    /// pageable host memory use (see [`DeviceBuffer`](crate::DeviceBuffer)'s documentation):
    /// in the run phase such copies use it instead of allocating; without it they take the
    /// driver's plain path.
    pub fn reserve_staging(self) -> Result<()> {
        crate::staging::reserve(self.unphased())
    }
}

/// Like [`with_context`](crate::with_context), in two phases: `f` gets the context's
/// [`Phases`], sets up with [`Phases::setup`], then runs with what it built and the run
/// guard. At the end, after synchronizing, the teardown frees all memory made during
/// setup (see the [module documentation](self)), then pops and destroys the context.
pub fn with_phases<R, E, F>(device: &Device, flags: ContextFlags, f: F) -> std::result::Result<R, E>
where
    F: for<'ctx> FnOnce(Phases<'ctx>) -> std::result::Result<R, E>,
    E: From<Error>,
{
    // SAFETY: `free_deferred` runs in the teardown while the context is current and every
    // branded value is gone.
    unsafe { context::with_context_then(device, flags, |guard| f(Phases { guard }), free_deferred) }
}

/// Memory made during a setup phase, freed by its context's teardown.
struct Deferred {
    context: usize,
    ptr: usize,
    kind: Kind,
}

/// How deferred memory is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Device memory of a pool: `cuMemFreeAsync` on the legacy stream.
    Pool,
    /// Device memory from `cuMemAlloc`, `cuMemAllocPitch` or `cuMemAllocManaged`:
    /// `cuMemFree`.
    Plain,
    /// Page-locked host memory: `cuMemFreeHost`.
    Pinned,
}

/// Frees `ptr` as `kind` says, with `context` current.
///
/// # Safety
/// `ptr` is memory of `kind` made in the live `context`, given up by its owner, unused.
unsafe fn free(context: CUcontext, ptr: usize, kind: Kind) -> Result<()> {
    let Some(ctx) = std::ptr::NonNull::new(context) else {
        return Ok(());
    };
    match kind {
        // SAFETY: the caller's promise.
        Kind::Pool => unsafe { crate::memory::free_buffer_memory(ctx, ptr as CUdeviceptr, false) },
        // SAFETY: the caller's promise.
        Kind::Plain => unsafe { crate::memory::free_buffer_memory(ctx, ptr as CUdeviceptr, true) },
        Kind::Pinned => {
            let free_host = || {
                // SAFETY: the caller gives up `ptr`, from `cuMemHostAlloc`.
                unsafe { driver::mem_free_host(ptr as *mut std::ffi::c_void) }
            };
            // SAFETY: the caller's promise: the context is alive.
            unsafe { context::in_context(ctx, free_host) }
        }
    }
}

/// The buffers of every context in its setup or run phase, in the order they were made.
static DEFERRED: Mutex<Vec<Deferred>> = Mutex::new(Vec::new());

fn deferred() -> std::sync::MutexGuard<'static, Vec<Deferred>> {
    DEFERRED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records memory made with a setup guard of `context`: its teardown frees it. On failure
/// (no host memory for the record) frees it now and reports the error.
pub(crate) fn defer_free(context: CUcontext, ptr: usize, kind: Kind) -> Result<()> {
    let mut list = deferred();
    if list.try_reserve(1).is_err() {
        drop(list);
        // SAFETY: just allocated in `context`, never handed out.
        let _ = unsafe { free(context, ptr, kind) };
        return Err(Error::with_detail(
            "with_phases",
            crate::error::ErrorCode::OutOfMemory,
            "no host memory to record a setup-phase buffer",
        ));
    }
    list.push(Deferred {
        context: context as usize,
        ptr,
        kind,
    });
    Ok(())
}

/// Frees the buffers deferred for `context`, after synchronizing it (the context is
/// current). Returns the first error.
fn free_deferred(context: CUcontext) -> Result<()> {
    let mine: Vec<Deferred> = {
        let mut list = deferred();
        let (mine, others) = std::mem::take(&mut *list)
            .into_iter()
            .partition(|d| d.context == context as usize);
        *list = others;
        mine
    };
    if mine.is_empty() {
        return Ok(());
    }
    let mut first = driver::ctx_synchronize();
    for d in mine {
        // SAFETY: allocated in `context` during its setup phase; the context is idle and
        // every buffer handle is gone (the brand cannot leave the closure); freed once,
        // since the record was taken off the list.
        first = first.and(unsafe { free(context, d.ptr, d.kind) });
    }
    first
}

/// Takes the buffer at `ptr` off its teardown's list (its owner gave it up with
/// `into_raw_parts`).
pub(crate) fn undefer(ptr: usize) {
    let mut list = deferred();
    if let Some(i) = list.iter().position(|d| d.ptr == ptr) {
        list.swap_remove(i);
    }
}
