//! The handle types of the public `cuda_brand::sys`: the crate's own declarations of
//! `cuda.h`'s opaque structs and handle typedefs, so that the bindings the crate uses
//! (`cuda-driver-sys`) stay inside it. Each is layout-compatible with `cuda.h`'s: a
//! handle is a pointer to an opaque struct, `CUdevice` an `int`, `CUdeviceptr` an
//! `unsigned long long`. The crate converts at its public edges (`as_raw`,
//! `with_raw_context`) with a pointer cast.

#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};

macro_rules! opaque {
    ($($(#[$doc:meta])* $st:ident, $handle:ident;)*) => { $(
        $(#[$doc])*
        #[repr(C)]
        pub struct $st {
            _opaque: [u8; 0],
            // neither `Send`, `Sync` nor `Unpin`: the driver's object, reached only through
            // the pointer
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
        #[doc = concat!("A pointer to [`", stringify!($st), "`], as `cuda.h` declares it.")]
        pub type $handle = *mut $st;
    )* };
}

opaque! {
    /// `struct CUctx_st`: a context.
    CUctx_st, CUcontext;
    /// `struct CUstream_st`: a stream.
    CUstream_st, CUstream;
    /// `struct CUevent_st`: an event.
    CUevent_st, CUevent;
    /// `struct CUmod_st`: a module.
    CUmod_st, CUmodule;
    /// `struct CUfunc_st`: a function of a module.
    CUfunc_st, CUfunction;
    /// `struct CUgraph_st`: a graph.
    CUgraph_st, CUgraph;
    /// `struct CUgraphExec_st`: an executable graph.
    CUgraphExec_st, CUgraphExec;
}

pub use super::ffi::{CUlib_st, CUlibrary, CUmemPoolHandle_st, CUmemoryPool};

/// `CUdevice`: a device ordinal as the driver numbers it (`int`).
pub type CUdevice = i32;
/// `CUdeviceptr`: a device address (`unsigned long long`).
pub type CUdeviceptr = u64;

// the bindings' and these agree where the crate casts between them
const _: () = {
    assert!(size_of::<CUcontext>() == size_of::<cuda_driver_sys::CUcontext>());
    assert!(size_of::<CUdevice>() == size_of::<cuda_driver_sys::CUdevice>());
    assert!(size_of::<CUdeviceptr>() == size_of::<cuda_driver_sys::CUdeviceptr>());
};
