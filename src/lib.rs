//! The CUDA driver API with lifetime-branded contexts: using one context's memory, streams
//! or kernels in another context, keeping any of them after their context is gone, sending
//! a context's guard to another thread, or freeing memory that queued GPU work still uses
//! is a compile error, not a run-time failure.
//!
//! Everything starts with [`with_context`] (or [`with_primary_context`]), which creates a
//! context, hands a closure a [`ContextGuard<'ctx>`](ContextGuard), and synchronizes, pops
//! and destroys the context when the closure returns. The lifetime `'ctx` is the context's
//! *brand*: a fresh, invariant lifetime that every value made from the guard carries, that
//! no two contexts share, and that cannot leave the closure. The [`context`] module has the
//! soundness argument.
//!
//! The crate loads the driver library (`libcuda.so.1`, `nvcuda.dll`) at run time: building
//! needs no CUDA toolkit or driver, running needs a CUDA 11.4 (R470) or newer driver.
//!
//! # Allocate, copy, launch, copy back
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let device = Device::get(0)?;
//!     with_context(&device, ContextFlags::default(), |ctx| {
//!         // device memory, filled from the host
//!         let a = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
//!         let b = ctx.from_slice(&[10.0f32, 20.0, 30.0])?;
//!         let mut c = ctx.zeroed::<f32>(3)?;
//!         // the kernel: declaring its parameter list is the one promise the crate cannot check
//!         // (the crate's sample kernels, compiled into it: `cuda_brand::samples`)
//!         let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
//!         // SAFETY: `vector_add(const float *a, size_t a_len, const float *b, size_t b_len,
//!         // float *c, size_t c_len)` reads a and b, writes c, and stays below the lengths.
//!         let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
//!         // the launch, on a stream; the scope borrows a, b and c until the stream is done
//!         let stream = ctx.new_stream()?;
//!         stream.scope(|s| s.launch(&add, add.config_for(3)?, (&a, &b, &mut c)))?;
//!         // and back to the host
//!         assert_eq!(c.to_vec()?, [11.0, 22.0, 33.0]);
//!         Ok(())
//!     }) // synchronized, popped and destroyed here: nothing branded `'ctx` is left
//! }
//! ```
//!
//! # The rules
//!
//! Each rule is a compile error, pinned by a folder of compile-fail cases in the
//! repository's `ui-tests/fail/`, each case with the compiler's full message committed
//! next to it. The list is `docs/rules.md`, the same words as the README's and the
//! [`guide`]'s:
//!
#![doc = include_str!("../docs/rules.md")]
//!
//! Rule 2, as in `ui-tests/fail/2_one_context/buffers_of_two_contexts_copied.rs`: a buffer
//! of context `a` cannot take a copy of a buffer of context `b`.
//!
//! ```compile_fail,E0521
//! use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let device = Device::get(0)?;
//!     with_context(&device, ContextFlags::default(), |a| {
//!         let mut in_a = DeviceBuffer::<u32>::zeroed(a, 4)?;
//!         with_context(&device, ContextFlags::default(), |b| {
//!             let in_b = DeviceBuffer::from_slice(b, &[1u32, 2, 3, 4])?;
//!             in_a.copy_from_device(&in_b)
//!         })?;
//!         println!("{:?}", in_a.to_vec()?);
//!         Ok(())
//!     })
//! }
//! ```
//!
//! The first of the two errors the compiler gives (the case's `.stderr` file has both):
//!
//! ```text
//! error[E0521]: borrowed data escapes outside of closure
//!   --> ui-tests/fail/2_one_context/buffers_of_two_contexts_copied.rs:20:13
//!    |
//! 17 |         let mut in_a = DeviceBuffer::<u32>::zeroed(a, 4)?;
//!    |             -------- `in_a` declared here, outside of the closure body
//! 18 |         with_context(&device, ContextFlags::default(), |b| {
//!    |                                                         - `b` is a reference that is only valid in the closure body
//! 19 |             let in_b = DeviceBuffer::from_slice(b, &[1u32, 2, 3, 4])?;
//! 20 |             in_a.copy_from_device(&in_b)
//!    |             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^ `b` escapes the closure body here
//!    |
//!    = note: requirement occurs because of a mutable reference to `DeviceSlice<'_, u32>`
//!    = note: mutable references are invariant over their type parameter
//! ```
//!
//! # State that outlives a closure
//!
//! Servers, event loops, async tasks and `static` caches keep GPU state between calls, which
//! branded values cannot do. The [`owned`] layer holds it in `'static` handles
//! ([`OwnedContext`](owned::OwnedContext), [`OwnedDeviceBuffer`](owned::OwnedDeviceBuffer),
//! ...) and binds them to a guard where they are used, after one compare, so every rule
//! holds again there (the [`guide`], chapter 11).
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};
//!
//! /// State kept between requests: `'static`, `Send + Sync`.
//! struct Server {
//!     home: OwnedContext,
//!     weights: OwnedDeviceBuffer<f32>,
//! }
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let home = OwnedContext::primary(&Device::get(0)?)?;
//!     let weights = home.enter(|ctx| home.unbind(ctx, ctx.from_slice(&[0.5f32; 1024])?))?;
//!     let server = std::sync::Arc::new(Server { home, weights });
//!     // a request, on another thread: enter, bind (one compare), and the rules hold again
//!     let request = std::thread::spawn(move || {
//!         server.home.enter(|ctx| {
//!             let weights = server.weights.bind(ctx)?; // `&DeviceBuffer<'ctx, f32>`
//!             Ok::<f32, cuda_brand::Error>(weights.to_vec()?.iter().sum())
//!         })
//!     });
//!     assert_eq!(request.join().unwrap()?, 512.0);
//!     Ok(())
//! }
//! ```
//!
//! # Your own types in GPU memory
//!
//! `#[derive(DeviceCopy)]` (feature `derive`, on by default) makes a `#[repr(C)]` struct of
//! plain data a [`DeviceCopy`](trait@DeviceCopy) type, and checks at compile time what the
//! trait asks: the `repr`, every field plain data, no padding anywhere. See
//! [`derive@DeviceCopy`].
//!
//! # Safety profile
//!
//! Every item of the crate is in every build: no feature removes one (Cargo unifies the
//! features of a build, so a feature that removed items would remove them from every
//! crate of the build). A program that must show, by compiling, that it uses none of the
//! crate's escape hatches opts in itself, with the compiler's `unsafe_code` lint: every
//! escape hatch is an `unsafe fn`, so a crate that denies `unsafe` code everywhere except
//! in one module of kernel declarations uses none.
//!
//! ```no_run
//! #![deny(unsafe_code)] // at the crate's root: `deny`, not `forbid` (see below)
//!
//! use cuda_brand::prelude::*;
//!
//! /// The program's kernel declarations: its only `unsafe` code, each with its promise.
//! #[allow(unsafe_code)]
//! mod kernels {
//!     use cuda_brand::{In, Kernel, Module, Out};
//!
//!     /// `vector_add(const float *a, size_t a_len, const float *b, size_t b_len,
//!     /// float *c, size_t c_len)`.
//!     pub fn vector_add<'m, 'ctx>(
//!         module: &'m Module<'ctx>,
//!     ) -> cuda_brand::Result<Kernel<'m, 'ctx, (In<f32>, In<f32>, Out<f32>)>> {
//!         // SAFETY: it reads a and b, writes c, and stays below the lengths.
//!         unsafe { module.kernel("vector_add") }
//!     }
//! }
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let device = Device::get(0)?;
//!     with_context(&device, ContextFlags::default(), |ctx| {
//!         let module = ctx.module_from_ptx(include_str!("../kernels/kernels.ptx"))?;
//!         let add = kernels::vector_add(&module)?;
//!         let a = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
//!         let b = ctx.from_slice(&[10.0f32, 20.0, 30.0])?;
//!         let mut c = ctx.zeroed::<f32>(3)?;
//!         ctx.new_stream()?.scope(|s| s.launch(&add, add.config_for(3)?, (&a, &b, &mut c)))?;
//!         assert_eq!(c.to_vec()?, [11.0, 22.0, 33.0]);
//!         Ok(())
//!     })
//! }
//! ```
//!
//! Outside that module, the lint refuses every escape hatch, each an `unsafe fn`:
//!
//! * the raw handles, which outlive the value they came from and reach the driver
//!   without a brand or a scope: `as_raw` of [`ContextGuard`], [`SharedContext`],
//!   [`Stream`], [`Event`] and [`Recorded`], [`Module`], [`Function`], [`Library`],
//!   [`MemoryPool`], [`Graph`], [`ExecGraph`] and `nccl::Communicator`; `as_device_ptr`
//!   of [`DeviceSlice`] (so of [`DeviceBuffer`] and [`ManagedBuffer`] through it), of the
//!   scope views [`DeviceRef`] and [`DeviceMut`], of [`DeviceBuffer2D`] and
//!   [`DeviceBuffer3D`]; [`DeviceBuffer::into_raw_parts`];
//! * [`with_raw_context`], which brands a context made elsewhere;
//! * [`Module::from_binary_unchecked`] and [`Library::from_binary_unchecked`], images the
//!   driver reads unchecked ([`Module::from_binary`] checks them);
//! * the allocations of uninitialized memory: [`DeviceBuffer::uninitialized`] and
//!   [`uninitialized_in`](DeviceBuffer::uninitialized_in), [`StreamScope::alloc`] and
//!   [`alloc_in`](StreamScope::alloc_in) (use `zeroed`, `alloc_zeroed`, `from_slice`);
//! * a hand-written `unsafe impl DeviceCopy`, and any `unsafe` of the program's own (FFI
//!   calls with a handle from elsewhere). `#[derive(DeviceCopy)]` passes: its `unsafe impl`
//!   is checked by the derive and carries its own `#[allow(unsafe_code)]`.
//!
//! A call of one, for example a stream's raw handle, is then an error:
//!
//! ```compile_fail
//! #![deny(unsafe_code)]
//!
//! use cuda_brand::prelude::*;
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let device = Device::get(0)?;
//!     with_context(&device, ContextFlags::default(), |ctx| {
//!         let stream = ctx.new_stream()?;
//!         // SAFETY: only printed.
//!         let handle = unsafe { stream.as_raw() }; // error: usage of an `unsafe` block
//!         println!("{handle:?}");
//!         Ok(())
//!     })
//! }
//! ```
//!
//! What stays `unsafe`, to be allowed in the declarations module, are the promises no
//! compiler can check: a kernel's parameter list and what it touches ([`Module::kernel`],
//! [`Module::kernel_mut`], [`Function::typed`], [`Library::kernel`]), and with the `nccl`
//! feature `nccl::Communicator::init_rank` (the other ranks, in other processes, issue the
//! same operations). Write `deny`, not `forbid`: `forbid` cannot be allowed again, not by
//! the declarations module and not by the derive. Safe, and so allowed everywhere, being
//! no escape: [`Device::as_raw`] (a device: nothing the crate owns, frees or brands, valid
//! for the whole process), the [`sys`] types (a type alone reaches no driver call), and
//! the numeric conversions of the crate's enums (`ErrorCode::raw`/`from_raw`, ...).
//!
//! A kernel with pointer parameters ([`InPtr`], [`OutPtr`]) asks more of the declarations
//! module: its declaration promises how far the kernel reaches *for every launch the
//! program makes* (the scalar arguments and configuration included; [`Module::kernel`],
//! its section "Pointer parameters"), and launches are safe code that the lint lets through
//! anywhere. Keep such a kernel inside the module, behind a function that makes its
//! launches (the guide's `Saxpy`, chapter 6), so that the module's review covers them; a
//! `Kernel` of it handed out lets code outside break the module's promise with no
//! `unsafe` of its own. Kernels declared with slices ([`In`], [`Out`]) have no such
//! condition: their promise holds for any launch.
//!
//! The lint covers the crate that turns it on (and code its own `macro_rules!` expand to
//! there), not its dependencies: a library that takes a raw handle does so under its own
//! `unsafe`, to be reviewed as any dependency's `unsafe` is.
//!
//! The repository's `ui-tests/safety-profile/` has one case per escape hatch, each a
//! program with `#![deny(unsafe_code)]` that the lint refuses, and pass cases (the program
//! above; derived `DeviceCopy` types); `cargo test --test ui` runs them.
//!
//! # Where to read on
//!
//! * The [`guide`]: every rule in turn, with the C program that goes wrong and what it
//!   printed on a GPU, the compile error, the fix, and what rustacuda, cust and cudarc do.
//! * `SOUNDNESS.md`, at the root of the repository and of the published package: what the
//!   brand does not cover and the rule for each (sealed traits, checked module images,
//!   ordering between the streams of one scope, aliasing inside one operation, module
//!   globals), and every `unsafe` API and `unsafe impl` with the test that pins it.
//! * `docs/driver-facts.md`, next to it: what the driver, rustacuda and cudarc do with the
//!   same misuses, and what the driver's calls cost, each fact with the committed program
//!   that measured it and its recorded output.
//! * The main types: [`with_context`] and [`ContextGuard`] (a context and its brand);
//!   [`DeviceBuffer`] and [`DeviceSlice`] (device memory, like `Vec<T>` and `[T]`);
//!   [`PinnedBuffer`] (page-locked host memory); [`Stream::scope`] and [`StreamScope`]
//!   (asynchronous copies, fills, allocations and launches); [`Module::kernel`] and
//!   [`Kernel`] (typed kernels); [`JitOptions`] (loading with the JIT compiler's options
//!   and its log); [`Library`] (code loaded once for every context); [`LaunchConfig`]'s
//!   launch attributes (clusters, cooperative launches, priorities); `nvrtc` (runtime
//!   compilation of CUDA C++, the `nvrtc` feature); [`ContextGuard::capture`], [`ExecGraph`] and
//!   [`ExecGraph::launch`] (graphs, [`graph`]); [`StreamScope::host_fn`] (host
//!   functions, [`scope::host_fn`]); [`PeerAccess`] and [`copy_peer`] (several devices);
//!   [`owned`] (state that outlives a closure, awaited batches); [`with_partitions`] (SM
//!   partitions that keep one workload from starving another, [`partition`]); [`Error`]
//!   (every failure, naming the driver call).

#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(
    clippy::undocumented_unsafe_blocks,
    clippy::multiple_unsafe_ops_per_block
)]

// `#[derive(DeviceCopy)]` names the crate `::cuda_brand`, as users see it; this makes
// that path work inside the crate too (its unit tests).
extern crate self as cuda_brand;

pub mod context;
#[cfg(feature = "cublas")]
pub mod cublas;
#[cfg(feature = "cufft")]
pub mod cufft;
#[cfg(feature = "curand")]
pub mod curand;
mod driver;
mod error;
pub mod graph;
pub mod launch;
pub mod memory;
pub mod module;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod owned;
pub use context::partition;
pub mod phase;
pub mod samples;
pub mod scope;
mod span;
pub mod stream;
mod synchronous;
mod tracker;
#[doc = include_str!("../docs/guide/README.md")]
#[doc = include_str!("../docs/rules.md")]
pub mod guide {
    #[doc = include_str!("../docs/guide/01-contexts.md")]
    pub mod ch01_contexts {}
    #[doc = include_str!("../docs/guide/02-context-lifetime.md")]
    pub mod ch02_context_lifetime {}
    #[doc = include_str!("../docs/guide/03-one-context.md")]
    pub mod ch03_one_context {}
    #[doc = include_str!("../docs/guide/04-threads.md")]
    pub mod ch04_threads {}
    #[doc = include_str!("../docs/guide/05a-stream-scopes.md")]
    pub mod ch05a_stream_scopes {}
    #[doc = include_str!("../docs/guide/05b-events-and-deadlines.md")]
    pub mod ch05b_events_and_deadlines {}
    #[doc = include_str!("../docs/guide/06-kernels.md")]
    pub mod ch06_kernels {}
    #[doc = include_str!("../docs/guide/07-devices.md")]
    pub mod ch07_devices {}
    #[doc = include_str!("../docs/guide/08-not-covered.md")]
    pub mod ch08_not_covered {}
    #[doc = include_str!("../docs/guide/09a-errors-borrows.md")]
    pub mod ch09a_errors_borrows {}
    #[doc = include_str!("../docs/guide/09b-errors-traits.md")]
    pub mod ch09b_errors_traits {}
    #[doc = include_str!("../docs/guide/10-graphs.md")]
    pub mod ch10_graphs {}
    #[doc = include_str!("../docs/guide/11-owned.md")]
    pub mod ch11_owned {}
    #[doc = include_str!("../docs/guide/12-libraries.md")]
    pub mod ch12_libraries {}
    #[doc = include_str!("../docs/guide/13-processes.md")]
    pub mod ch13_processes {}
    #[doc = include_str!("../docs/guide/14-partitions.md")]
    pub mod ch14_partitions {}
}

// The README's Rust examples, compiled as doc tests (`cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[doc(inline)]
pub use context::{
    Allocates, CacheConfig, ComputeCapability, ContextFlags, ContextGuard, Device, DeviceAttribute,
    MemoryInfo, PrimaryContextState, ResourceLimit, Scheduling, SharedContext, SharedMemoryConfig,
    StreamPriorityRange, Uuid, with_context, with_context_and_teardown, with_primary_context,
    with_primary_context_and_teardown, with_raw_context,
};
/// `#[derive(DeviceCopy)]`: implements [`DeviceCopy`](trait@DeviceCopy) for a
/// `#[repr(C)]` struct of plain data, checking at compile time what the trait's contract
/// asks (feature `derive`, on by default).
///
/// The derive refuses, each with an error on the offending attribute, field or item:
///
/// * a struct without `#[repr(C)]` (or `#[repr(transparent)]`): Rust would choose the field
///   order, and a kernel's C struct would read the fields at other offsets;
/// * a field of a type that is not `DeviceCopy` (the trait's own message), and by name the
///   fields that never can be: `bool`, `char`, `NonZero*`, references and raw pointers;
/// * padding, between two fields, after the last, or inside a field's type (a type whose
///   `DeviceCopy` is written by hand, whose promise of no padding no compiler checked):
///   those bytes would carry host memory to the GPU (checked with `offset_of!` and
///   `size_of` in constants);
/// * an enum, a union, or a generic struct (whose padding depends on its parameters).
///
/// It does not derive `Copy` (a supertrait of `DeviceCopy`): derive `Clone` and `Copy` too.
/// The compile-fail cases in the repository's `ui-tests/fail/7_derive/` pin each error.
///
/// ```no_run
/// use cuda_brand::prelude::*;
///
/// /// A kernel's `struct Particle { float pos[3]; float mass; unsigned id; unsigned flags; }`.
/// #[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
/// #[repr(C)]
/// struct Particle {
///     pos: [f32; 3],
///     mass: f32,
///     id: u32,
///     flags: u32, // not `bool`: the GPU may write any byte
/// }
///
/// /// Derived structs nest: a field may be another derived struct.
/// #[derive(Clone, Copy, DeviceCopy)]
/// #[repr(C)]
/// struct Pair {
///     a: Particle,
///     b: Particle,
/// }
///
/// fn main() -> cuda_brand::Result<()> {
///     let device = Device::get(0)?;
///     with_context(&device, ContextFlags::default(), |ctx| {
///         let p = Particle { pos: [1.0, 2.0, 3.0], mass: 0.5, id: 7, flags: 1 };
///         let on_gpu = ctx.from_slice(&[p; 4])?;
///         assert_eq!(on_gpu.to_vec()?, [p; 4]);
///         let _pairs = ctx.zeroed::<Pair>(16)?;
///         Ok(())
///     })
/// }
/// ```
///
/// Padding is an error, with the field after the gap named:
///
/// ```compile_fail,E0080
/// #[derive(Clone, Copy, cuda_brand::DeviceCopy)]
/// #[repr(C)]
/// struct Sample {
///     tag: u8,
///     value: f32, // 3 bytes of padding before it
/// }
/// ```
#[cfg(feature = "derive")]
#[doc(inline)]
pub use cuda_brand_derive::DeviceCopy;
#[doc(inline)]
pub use error::{Error, ErrorCode, Invalid, Result, WithTeardown};
#[doc(inline)]
pub use graph::{Capture, DeviceKey, ExecGraph, Graph, HostKey, UpdateError};
#[doc(inline)]
pub use launch::{
    ByValue, Function, FunctionAttribute, In, InPtr, Kernel, KernelArg, KernelArgs, KernelMut,
    KernelParam, KernelParams, Launch, LaunchConfig, Out, OutPtr, ParamInfo, ScopedKernel,
};
#[doc(inline)]
pub use memory::{
    Advice, DeviceBuffer, DeviceBuffer2D, DeviceBuffer3D, DeviceCopy, DeviceSlice, ManagedBuffer,
    MemoryLocation, MemoryPool, Memset, Part3D, Part3DMut, PeerAccess, PinnedBuffer, Region3D,
    ReusePolicy, copy_peer,
};
/// Runtime compilation of CUDA C++ with NVRTC (feature `nvrtc`): [`module::nvrtc`].
#[cfg(feature = "nvrtc")]
#[doc(inline)]
pub use module::nvrtc;
#[doc(inline)]
pub use module::{JitCacheMode, JitFallback, JitLog, JitOptions, Library, Module};
#[doc(inline)]
pub use partition::{
    Part, PartitionGuard, Partitioned, SmGroup, Sms, Unpartitioned, Whole, with_partitions,
};
#[doc(inline)]
pub use phase::{Phases, with_phases};
#[doc(inline)]
pub use scope::{
    DeviceMut, DeviceRef, HostMut, HostRef, IntoDeviceMut, IntoDeviceRef, IntoHostMut, IntoHostRef,
    StreamScope,
};
#[doc(inline)]
pub use stream::{
    Event, EventFlags, EventKind, KeepWaiting, NoTiming, Overrun, Recorded, Stream, StreamFlags,
    Timed, Timing, Waited,
};

/// The names most programs use, for `use cuda_brand::prelude::*;`: the entry points, the
/// guard, devices and flags, buffers, streams and their scopes, kernels and their
/// parameter kinds, and the error and result types (`Result<T>` is `Result<T, Error>`; a
/// second parameter names another error type, so code written for `std`'s `Result` still
/// compiles).
pub mod prelude {
    pub use crate::{
        ContextFlags, ContextGuard, Device, DeviceBuffer, DeviceCopy, DeviceSlice, Error, Event,
        In, InPtr, Kernel, LaunchConfig, Module, Out, OutPtr, PinnedBuffer, Result, Stream,
        StreamFlags, StreamScope, with_context, with_primary_context,
    };
}

/// The driver's handle types, for interoperation through the `as_raw` methods (`unsafe`,
/// but for [`Device::as_raw`]) and [`with_raw_context`], and the opaque structs they point
/// to: the crate's own declarations, layout-compatible with `cuda.h`'s, so that no binding
/// crate's version is part of this crate's API (a handle of another binding crate is a
/// pointer cast away: `ctx.as_raw().cast()`). The crate loads the driver library at run
/// time and exports no bindings to call it with. Types alone do nothing: a handle of
/// them reaches the driver only through `unsafe` code, so this module is no escape hatch
/// of the [safety profile](crate#safety-profile).
pub mod sys {
    pub use crate::driver::handles::{
        CUcontext, CUctx_st, CUdevice, CUdeviceptr, CUevent, CUevent_st, CUfunc_st, CUfunction,
        CUgraph, CUgraph_st, CUgraphExec, CUgraphExec_st, CUlib_st, CUlibrary, CUmemPoolHandle_st,
        CUmemoryPool, CUmod_st, CUmodule, CUstream, CUstream_st,
    };
}

/// The thresholds and counters of the bulk-copy staging (`src/memory/staging/`), for the
/// crate's GPU tests and `bench/benches/bulk_copies.rs`, with the unstable `test-hooks`
/// feature. Not part of the API: it may change in any release.
#[cfg(all(feature = "test-hooks", feature = "staging"))]
#[doc(hidden)]
pub mod __staging {
    pub use crate::memory::staging::hidden::*;
}

/// The bounce rings and pending writes of the order of synchronous operations
/// (`src/synchronous/`), for the crate's GPU tests, with the unstable `test-hooks`
/// feature. Not part of the API: it may change in any release.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod __order {
    pub use crate::synchronous::hidden::*;
}

/// The CUDA version of the installed driver (e.g. 12020 for 12.2), from
/// `cuDriverGetVersion`. Works without a GPU; without a driver library it is an error
/// with [`ErrorCode::DriverNotFound`].
#[inline]
pub fn driver_version() -> Result<i32> {
    driver::driver_version()
}

// Zero cost: the brand adds no bytes, and the thread rules are what the docs say.
mod facts {
    use super::*;
    use static_assertions::{assert_eq_size, assert_impl_all, assert_not_impl_any};

    assert_eq_size!(ContextGuard<'static>, sys::CUcontext);
    assert_eq_size!(SharedContext<'static>, sys::CUcontext);
    assert_eq_size!(Option<ContextGuard<'static>>, sys::CUcontext);
    assert_impl_all!(ContextGuard<'static>: Copy);
    assert_not_impl_any!(ContextGuard<'static>: Send, Sync);
    assert_impl_all!(SharedContext<'static>: Copy, Send, Sync);
    assert_impl_all!(Error: Send, Sync, std::error::Error);
    // the call, the code, and one box for the rarely present detail and teardown error; a
    // `Result<(), Error>` needs no more
    assert_eq_size!(Error, (&'static str, ErrorCode, usize));
    assert_eq_size!(Result<()>, Error);
    assert_impl_all!(WithTeardown<Error>: Send, Sync, std::error::Error);
    assert_impl_all!(Device: Send, Sync, Copy);

    assert_eq_size!(Stream<'static>, sys::CUstream);
    // the phases are types only: a run-phase guard and a preallocated stream are one
    // pointer, like their plain forms
    assert_eq_size!(ContextGuard<'static, phase::Run>, sys::CUcontext);
    assert_eq_size!(ContextGuard<'static, phase::Setup<'static>>, sys::CUcontext);
    assert_not_impl_any!(ContextGuard<'static, phase::Run>: Send, Sync);
    assert_eq_size!(PartitionGuard<'static>, sys::CUcontext);
    assert_not_impl_any!(PartitionGuard<'static>: Send, Sync);
    // one split per closure, one partition per part: neither can be duplicated
    assert_not_impl_any!(Sms<'static>: Clone, Copy);
    assert_not_impl_any!(SmGroup<'static>: Clone, Copy);
    // a worker thread may enter a part itself
    assert_impl_all!(SmGroup<'static>: Send);
    assert_eq_size!(Stream<'static, phase::Preallocated>, sys::CUstream);
    assert_impl_all!(Stream<'static, phase::Preallocated>: Send, Sync);
    assert_eq_size!(Option<Stream<'static>>, sys::CUstream);
    assert_eq_size!(Event<'static>, sys::CUevent);
    assert_eq_size!(Event<'static, NoTiming>, sys::CUevent);
    assert_eq_size!(Option<Event<'static>>, sys::CUevent);
    // the proof of a record is a reference to its event
    assert_eq_size!(Recorded<'static, 'static>, sys::CUevent);
    assert_eq_size!(Option<Recorded<'static, 'static, NoTiming>>, sys::CUevent);
    assert_impl_all!(Recorded<'static, 'static>: Copy, Send, Sync);
    // pointer, length, and the context that frees it (pool memory is tied to no context);
    // the brand adds nothing
    assert_eq_size!(
        DeviceBuffer<'static, f32>,
        (sys::CUdeviceptr, usize, sys::CUcontext)
    );
    assert_eq_size!(MemoryPool<'static>, (usize, usize, sys::CUcontext));
    assert_impl_all!(MemoryPool<'static>: Send, Sync);
    assert_eq_size!(&DeviceSlice<'static, f32>, (sys::CUdeviceptr, usize));
    assert_eq_size!(DeviceRef<'static, 'static, f32>, (sys::CUdeviceptr, usize));
    assert_eq_size!(DeviceMut<'static, 'static, f32>, (sys::CUdeviceptr, usize));
    assert_eq_size!(Function<'static, 'static>, sys::CUfunction);
    assert_eq_size!(Option<Function<'static, 'static>>, sys::CUfunction);
    assert_impl_all!(Function<'static, 'static>: Send, Sync, Copy);
    assert_impl_all!(Kernel<'static, 'static, (In<f32>, Out<f32>, u32)>: Send, Sync);
    assert_impl_all!(Module<'static>: Send, Sync);
    assert_impl_all!(Library: Send, Sync);
    assert_eq_size!(PeerAccess<'static, 'static>, [sys::CUdevice; 2]);
    assert_impl_all!(Stream<'static>: Send, Sync);
    assert_impl_all!(Event<'static>: Send, Sync);
    assert_impl_all!(Event<'static, NoTiming>: Send, Sync);
    assert_not_impl_any!(Event<'static>: Clone);
    assert_impl_all!(DeviceBuffer<'static, f32>: Send, Sync);
    assert_impl_all!(PinnedBuffer<'static, f32>: Send, Sync);
    assert_impl_all!(DeviceBuffer3D<'static, f32>: Send, Sync);
    // scopes and their handles stay on the thread that opened the scope
    assert_not_impl_any!(StreamScope<'static, 'static, 'static>: Sync);
    assert_not_impl_any!(DeviceMut<'static, 'static, f32>: Send, Sync);
    assert_not_impl_any!(DeviceRef<'static, 'static, f32>: Send, Sync);
    assert_not_impl_any!(ScopedKernel<'static, 'static, (In<f32>,)>: Send, Sync);
    assert_not_impl_any!(StreamScope<'static, 'static, 'static>: Send);
    assert_impl_all!(KernelMut<'static, 'static, (In<f32>,)>: Send, Sync);
    // graphs: the driver's graph objects are not thread-safe; captures and host views stay
    // on their thread; keys are plain numbers
    assert_not_impl_any!(Graph<'static, 'static>: Send, Sync);
    assert_not_impl_any!(ExecGraph<'static, 'static>: Send, Sync);
    assert_not_impl_any!(Capture<'static, 'static, 'static>: Send, Sync);
    assert_not_impl_any!(HostMut<'static, f32>: Send, Sync);
    assert_not_impl_any!(HostRef<'static, f32>: Send, Sync);
    assert_impl_all!(HostKey<f32>: Send, Sync, Copy);
    assert_impl_all!(DeviceKey<'static, f32>: Send, Sync, Copy);
    assert_eq_size!(HostMut<'static, f32>, (usize, usize));
}
