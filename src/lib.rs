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
//!         let module = ctx.load_ptx(include_str!("../kernels/kernels.ptx"))?;
//!         // SAFETY: `vector_add(const float *a, size_t a_len, const float *b, size_t b_len,
//!         // float *c, size_t c_len)` reads a and b, writes c, and stays below the lengths.
//!         let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
//!         // the launch, on a stream; the scope borrows a, b and c until the stream is done
//!         let stream = ctx.stream()?;
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
//! next to it:
//!
//! 1. **A context lives exactly as long as its closure**: nothing carrying `'ctx` (guard,
//!    buffer, stream, event, module, kernel) leaves it (`1_context_lifetime`).
//! 2. **One context's values never mix with another's**: `'ctx` is invariant, so two
//!    contexts' brands never unify (`2_one_context`).
//! 3. **The guard stays on its thread**: [`ContextGuard`] is not `Send`; scoped threads use
//!    a [`SharedContext`] and [`SharedContext::enter`] (`3_threads`).
//! 4. **Asynchronous work happens in a stream scope**: [`Stream::scope`] hands a closure a
//!    [`StreamScope`], which borrows every buffer and host slice it touches until it has
//!    synchronized the stream (`4_scopes`).
//! 5. **Kernels: one `unsafe` declaration, then safe launches**: [`Module::kernel`]
//!    declares a kernel's parameter list; launches are type-checked against it, and their
//!    kernel, stream and buffers share one brand (`5_kernels`).
//! 6. **Several devices: two brands only where it is meant**: [`copy_peer`] and
//!    [`StreamScope::copy_from_peer`] are the only operations naming two brands, and a
//!    kernel reaches another context's memory only through a view of a [`PeerAccess`]
//!    (`6_devices`).
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
//!   [`Kernel`] (typed kernels); [`PeerAccess`] and [`copy_peer`] (several devices);
//!   [`Error`] (every failure, naming the driver call).

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(
    clippy::undocumented_unsafe_blocks,
    clippy::multiple_unsafe_ops_per_block
)]

pub mod context;
mod device;
mod driver;
mod error;
mod event;
mod image;
pub mod launch;
pub mod managed;
pub mod memory;
pub mod module;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod peer;
pub mod phase;
pub mod pitched;
pub mod pitched3d;
pub mod pool;
pub mod scope;
pub mod stream;
#[doc = include_str!("../docs/guide.md")]
pub mod guide {}

// The README's Rust examples, compiled as doc tests (`cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use context::{
    CacheConfig, ContextFlags, ContextGuard, ResourceLimit, Scheduling, SharedContext,
    SharedMemoryConfig, StreamPriorityRange, with_context, with_primary_context, with_raw_context,
};
pub use device::{ComputeCapability, Device, DeviceAttribute, Uuid};
pub use error::{Error, ErrorCode, Result};
pub use event::{Event, EventFlags};
pub use launch::{
    ByValue, Function, FunctionAttribute, In, Kernel, KernelArg, KernelArgs, KernelMut,
    KernelParam, KernelParams, Launch, LaunchConfig, Out, ScopedKernel,
};
pub use managed::{Advice, ManagedBuffer, MemoryLocation};
pub use memory::{DeviceBuffer, DeviceCopy, DeviceSlice, Memset, PinnedBuffer};
pub use module::Module;
pub use peer::{PeerAccess, copy_peer};
pub use phase::{Phases, with_phases};
pub use pitched::DeviceBuffer2D;
pub use pitched3d::{DeviceBuffer3D, Region3D};
pub use pool::{MemoryPool, ReusePolicy};
pub use scope::{DeviceMut, DeviceRef, IntoDeviceMut, IntoDeviceRef, StreamScope};
pub use stream::{Stream, StreamFlags};

/// The names most programs use, for `use cuda_brand::prelude::*;`: the entry points, the
/// guard, devices and flags, buffers, streams, kernels and their parameter kinds, and the
/// error type.
pub mod prelude {
    pub use crate::{
        ContextFlags, ContextGuard, Device, DeviceBuffer, DeviceCopy, DeviceSlice, Error, Event,
        In, LaunchConfig, Module, Out, PinnedBuffer, Stream, StreamFlags, with_context,
        with_primary_context,
    };
}

/// The driver's handle types, for interoperation through the `as_raw` methods and
/// [`with_raw_context`], and the structs they point to (which compile errors about a
/// guard's thread name). The crate loads the driver library at run time and exports no
/// bindings to call it with.
pub mod sys {
    /// A memory pool handle (`CUmemoryPool`, CUDA 11.2; newer than the bindings).
    pub use crate::driver::ffi::{CUmemPoolHandle_st, CUmemoryPool};
    pub use cuda_driver_sys::{
        CUcontext, CUctx_st, CUdevice, CUdeviceptr, CUevent, CUevent_st, CUfunc_st, CUfunction,
        CUmod_st, CUmodule, CUstream, CUstream_st,
    };
}

/// The CUDA version of the installed driver (e.g. 12020 for 12.2), from
/// `cuDriverGetVersion`. Works without a GPU; without a driver library it is an error
/// with [`ErrorCode::DriverNotFound`].
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
    assert_impl_all!(Device: Send, Sync, Copy);

    assert_eq_size!(Stream<'static>, sys::CUstream);
    // the phases are types only: a run-phase guard and a preallocated stream are one
    // pointer, like their plain forms
    assert_eq_size!(ContextGuard<'static, phase::Run>, sys::CUcontext);
    assert_eq_size!(ContextGuard<'static, phase::Setup<'static>>, sys::CUcontext);
    assert_not_impl_any!(ContextGuard<'static, phase::Run>: Send, Sync);
    assert_eq_size!(Stream<'static, phase::Preallocated>, sys::CUstream);
    assert_impl_all!(Stream<'static, phase::Preallocated>: Send, Sync);
    assert_eq_size!(Option<Stream<'static>>, sys::CUstream);
    assert_eq_size!(Event<'static>, sys::CUevent);
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
    assert_eq_size!(PeerAccess<'static, 'static>, ());
    assert_impl_all!(Stream<'static>: Send, Sync);
    assert_impl_all!(Event<'static>: Send, Sync);
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
}
