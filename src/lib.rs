//! The CUDA driver API with lifetime-branded contexts: using one context's memory, streams
//! or kernels in another context, or keeping any of them after their context is gone, is a
//! compile error.
//!
//! Everything starts with [`with_context`] (or [`with_primary_context`]), which hands a
//! closure a [`ContextGuard<'ctx>`](ContextGuard). The lifetime `'ctx` is the context's
//! *brand*: a fresh, invariant lifetime that every value made from the guard carries, that
//! no two contexts share, and that cannot leave the closure. See the [`context`] module for
//! the soundness argument.
//!
//! ```no_run
//! use cuda_brand::{with_context, ContextFlags, Device};
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let device = Device::get(0)?;
//!     with_context(&device, ContextFlags::default(), |ctx| {
//!         println!("{} (API {})", ctx.device()?.name()?, ctx.api_version()?);
//!         Ok(())
//!     })
//! }
//! ```
//!
//! The rules are pinned by compile-fail tests in `ui-tests/fail/`, each with the compiler's
//! full error committed next to it.

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
pub mod peer;
pub mod pitched;
pub mod pool;
pub mod scope;
pub mod stream;
#[doc = include_str!("../docs/guide.md")]
pub mod guide {}

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
pub use pitched::DeviceBuffer2D;
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
    // scopes and their handles stay on the thread that opened the scope
    assert_not_impl_any!(StreamScope<'static, 'static, 'static>: Sync);
    assert_not_impl_any!(DeviceMut<'static, 'static, f32>: Send, Sync);
    assert_not_impl_any!(DeviceRef<'static, 'static, f32>: Send, Sync);
    assert_not_impl_any!(ScopedKernel<'static, 'static, (In<f32>,)>: Send, Sync);
    assert_not_impl_any!(StreamScope<'static, 'static, 'static>: Send);
    assert_impl_all!(KernelMut<'static, 'static, (In<f32>,)>: Send, Sync);
}
