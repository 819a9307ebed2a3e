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
//!             ctx.new_stream()?,
//!             MemoryPool::with_max_size(ctx, 1 << 20)?,
//!             ctx.module_from_ptx(include_str!("../kernels/kernels.ptx"))?,
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
//!             s.copy_to_host(&mut out, c.into_ref())
//!         })?;
//!     }
//!     assert_eq!(out[3], 9.0);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! A partition has phases too ([`SmGroup::enter_phases`], `cuda_brand::partition`): its
//! guards are `ContextGuard<'p, Setup<'s>, Partitioned>` and `ContextGuard<'p, Run,
//! Partitioned>`, the phase and the part being two independent markers, and the
//! partition's teardown frees its setup memory.
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
//!   `event_without_timing`); [`Module`](crate::Module)'s constructors (`module_from_ptx`,
//!   `module_from_ptx_logged`); [`ContextGuard::set_limit`] (the heap and stack limits reserve
//!   device memory). A pool destroyed while memory of it is still allocated (setup buffers,
//!   which only the teardown frees) returns at once; the driver releases the pool once
//!   that memory is freed (`cuMemPoolDestroy`).
//!   The same bound opens to the setup guard what makes no memory the program computes in
//!   but creates or loads: graph capture ([`ContextGuard::capture`]; the graph borrows its
//!   buffers and kernels, so one captured in setup is replayed there, on a preallocated
//!   stream if need be: [`ExecGraph::launch`](crate::ExecGraph::launch) takes any stream),
//!   peer access ([`ContextGuard::enable_peer_access`]),
//!   [`Library::function`](crate::Library::function) and
//!   [`Library::kernel`](crate::Library::kernel) (the library's load into the context
//!   happens there: declare its kernels in setup, and they serve the run phase), and
//!   NVRTC's program loading (feature `nvrtc`). A helper that takes any such guard names
//!   one bound, [`Allocates`](crate::Allocates).
//! * **Takes a guard bounded by [`NoPhases`]**, so it is offered neither in setup nor in
//!   the run phase (each is that trait's error,
//!   `ui-tests/fail/9_typestate/phase_setup_guard_shared_with_other_threads.rs`): the
//!   shared form of the context ([`ContextGuard::share`], whose `enter` hands out a plain
//!   guard on any thread and at any time), NCCL's communicators (NCCL sets up connections
//!   and their buffers at a communicator's first collectives) and the cuBLAS, cuFFT and
//!   cuRAND handles (features `nccl`, `cublas`, `cufft`, `curand`), which allocate
//!   workspace when they choose.
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
//! * a scope over several preallocated streams ([`Stream::scope_pair`](crate::Stream::scope_pair),
//!   [`Stream::scope_all`](crate::Stream::scope_all)) creates one event per stream the first
//!   time it orders that stream's work before another's, and destroys it when the scope
//!   ends (a driver object, no memory the program computes in);
//! * a [`Library`](crate::Library) is loaded with no guard (it belongs to no context), so
//!   one may be loaded during the run phase; its kernels reach a context only through a
//!   guard that may load (the setup guard here), but with `CUDA_MODULE_LOADING=EAGER` the
//!   driver loads a new library into every existing context, a phased one included;
//! * instantiating a graph ([`Graph::instantiate`](crate::Graph::instantiate)) takes the
//!   graph, not a guard, and the driver allocates for the executable graph: instantiate in
//!   setup;
//! * [`with_context`](crate::with_context), [`with_primary_context`](crate::with_primary_context)
//!   and [`with_phases`] called during the run phase create (or retain) a context of their
//!   own, with memory of its own: the phases govern one context;
//! * host memory (`Vec`, and the crate's own bookkeeping: a scope's list of allocations,
//!   error messages) is the program's own.

use crate::context::partition::{Part, Partitioned, SmGroup, Whole};
#[doc(inline)]
pub use crate::context::phase::{
    Allocating, Dynamic, NoPhases, Phase, Preallocated, Run, Setup, StreamKind, Unphased,
};
use crate::context::{self, ContextFlags, ContextGuard, Device};
use crate::error::{Error, Result};

/// The context of [`with_phases`] (or the partition of [`SmGroup::enter_phases`], `S` =
/// [`Partitioned`]) before its setup: [`Phases::setup`] is the only way on.
///
/// # The brand
///
/// Its brand is its guard's (invariant in `'ctx`): the phases of two contexts never have
/// one type:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::{Phases, with_phases};
///
/// /// Takes the phases of one context, twice.
/// fn one_context<'ctx>(_: &Phases<'ctx>, _: &Phases<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_phases(&device, ContextFlags::default(), |a| {
///     with_phases(&device, ContextFlags::default(), |b| {
///         one_context(&a, &b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Phases<'ctx, S: Part = Whole> {
    /// The brand is the guard's, invariant in `'ctx`, so this type is invariant too. `S`
    /// is the part of the device: the whole context of [`with_phases`], or a partition
    /// ([`SmGroup::enter_phases`]); its guards keep it.
    guard: ContextGuard<'ctx, Unphased, S>,
}

impl<S: Part> std::fmt::Debug for Phases<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Phases")
            .field("context", &self.guard)
            .finish()
    }
}

impl<'ctx, S: Part> Phases<'ctx, S> {
    /// Runs the setup phase: `f` creates what the program needs with a setup guard. Returns
    /// what `f` returned and the run-phase guard. Called once: it consumes `self`. In a
    /// partition ([`SmGroup::enter_phases`]) both guards are the partition's (`S` is
    /// [`Partitioned`]): their streams are the partition's.
    #[allow(clippy::type_complexity)]
    pub fn setup<T, E, F>(self, f: F) -> std::result::Result<(T, ContextGuard<'ctx, Run, S>), E>
    where
        F: for<'s> FnOnce(ContextGuard<'ctx, Setup<'s>, S>) -> std::result::Result<T, E>,
    {
        let built = f(self.guard.with_phase())?;
        // the run phase allocates no staging for bulk copies: it uses what setup reserved
        // (`ContextGuard::reserve_staging`), or the driver's own path
        crate::memory::staging::freeze(self.guard.unphased(), true);
        // and creates nothing for its synchronous operations: this thread's sync stream in
        // the context is made now (`docs/design/ordering.md`)
        let raw = self.guard.raw();
        let _ = self.guard.with_current(|| {
            // SAFETY: the guard's context is alive, and current inside `with_current`.
            unsafe { crate::synchronous::prepare(raw) };
            Ok(())
        });
        Ok((built, self.guard.with_phase()))
    }
}

impl<S: Part> ContextGuard<'_, Setup<'_>, S> {
    /// Reserves the page-locked staging memory that bulk copies between the device and
    /// pageable host memory use (see [`DeviceBuffer`](crate::DeviceBuffer)'s documentation):
    /// in the run phase such copies use it instead of allocating; without it they take the
    /// driver's plain path. Without the `staging` feature (on by default) no copy is staged
    /// and this reserves nothing.
    pub fn reserve_staging(self) -> Result<()> {
        crate::memory::staging::reserve(self.unphased())
    }
}

impl SmGroup<'_> {
    /// [`SmGroup::enter`], in two phases: `f` gets the partition's [`Phases`], sets up with
    /// [`Phases::setup`] (a `ContextGuard<'p, Setup<'s>, Partitioned>`), then runs with
    /// what it built and the partition's run guard (`ContextGuard<'p, Run, Partitioned>`),
    /// as in [`with_phases`]: the run phase allocates, loads and creates nothing, and the
    /// memory made during setup is freed only by the partition's teardown, before its
    /// synchronization. Every stream either guard makes is the partition's.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::with_partitions;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_partitions(&device, |sms| {
    ///     let (part, _rest) = sms.split(16)?;
    ///     part.enter_phases(|phases| {
    ///         let ((buf, stream), run) =
    ///             phases.setup(|p| Ok::<_, Error>((p.from_slice(&[1u32, 2, 3])?, p.new_stream()?)))?;
    ///         stream.synchronize()?; // the partition's stream, made in setup
    ///         assert_eq!(buf.to_vec()?, [1, 2, 3]);
    ///         run.synchronize()
    ///     })
    /// })
    /// # }
    /// ```
    ///
    /// The partition's run guard allocates nothing, as any run guard
    /// ([`Allocating`]'s error):
    ///
    /// ```compile_fail,E0277
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::with_partitions;
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let device = Device::get(0)?;
    /// with_partitions(&device, |sms| {
    ///     let (part, _rest) = sms.split(16)?;
    ///     part.enter_phases(|phases| {
    ///         let ((), run) = phases.setup(|_| Ok::<_, Error>(()))?;
    ///         run.zeroed::<u32>(4)?; // the run phase allocates nothing: does not compile
    ///         Ok::<_, Error>(())
    ///     })
    /// })
    /// # }
    /// ```
    pub fn enter_phases<R, E, F>(self, f: F) -> std::result::Result<R, E>
    where
        F: for<'p> FnOnce(Phases<'p, Partitioned>) -> std::result::Result<R, E>,
        E: From<Error>,
    {
        self.enter_with(|guard| f(Phases { guard }), true)
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
    unsafe {
        context::with_context_then(
            device,
            flags,
            |guard| f(Phases { guard }),
            context::deferred::free_deferred,
        )
    }
}
