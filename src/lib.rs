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

pub mod context;
mod device;
mod driver;
mod error;
mod event;
mod image;
pub mod memory;
pub mod module;
pub mod peer;
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
pub use memory::{DeviceBuffer, DeviceCopy, DeviceSlice, Memset, PinnedBuffer};
pub use module::{
    ByValue, Function, FunctionAttribute, In, Kernel, KernelArg, KernelArgs, KernelParam,
    KernelParams, LaunchConfig, Module, Out,
};
pub use peer::{PeerAccess, copy_peer};
pub use stream::{DeviceMut, DeviceRef, Stream, StreamFlags, StreamScope};

/// The raw driver types (`CUcontext`, `CUstream`, ...), for interoperation through the
/// `as_raw` methods and [`with_raw_context`].
pub use cuda_driver_sys as sys;

/// The CUDA version of the installed driver (e.g. 12020 for 12.2), from
/// `cuDriverGetVersion`. Works without a GPU.
pub fn driver_version() -> Result<i32> {
    driver::driver_version()
}

// Zero cost: the brand adds no bytes, and the thread rules are what the docs say.
mod facts {
    use super::*;
    use static_assertions::{assert_eq_size, assert_impl_all, assert_not_impl_any};

    assert_eq_size!(ContextGuard<'static>, *mut sys::CUctx_st);
    assert_eq_size!(SharedContext<'static>, *mut sys::CUctx_st);
    assert_eq_size!(Option<ContextGuard<'static>>, *mut sys::CUctx_st);
    assert_impl_all!(ContextGuard<'static>: Copy);
    assert_not_impl_any!(ContextGuard<'static>: Send, Sync);
    assert_impl_all!(SharedContext<'static>: Copy, Send, Sync);
    assert_impl_all!(Error: Send, Sync, std::error::Error);
    assert_impl_all!(Device: Send, Sync, Copy);

    assert_eq_size!(Stream<'static>, *mut sys::CUstream_st);
    assert_eq_size!(Option<Stream<'static>>, *mut sys::CUstream_st);
    assert_eq_size!(Event<'static>, *mut sys::CUevent_st);
    assert_eq_size!(DeviceBuffer<'static, f32>, (sys::CUdeviceptr, usize));
    assert_eq_size!(&DeviceSlice<'static, f32>, (sys::CUdeviceptr, usize));
    assert_eq_size!(DeviceRef<'static, 'static, f32>, (sys::CUdeviceptr, usize));
    assert_eq_size!(DeviceMut<'static, 'static, f32>, (sys::CUdeviceptr, usize));
    assert_eq_size!(Function<'static, 'static>, *mut sys::CUfunc_st);
    assert_eq_size!(Option<Function<'static, 'static>>, *mut sys::CUfunc_st);
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
}
