//! The private driver layer: the only code that calls into the CUDA driver library.
//!
//! # Loading
//!
//! Nothing links against `libcuda`: the library is opened at run time with `libloading`,
//! on the first call that needs it and once per process. On Linux that is `libcuda.so.1`
//! (then `libcuda.so`), on Windows `nvcuda.dll`; the environment variable
//! `CUDA_BRAND_DRIVER_LIBRARY=/path/to/file` loads that file instead (to test a given
//! library, or none). A library that cannot be opened is an [`Error`] with
//! [`ErrorCode::DriverNotFound`] whose detail says what was tried and how to get the
//! driver; every entry point then returns that error, and nothing panics.
//!
//! # Minimum driver: CUDA 11.4 (R470)
//!
//! Every entry point that CUDA 11.4 has is *required*: a library without one, or a driver
//! older than 11.4, fails to load with [`ErrorCode::DriverTooOld`] naming what is missing.
//! Entry points newer than 11.4 are *optional*: the table holds `None` where the driver
//! lacks them, and calling one is an error with [`ErrorCode::DriverTooOld`] that names the
//! call, the CUDA version it needs and the installed driver's version, e.g.
//! `cuCtxGetId needs a CUDA 12.0 driver (R525 or newer); this driver is CUDA 11.4`.
//!
//! # Why not call `cuda_driver_sys`
//!
//! The bindings declare every entry point as returning the Rust enum `CUresult`, which only
//! knows the codes of CUDA 10. A newer driver returns codes outside it
//! (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION` = 222 for a PTX that is too new,
//! `CUDA_ERROR_STUB_LIBRARY` = 34, ...), and an out-of-range value in a Rust enum is
//! undefined behaviour. So every entry point is declared here, once, in [the table](Api),
//! returning the raw `u32`, and enum-typed out-parameters are read as integers.
//! `cuda_driver_sys` only provides handle and struct types; types newer than its CUDA 10
//! headers are declared here, matching `cuda.h`.
//!
//! Each wrapper is `#[inline]` and turns the code into [`Result`]; the error path is cold.
//! A call through the table costs what a call through the PLT did: one atomic load of the
//! loaded table's state (already initialised), one load of the function pointer, one
//! indirect call; and before it one thread-local load, the check that the calling thread is
//! not running a host function of the crate (which must not call the driver: `host_fn.rs`).

#![allow(non_snake_case)]

use std::ffi::{OsStr, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::OnceLock;

pub(crate) use cuda_driver_sys::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUstream, CUuuid,
};

use crate::error::{Error, ErrorCode, Result};
use crate::jit::{JitArgs, JitOptions};

pub(crate) use ffi::*;

/// Types of `cuda.h` that the table's signatures need and the bindings (CUDA 10) lack or
/// declare with Rust enums; layouts are those of `cuda.h` on 64-bit targets (checked
/// below). Enum-typed fields are plain integers, so a zeroed value is valid.
pub(crate) mod ffi {
    #![allow(dead_code, non_camel_case_types)]

    use std::ffi::{c_int, c_uint, c_void};

    pub(crate) use cuda_driver_sys::{CUarray, CUgraph, CUgraphExec, CUgraphNode, CUhostFn};
    use cuda_driver_sys::{CUdeviceptr, CUstream};

    /// `struct CUmemPoolHandle_st` (CUDA 11.2).
    #[repr(C)]
    pub struct CUmemPoolHandle_st {
        _opaque: [u8; 0],
    }
    /// `CUmemoryPool` (CUDA 11.2).
    pub type CUmemoryPool = *mut CUmemPoolHandle_st;

    /// `struct CUlib_st` (CUDA 12.0).
    #[repr(C)]
    pub struct CUlib_st {
        _opaque: [u8; 0],
    }
    /// `CUlibrary` (CUDA 12.0).
    pub type CUlibrary = *mut CUlib_st;

    /// `struct CUkern_st` (CUDA 12.0).
    #[repr(C)]
    pub(crate) struct CUkern_st {
        _opaque: [u8; 0],
    }
    /// `CUkernel` (CUDA 12.0).
    pub(crate) type CUkernel = *mut CUkern_st;

    /// `CUmemLocation` (CUDA 11.2); `type` is a `CUmemLocationType`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default)]
    pub(crate) struct CUmemLocation {
        pub(crate) type_: c_int,
        pub(crate) id: c_int,
    }

    /// `CUmemAccessDesc` (CUDA 10.2); `flags` is a `CUmemAccess_flags`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CUmemAccessDesc {
        pub(crate) location: CUmemLocation,
        pub(crate) flags: c_int,
    }

    /// `CUmemPoolProps` (CUDA 11.2), as of CUDA 12.6: `maxSize` (12.2) and `usage` (12.6)
    /// were reserved bytes before, which older drivers require to be zero.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CUmemPoolProps {
        /// `CUmemAllocationType`.
        pub(crate) allocType: c_int,
        /// `CUmemAllocationHandleType`.
        pub(crate) handleTypes: c_int,
        pub(crate) location: CUmemLocation,
        pub(crate) win32SecurityAttributes: *mut c_void,
        pub(crate) maxSize: usize,
        pub(crate) usage: u16,
        pub(crate) reserved: [u8; 54],
    }

    /// `CUDA_MEMCPY2D` (`CUDA_MEMCPY2D_v2`); the memory types are `CUmemorytype` values.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CUDA_MEMCPY2D {
        pub(crate) srcXInBytes: usize,
        pub(crate) srcY: usize,
        pub(crate) srcMemoryType: c_uint,
        pub(crate) srcHost: *const c_void,
        pub(crate) srcDevice: CUdeviceptr,
        pub(crate) srcArray: CUarray,
        pub(crate) srcPitch: usize,
        pub(crate) dstXInBytes: usize,
        pub(crate) dstY: usize,
        pub(crate) dstMemoryType: c_uint,
        pub(crate) dstHost: *mut c_void,
        pub(crate) dstDevice: CUdeviceptr,
        pub(crate) dstArray: CUarray,
        pub(crate) dstPitch: usize,
        pub(crate) WidthInBytes: usize,
        pub(crate) Height: usize,
    }

    /// `CUDA_MEMCPY3D` (`CUDA_MEMCPY3D_v2`); the memory types are `CUmemorytype` values,
    /// the reserved pointers must be null.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CUDA_MEMCPY3D {
        pub(crate) srcXInBytes: usize,
        pub(crate) srcY: usize,
        pub(crate) srcZ: usize,
        pub(crate) srcLOD: usize,
        pub(crate) srcMemoryType: c_uint,
        pub(crate) srcHost: *const c_void,
        pub(crate) srcDevice: CUdeviceptr,
        pub(crate) srcArray: CUarray,
        pub(crate) reserved0: *mut c_void,
        pub(crate) srcPitch: usize,
        pub(crate) srcHeight: usize,
        pub(crate) dstXInBytes: usize,
        pub(crate) dstY: usize,
        pub(crate) dstZ: usize,
        pub(crate) dstLOD: usize,
        pub(crate) dstMemoryType: c_uint,
        pub(crate) dstHost: *mut c_void,
        pub(crate) dstDevice: CUdeviceptr,
        pub(crate) dstArray: CUarray,
        pub(crate) reserved1: *mut c_void,
        pub(crate) dstPitch: usize,
        pub(crate) dstHeight: usize,
        pub(crate) WidthInBytes: usize,
        pub(crate) Height: usize,
        pub(crate) Depth: usize,
    }

    /// `CUlaunchAttributeValue` (CUDA 11.8): a union of 64 bytes whose members include
    /// pointers; kept as its bytes.
    #[repr(C, align(8))]
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CUlaunchAttributeValue {
        pub(crate) bytes: [u8; 64],
    }

    /// `CUlaunchAttribute` (CUDA 11.8); `id` is a `CUlaunchAttributeID`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CUlaunchAttribute {
        pub(crate) id: c_uint,
        pub(crate) pad: [u8; 4],
        pub(crate) value: CUlaunchAttributeValue,
    }

    /// `CUlaunchConfig` (CUDA 11.8).
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CUlaunchConfig {
        pub(crate) gridDimX: c_uint,
        pub(crate) gridDimY: c_uint,
        pub(crate) gridDimZ: c_uint,
        pub(crate) blockDimX: c_uint,
        pub(crate) blockDimY: c_uint,
        pub(crate) blockDimZ: c_uint,
        pub(crate) sharedMemBytes: c_uint,
        pub(crate) hStream: CUstream,
        pub(crate) attrs: *mut CUlaunchAttribute,
        pub(crate) numAttrs: c_uint,
    }

    /// `CUgraphExecUpdateResultInfo` (CUDA 12.0); `result` is a `CUgraphExecUpdateResult`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CUgraphExecUpdateResultInfo {
        pub(crate) result: c_int,
        pub(crate) errorNode: CUgraphNode,
        pub(crate) errorFromNode: CUgraphNode,
    }

    // The layouts of cuda.h (x86-64 and aarch64; CUDA has no 32-bit driver API any more).
    #[cfg(target_pointer_width = "64")]
    const _: () = {
        use std::mem::{offset_of, size_of};
        assert!(size_of::<CUmemPoolProps>() == 88);
        assert!(offset_of!(CUmemPoolProps, win32SecurityAttributes) == 16);
        assert!(offset_of!(CUmemPoolProps, maxSize) == 24);
        assert!(offset_of!(CUmemPoolProps, usage) == 32);
        assert!(size_of::<CUDA_MEMCPY2D>() == 128);
        assert!(offset_of!(CUDA_MEMCPY2D, srcHost) == 24);
        assert!(offset_of!(CUDA_MEMCPY2D, dstMemoryType) == 72);
        assert!(offset_of!(CUDA_MEMCPY2D, Height) == 120);
        assert!(size_of::<CUDA_MEMCPY3D>() == 200);
        assert!(offset_of!(CUDA_MEMCPY3D, srcMemoryType) == 32);
        assert!(offset_of!(CUDA_MEMCPY3D, dstPitch) == 160);
        assert!(offset_of!(CUDA_MEMCPY3D, Depth) == 192);
        assert!(size_of::<CUlaunchAttribute>() == 72);
        assert!(offset_of!(CUlaunchAttribute, value) == 8);
        assert!(size_of::<CUlaunchConfig>() == 56);
        assert!(offset_of!(CUlaunchConfig, hStream) == 32);
        assert!(offset_of!(CUlaunchConfig, numAttrs) == 48);
        assert!(size_of::<CUgraphExecUpdateResultInfo>() == 24);
        assert!(size_of::<CUmemAccessDesc>() == 12);
    };
}

/// The minimum driver: CUDA 11.4 (R470). Entry points newer than this are optional.
pub(crate) const MINIMUM_DRIVER: i32 = 11040;

/// Generates the driver table from one list of entry points.
///
/// Each entry is `required fn name(args);` or `optional(VERSION) fn name(args);`, where
/// `name` is the exported symbol, the arguments are those of `cuda.h` (enums as `c_int`,
/// enum out-parameters as integer pointers), every entry point returns the raw `CUresult`
/// as `u32`, and `VERSION` is the first CUDA version that has it (`cuDriverGetVersion`
/// style, 12040 for 12.4). It generates:
///
/// - [`Api`], one function pointer per entry (an `Option` for optional ones), filled by
///   `Api::load_from` with `libloading`; a missing required symbol fails the load with an
///   error naming it, a missing optional one is `None`;
/// - for each entry a method `Api::name(&self, args) -> Result<u32>`, `#[inline(always)]`,
///   which calls the pointer (or, for an optional entry the driver lacks, returns the
///   "needs a CUDA X driver" error);
/// - under `cfg(test)`, `Api::fake(version)`, a table whose required entries return
///   `FAKE_RESULT` without touching any driver and whose optional entries are absent.
macro_rules! driver_table {
    ($(
        $(#[$meta:meta])*
        $kind:ident $(($since:literal))? fn $name:ident($($arg:ident: $ty:ty),* $(,)?);
    )*) => {
        /// The driver's entry points, loaded once from the driver library (see the module
        /// docs), each declared once below.
        ///
        /// # Safety of the calls
        ///
        /// Stated here once for every call the wrappers of this module make through the
        /// table (with `cu!` and `cu_raw!`):
        ///
        /// - each pointer was read from the library under the symbol's own name and has the
        ///   signature `cuda.h` gives that symbol, with the raw `u32` for `CUresult` (valid
        ///   for any code) and integers for enums; the library is never unloaded, so the
        ///   pointers stay valid for the whole process;
        /// - every out-pointer a wrapper passes is `&mut` of a live local (or of a live
        ///   buffer whose length it passes) with the C type's size and alignment;
        /// - every other pointer, device address or handle is either made by the wrapper
        ///   itself (a null stream, a `CStr`, option arrays it owns for the call), or comes
        ///   from the wrapper's caller, and then the wrapper is an `unsafe fn` whose
        ///   `# Safety` section states what the driver requires of it (a live handle, a
        ///   range valid for the access until the stream has run the operation, ...);
        /// - the driver checks every plain value (flags, sizes, ordinals, attributes) and
        ///   reports a bad one as an error code, not undefined behaviour.
        pub(crate) struct Api {
            /// The driver's CUDA version from `cuDriverGetVersion` (12020 for 12.2), or 0
            /// if it did not say.
            version: i32,
            $(
                $(#[$meta])*
                $name: driver_table!(
                    @field $kind $(($since))? unsafe extern "C" fn($($ty),*) -> u32
                ),
            )*
        }

        #[allow(dead_code)] // declared for work that has no wrapper yet
        impl Api {
            $(
                $(#[$meta])*
                #[inline(always)]
                #[allow(clippy::too_many_arguments)]
                pub(crate) unsafe fn $name(&self, $($arg: $ty),*) -> Result<u32> {
                    let f = driver_table!(@entry self $name $kind $(($since))?);
                    // SAFETY: the caller keeps the rules of the table ("Safety of the calls").
                    Ok(unsafe { f($($arg),*) })
                }
            )*

            /// Reads every entry point from `library` (the file `file`, a driver of CUDA
            /// `version`).
            fn load_from(
                library: &'static libloading::Library,
                file: &str,
                version: i32,
            ) -> Result<Api> {
                Ok(Api {
                    version,
                    $(
                        $name: driver_table!(
                            @load library file version $name $kind $(($since))?
                            unsafe extern "C" fn($($ty),*) -> u32
                        ),
                    )*
                })
            }

            /// A table that reaches no driver: required entries return `FAKE_RESULT`,
            /// optional ones are absent, and the driver says it is CUDA `version`.
            #[cfg(test)]
            fn fake(version: i32) -> Api {
                Api {
                    version,
                    $($name: driver_table!(@fake $kind $(($since))? ($($ty),*)),)*
                }
            }

            /// Every optional entry point: its name, the CUDA version that has it, and
            /// whether this driver does.
            #[cfg(test)]
            #[allow(clippy::vec_init_then_push)]
            fn optional_entries(&self) -> Vec<(&'static str, i32, bool)> {
                let mut all = Vec::new();
                $(driver_table!(@optional all self $name $kind $(($since))?);)*
                all
            }
        }
    };

    (@field required $f:ty) => { $f };
    (@field optional($since:literal) $f:ty) => { Option<$f> };

    (@entry $api:ident $name:ident required) => { $api.$name };
    (@entry $api:ident $name:ident optional($since:literal)) => {
        match $api.$name {
            Some(f) => f,
            None => return Err($api.lacks(stringify!($name), $since)),
        }
    };

    (@load $library:ident $file:ident $version:ident $name:ident required $f:ty) => {
        // SAFETY: the symbol has the signature `$f` (the table's first rule).
        match unsafe { $library.get::<$f>(concat!(stringify!($name), "\0").as_bytes()) } {
            Ok(symbol) => *symbol,
            Err(_) => return Err(lacks_required($file, stringify!($name), $version)),
        }
    };
    (
        @load $library:ident $file:ident $version:ident $name:ident optional($since:literal) $f:ty
    ) => {
        // SAFETY: the symbol has the signature `$f` (the table's first rule).
        unsafe { $library.get::<$f>(concat!(stringify!($name), "\0").as_bytes()) }
            .ok()
            .map(|symbol| *symbol)
    };

    (@fake required ($($ty:ty),*)) => {{
        unsafe extern "C" fn fake($(_: $ty),*) -> u32 {
            FAKE_RESULT
        }
        fake
    }};
    (@fake optional($since:literal) ($($ty:ty),*)) => { None };

    (@optional $all:ident $api:ident $name:ident required) => {};
    (@optional $all:ident $api:ident $name:ident optional($since:literal)) => {
        $all.push((stringify!($name), $since, $api.$name.is_some()))
    };
}

/// What every required entry of [`Api::fake`] returns (`CUDA_ERROR_UNKNOWN`).
#[cfg(test)]
const FAKE_RESULT: u32 = 999;

driver_table! {
    // Initialisation, version, devices.
    required fn cuInit(flags: c_uint);
    required fn cuDriverGetVersion(version: *mut c_int);
    required fn cuDeviceGetCount(count: *mut c_int);
    required fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int);
    required fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice);
    required fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice);
    required fn cuDeviceGetAttribute(value: *mut c_int, attrib: c_int, dev: CUdevice);
    required fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice);
    required fn cuDeviceCanAccessPeer(can: *mut c_int, dev: CUdevice, peer: CUdevice);

    // Peer access.
    required fn cuCtxEnablePeerAccess(peer: CUcontext, flags: c_uint);
    required fn cuMemcpyPeer(
        dst: CUdeviceptr,
        dst_ctx: CUcontext,
        src: CUdeviceptr,
        src_ctx: CUcontext,
        bytes: usize,
    );
    required fn cuMemcpyPeerAsync(
        dst: CUdeviceptr,
        dst_ctx: CUcontext,
        src: CUdeviceptr,
        src_ctx: CUcontext,
        bytes: usize,
        stream: CUstream,
    );

    // Contexts.
    required fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice);
    required fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice);
    required fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint);
    required fn cuDevicePrimaryCtxGetState(dev: CUdevice, flags: *mut c_uint, active: *mut c_int);
    required fn cuCtxCreate_v2(ctx: *mut CUcontext, flags: c_uint, dev: CUdevice);
    required fn cuCtxDestroy_v2(ctx: CUcontext);
    required fn cuCtxPushCurrent_v2(ctx: CUcontext);
    required fn cuCtxPopCurrent_v2(ctx: *mut CUcontext);
    required fn cuCtxGetCurrent(ctx: *mut CUcontext);
    required fn cuCtxSetCurrent(ctx: CUcontext);
    required fn cuCtxGetDevice(dev: *mut CUdevice);
    required fn cuCtxGetFlags(flags: *mut c_uint);
    required fn cuCtxSynchronize();
    required fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint);
    required fn cuCtxGetCacheConfig(config: *mut c_int);
    required fn cuCtxSetCacheConfig(config: c_int);
    required fn cuCtxGetSharedMemConfig(config: *mut c_int);
    required fn cuCtxSetSharedMemConfig(config: c_int);
    required fn cuCtxGetLimit(value: *mut usize, limit: c_int);
    required fn cuCtxSetLimit(limit: c_int, value: usize);
    required fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int);
    optional(12000) fn cuCtxGetId(ctx: CUcontext, id: *mut c_ulonglong);

    // Memory.
    required fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize);
    required fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize);
    required fn cuMemFree_v2(dptr: CUdeviceptr);
    required fn cuMemAllocPitch_v2(
        dptr: *mut CUdeviceptr,
        pitch: *mut usize,
        width_bytes: usize,
        height: usize,
        element_bytes: c_uint,
    );
    required fn cuMemAllocManaged(dptr: *mut CUdeviceptr, bytes: usize, flags: c_uint);
    // The pre-13.0 ABI (a `CUdevice`); CUDA 13's cuda.h maps the name to
    // cuMemPrefetchAsync_v2 / cuMemAdvise_v2 (a `CUmemLocation`), and drivers keep exporting
    // these symbols for binaries built against older headers.
    required fn cuMemPrefetchAsync(
        dptr: CUdeviceptr,
        bytes: usize,
        dst: CUdevice,
        stream: CUstream,
    );
    required fn cuMemAdvise(dptr: CUdeviceptr, bytes: usize, advice: c_int, device: CUdevice);
    required fn cuMemHostAlloc(pp: *mut *mut c_void, bytes: usize, flags: c_uint);
    required fn cuMemFreeHost(p: *mut c_void);
    required fn cuMemHostRegister_v2(p: *mut c_void, bytes: usize, flags: c_uint);
    required fn cuMemHostUnregister(p: *mut c_void);
    required fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, bytes: usize);
    required fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize);
    required fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize);
    required fn cuMemcpy2D_v2(copy: *const CUDA_MEMCPY2D);
    required fn cuMemcpy3D_v2(copy: *const CUDA_MEMCPY3D);
    required fn cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize);
    required fn cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize);
    required fn cuMemsetD32_v2(dst: CUdeviceptr, value: u32, n: usize);
    required fn cuMemcpyHtoDAsync_v2(
        dst: CUdeviceptr,
        src: *const c_void,
        bytes: usize,
        stream: CUstream,
    );
    required fn cuMemcpyDtoHAsync_v2(
        dst: *mut c_void,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    );
    required fn cuMemcpyDtoDAsync_v2(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    );
    required fn cuMemcpy2DAsync_v2(copy: *const CUDA_MEMCPY2D, stream: CUstream);
    required fn cuMemcpy3DAsync_v2(copy: *const CUDA_MEMCPY3D, stream: CUstream);
    required fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream);
    required fn cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, stream: CUstream);
    required fn cuMemsetD32Async(dst: CUdeviceptr, value: u32, n: usize, stream: CUstream);
    required fn cuPointerGetAttribute(data: *mut c_void, attribute: c_int, ptr: CUdeviceptr);
    required fn cuPointerGetAttributes(
        num_attributes: c_uint,
        attributes: *mut c_int,
        data: *mut *mut c_void,
        ptr: CUdeviceptr,
    );

    // Stream-ordered allocation and memory pools (CUDA 11.2: required under an 11.4 minimum).
    required fn cuMemAllocAsync(dptr: *mut CUdeviceptr, bytes: usize, stream: CUstream);
    required fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream);
    required fn cuMemPoolCreate(pool: *mut CUmemoryPool, props: *const CUmemPoolProps);
    required fn cuMemPoolDestroy(pool: CUmemoryPool);
    required fn cuDeviceGetDefaultMemPool(pool: *mut CUmemoryPool, dev: CUdevice);
    required fn cuMemPoolSetAttribute(pool: CUmemoryPool, attribute: c_int, value: *mut c_void);
    required fn cuMemPoolGetAttribute(pool: CUmemoryPool, attribute: c_int, value: *mut c_void);
    required fn cuMemPoolTrimTo(pool: CUmemoryPool, min_bytes_to_keep: usize);
    required fn cuMemPoolSetAccess(pool: CUmemoryPool, map: *const CUmemAccessDesc, count: usize);
    required fn cuMemAllocFromPoolAsync(
        dptr: *mut CUdeviceptr,
        bytes: usize,
        pool: CUmemoryPool,
        stream: CUstream,
    );

    // Streams and events.
    required fn cuStreamCreateWithPriority(stream: *mut CUstream, flags: c_uint, priority: c_int);
    required fn cuStreamDestroy_v2(stream: CUstream);
    required fn cuStreamSynchronize(stream: CUstream);
    required fn cuStreamQuery(stream: CUstream);
    required fn cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: c_uint);
    required fn cuStreamGetPriority(stream: CUstream, priority: *mut c_int);
    required fn cuStreamGetFlags(stream: CUstream, flags: *mut c_uint);
    required fn cuStreamGetCtx(stream: CUstream, ctx: *mut CUcontext);
    required fn cuLaunchHostFunc(stream: CUstream, f: CUhostFn, user_data: *mut c_void);
    required fn cuEventCreate(event: *mut CUevent, flags: c_uint);
    required fn cuEventDestroy_v2(event: CUevent);
    required fn cuEventRecord(event: CUevent, stream: CUstream);
    required fn cuEventSynchronize(event: CUevent);
    required fn cuEventQuery(event: CUevent);
    required fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent);

    // Graphs and stream capture.
    required fn cuStreamBeginCapture_v2(stream: CUstream, mode: c_int);
    required fn cuStreamEndCapture(stream: CUstream, graph: *mut CUgraph);
    required fn cuStreamIsCapturing(stream: CUstream, status: *mut c_int);
    required fn cuGraphInstantiateWithFlags(
        exec: *mut CUgraphExec,
        graph: CUgraph,
        flags: c_ulonglong,
    );
    required fn cuGraphLaunch(exec: CUgraphExec, stream: CUstream);
    required fn cuGraphExecDestroy(exec: CUgraphExec);
    required fn cuGraphDestroy(graph: CUgraph);
    required fn cuGraphGetNodes(graph: CUgraph, nodes: *mut CUgraphNode, count: *mut usize);
    optional(12000) fn cuGraphExecUpdate_v2(
        exec: CUgraphExec,
        graph: CUgraph,
        result: *mut CUgraphExecUpdateResultInfo,
    );

    // Modules, libraries, functions, launches.
    required fn cuModuleLoadDataEx(
        module: *mut CUmodule,
        image: *const c_void,
        num_options: c_uint,
        options: *mut c_int,
        values: *mut *mut c_void,
    );
    required fn cuModuleUnload(module: CUmodule);
    required fn cuModuleGetFunction(f: *mut CUfunction, module: CUmodule, name: *const c_char);
    required fn cuModuleGetGlobal_v2(
        dptr: *mut CUdeviceptr,
        bytes: *mut usize,
        module: CUmodule,
        name: *const c_char,
    );
    optional(12000) fn cuLibraryLoadData(
        library: *mut CUlibrary,
        code: *const c_void,
        jit_options: *mut c_int,
        jit_option_values: *mut *mut c_void,
        num_jit_options: c_uint,
        library_options: *mut c_int,
        library_option_values: *mut *mut c_void,
        num_library_options: c_uint,
    );
    optional(12000) fn cuLibraryUnload(library: CUlibrary);
    optional(12000) fn cuLibraryGetKernel(
        kernel: *mut CUkernel,
        library: CUlibrary,
        name: *const c_char,
    );
    optional(12000) fn cuKernelGetFunction(f: *mut CUfunction, kernel: CUkernel);
    required fn cuFuncGetAttribute(value: *mut c_int, attrib: c_int, f: CUfunction);
    required fn cuFuncSetAttribute(f: CUfunction, attrib: c_int, value: c_int);
    required fn cuFuncSetCacheConfig(f: CUfunction, config: c_int);
    optional(12040) fn cuFuncGetParamInfo(
        f: CUfunction,
        index: usize,
        offset: *mut usize,
        size: *mut usize,
    );
    optional(13020) fn cuFuncGetParamCount(f: CUfunction, count: *mut usize);
    required fn cuOccupancyMaxPotentialBlockSize(
        min_grid_size: *mut c_int,
        block_size: *mut c_int,
        f: CUfunction,
        smem_for_block: Option<unsafe extern "C" fn(c_int) -> usize>,
        dynamic_smem: usize,
        block_size_limit: c_int,
    );
    required fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
        blocks: *mut c_int,
        f: CUfunction,
        block_size: c_int,
        dynamic_smem: usize,
    );
    optional(11080) fn cuOccupancyMaxActiveClusters(
        clusters: *mut c_int,
        f: CUfunction,
        config: *const CUlaunchConfig,
    );
    optional(11080) fn cuOccupancyMaxPotentialClusterSize(
        cluster_size: *mut c_int,
        f: CUfunction,
        config: *const CUlaunchConfig,
    );
    required fn cuLaunchKernel(
        f: CUfunction,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_mem_bytes: c_uint,
        stream: CUstream,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    );
    required fn cuLaunchCooperativeKernel(
        f: CUfunction,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_mem_bytes: c_uint,
        stream: CUstream,
        params: *mut *mut c_void,
    );
    optional(11080) fn cuLaunchKernelEx(
        config: *const CUlaunchConfig,
        f: CUfunction,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    );
}

/// The environment variable that names the driver library to load instead of the
/// system's (a path, or any name the platform's loader resolves).
pub(crate) const DRIVER_LIBRARY_VAR: &str = "CUDA_BRAND_DRIVER_LIBRARY";

/// The files tried, in order, when [`DRIVER_LIBRARY_VAR`] is not set.
#[cfg(windows)]
const DRIVER_LIBRARIES: &[&str] = &["nvcuda.dll"];
#[cfg(not(windows))]
const DRIVER_LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// The directory of the build's `-lcuda` placeholder (`build.rs`, Linux builds without a
/// driver library). Cargo puts it on `LD_LIBRARY_PATH` under `cargo run` and `cargo test`.
/// The placeholder is an empty archive, `libcuda.a`, which the platform's loader never
/// opens; should a file of a tried name ever be found there, the loader's message about it
/// is not reported (see [`failure_text`]).
const LINK_STUB_DIR: Option<&str> = option_env!("CUDA_BRAND_LINK_STUB_DIR");

/// How to get a driver library, the end of every "not found" error.
const GET_A_DRIVER: &str = "install the NVIDIA driver (CUDA 11.4, R470, or newer), or on \
     Debian without a GPU run cuda-brand's scripts/install-libcuda (it installs libcuda1, \
     whose cuInit reports no device)";

/// The loaded table; set once, when the load succeeds.
static API: OnceLock<Api> = OnceLock::new();

/// The driver table, loading it on first use.
///
/// The fast path (every call after a successful load) is one atomic load of the
/// `OnceLock`'s state and one branch; the table's address is a constant. The load itself,
/// and every call after a failed one, is out of line.
#[inline(always)]
fn api() -> Result<&'static Api> {
    match API.get() {
        Some(api) => Ok(api),
        None => api_slow(),
    }
}

/// Loads the table once per process (later calls get the first outcome).
#[cold]
#[inline(never)]
fn api_slow() -> Result<&'static Api> {
    static OUTCOME: OnceLock<Result<&'static Api>> = OnceLock::new();
    OUTCOME
        .get_or_init(|| {
            let api = Api::load(std::env::var_os(DRIVER_LIBRARY_VAR).as_deref())?;
            // The only place that sets `API`, and it runs once: this is the first set.
            Ok(API.get_or_init(|| api))
        })
        .clone()
}

impl Api {
    /// Opens the driver library (`file`, or the platform's default names when `None` or
    /// empty) and reads the table from it. The library is never closed.
    fn load(file: Option<&OsStr>) -> Result<Api> {
        let (library, name) = open(file.filter(|f| !f.is_empty()))?;
        let library: &'static libloading::Library = Box::leak(Box::new(library));
        // SAFETY: cuDriverGetVersion has this signature in every driver.
        let symbol = unsafe {
            library.get::<unsafe extern "C" fn(*mut c_int) -> u32>(b"cuDriverGetVersion\0")
        };
        let Ok(get_version) = symbol else {
            return Err(lacks_required(&name, "cuDriverGetVersion", 0));
        };
        let mut version = 0;
        // SAFETY: takes only its out-pointer (a live local) and may be called before cuInit.
        if unsafe { get_version(&mut version) } != 0 {
            version = 0;
        }
        if version != 0 && version < MINIMUM_DRIVER {
            return Err(Error::with_detail(
                Error::LOAD_DRIVER,
                ErrorCode::DriverTooOld,
                format!(
                    "cuda-brand needs {}; {name} is {}",
                    driver_for(MINIMUM_DRIVER),
                    cuda_version(version)
                ),
            ));
        }
        Api::load_from(library, &name, version)
    }

    /// The error of an optional entry point that this driver lacks.
    #[cold]
    #[inline(never)]
    fn lacks(&self, call: &'static str, since: i32) -> Error {
        Error::with_detail(
            call,
            ErrorCode::DriverTooOld,
            format!(
                "{call} needs {}; this driver is {}",
                driver_for(since),
                cuda_version(self.version)
            ),
        )
    }
}

/// Opens the first library that loads, returning it and the name it was opened under.
fn open(file: Option<&OsStr>) -> Result<(libloading::Library, String)> {
    let names: Vec<&OsStr> = match file {
        Some(file) => vec![file],
        None => DRIVER_LIBRARIES.iter().map(OsStr::new).collect(),
    };
    let mut failures = Vec::new();
    for name in names {
        // SAFETY: loading the driver library runs its initialisers, which have no
        // preconditions; nothing else is assumed of the file until its symbols are read.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return Ok((library, name.to_string_lossy().into_owned())),
            Err(e) => failures.push(failure_text(name, error_chain(&e), LINK_STUB_DIR)),
        }
    }
    let detail = match file {
        Some(file) => format!(
            "{DRIVER_LIBRARY_VAR}={} could not be loaded ({}): point it at the driver \
             library, or unset it; {GET_A_DRIVER}",
            file.to_string_lossy(),
            failures.join("; ")
        ),
        None => format!(
            "{} could not be loaded ({}): {GET_A_DRIVER}, or set {DRIVER_LIBRARY_VAR} to the \
             library's path",
            DRIVER_LIBRARIES.join(" and "),
            failures.join("; ")
        ),
    };
    Err(Error::with_detail(
        Error::LOAD_DRIVER,
        ErrorCode::DriverNotFound,
        detail,
    ))
}

/// What the "not found" error says about `name`, whose load failed with `text`: the
/// loader's own words, unless they name a file in `stub_dir`, the build's link
/// placeholder ([`LINK_STUB_DIR`]), which is no driver and no concern of the user's.
fn failure_text(name: &OsStr, text: String, stub_dir: Option<&str>) -> String {
    match stub_dir {
        Some(dir) if !dir.is_empty() && text.contains(&format!("{dir}/")) => format!(
            "{}: no driver library of this name (only cuda-brand's link placeholder)",
            name.to_string_lossy()
        ),
        _ => text,
    }
}

/// An error and its sources, as one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The load error for a library that lacks a required entry point.
#[cold]
fn lacks_required(file: &str, symbol: &str, version: i32) -> Error {
    Error::with_detail(
        Error::LOAD_DRIVER,
        ErrorCode::DriverTooOld,
        format!(
            "{file} has no {symbol}: cuda-brand needs {}; this driver is {}",
            driver_for(MINIMUM_DRIVER),
            cuda_version(version)
        ),
    )
}

/// `"CUDA 12.2"` for 12020; `"of an unknown version"` for 0.
fn cuda_version(version: i32) -> String {
    match version {
        0 => "of an unknown version".to_owned(),
        v => format!("CUDA {}.{}", v / 1000, v % 1000 / 10),
    }
}

/// `"a CUDA 11.2 driver (R460 or newer)"` for 11020: the driver branch that first shipped
/// each CUDA version (NVIDIA's CUDA toolkit release notes, Linux).
fn driver_for(version: i32) -> String {
    let branch = match version {
        11000 => Some(450),
        11010 => Some(455),
        11020 => Some(460),
        11030 => Some(465),
        11040 => Some(470),
        11050 => Some(495),
        11060 => Some(510),
        11070 => Some(515),
        11080 => Some(520),
        12000 => Some(525),
        12010 => Some(530),
        12020 => Some(535),
        12030 => Some(545),
        12040 => Some(550),
        12050 => Some(555),
        12060 => Some(560),
        12080 => Some(570),
        12090 => Some(575),
        13000 => Some(580),
        _ => None,
    };
    match branch {
        Some(r) => format!("a {} driver (R{r} or newer)", cuda_version(version)),
        None => format!("a {} driver or newer", cuda_version(version)),
    }
}

/// Turns a raw `CUresult` into a `Result`, naming the call on failure.
#[inline(always)]
pub(crate) fn check(call: &'static str, raw: u32) -> Result<()> {
    if raw == 0 {
        Ok(())
    } else {
        Err(failure(call, raw))
    }
}

#[cold]
#[inline(never)]
fn failure(call: &'static str, raw: u32) -> Error {
    Error::new(
        call,
        ErrorCode::from_raw(raw).unwrap_or(ErrorCode::Unrecognized(raw)),
    )
}

/// A handle a successful call returned, or an error if the driver returned success with
/// a null one (never seen; checked so that no null handle is ever branded).
#[inline]
pub(crate) fn non_null<T>(call: &'static str, p: *mut T) -> Result<std::ptr::NonNull<T>> {
    std::ptr::NonNull::new(p).ok_or_else(|| null_handle(call))
}

#[cold]
#[inline(never)]
fn null_handle(call: &'static str) -> Error {
    Error::with_detail(
        call,
        ErrorCode::Unknown,
        "the driver returned success and a null handle",
    )
}

/// The raw value of a driver code, for comparing results without a lookup; a crate code
/// (which has none) fails to compile.
const fn raw_code(code: ErrorCode) -> u32 {
    match code.raw() {
        Some(raw) => raw,
        None => panic!("not a CUresult"),
    }
}

/// `CUDA_ERROR_NOT_READY`: what `cuStreamQuery` and `cuEventQuery` return for "busy".
const NOT_READY: u32 = raw_code(ErrorCode::NotReady);
/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`.
const PEER_ACCESS_ALREADY_ENABLED: u32 = raw_code(ErrorCode::PeerAccessAlreadyEnabled);
/// `CUDA_ERROR_INVALID_VALUE`: what `cuFuncGetParamInfo` returns past the last parameter.
const INVALID_VALUE: u32 = raw_code(ErrorCode::InvalidValue);

/// Calls entry point `$f` of the table: `Ok` with its raw `CUresult`, or `Err` when the
/// driver library could not be loaded or (an optional entry point) lacks `$f`.
///
/// Contains the call's `unsafe` block: its justification is the table's "Safety of the
/// calls", which every wrapper of this module keeps (a wrapper handing the driver a pointer
/// or handle its caller gave it is an `unsafe fn` that says what the caller guarantees).
macro_rules! cu_raw {
    ($f:ident($($arg:expr),* $(,)?)) => {
        // A host function (`host_fn.rs`) must not call the driver: refused here, for every
        // entry point, before the table is touched (one thread-local load).
        if crate::host_fn::in_host_fn() {
            Err(crate::host_fn::driver_call_refused(stringify!($f)))
        } else {
            match api() {
                // SAFETY: the table's "Safety of the calls", kept by this module's wrappers.
                Ok(api) => unsafe { api.$f($($arg),*) },
                Err(e) => Err(e),
            }
        }
    };
}

/// Calls entry point `$f` of the table (see `cu_raw!`) and checks its result, naming the
/// call.
macro_rules! cu {
    ($f:ident($($arg:expr),* $(,)?)) => {
        match cu_raw!($f($($arg),*)) {
            Ok(raw) => check(stringify!($f), raw),
            Err(e) => Err(e),
        }
    };
}

/// Runs `cuInit(0)` once per process; later calls return the first outcome.
pub(crate) fn init() -> Result<()> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    // cuInit takes only a flags word (which must be 0) and may be called at any time.
    INIT.get_or_init(|| cu!(cuInit(0))).clone()
}

/// The driver's CUDA version, e.g. 12020 for 12.2. Needs no `cuInit`.
#[inline]
pub(crate) fn driver_version() -> Result<i32> {
    let mut v = 0;
    cu!(cuDriverGetVersion(&mut v))?;
    Ok(v)
}

#[inline]
pub(crate) fn device_count() -> Result<i32> {
    init()?;
    let mut n = 0;
    cu!(cuDeviceGetCount(&mut n))?;
    Ok(n)
}

#[inline]
pub(crate) fn device_get(ordinal: i32) -> Result<CUdevice> {
    init()?;
    let mut d = 0;
    cu!(cuDeviceGet(&mut d, ordinal))?;
    Ok(d)
}

#[inline]
pub(crate) fn device_name(dev: CUdevice) -> Result<String> {
    let mut buf = [0 as c_char; 256];
    cu!(cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, dev))?;
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[inline]
pub(crate) fn device_total_mem(dev: CUdevice) -> Result<usize> {
    let mut b = 0;
    cu!(cuDeviceTotalMem_v2(&mut b, dev))?;
    Ok(b)
}

#[inline]
pub(crate) fn device_attribute(dev: CUdevice, attrib: c_int) -> Result<i32> {
    let mut v = 0;
    cu!(cuDeviceGetAttribute(&mut v, attrib, dev))?;
    Ok(v)
}

#[inline]
pub(crate) fn device_uuid(dev: CUdevice) -> Result<[u8; 16]> {
    let mut u = CUuuid { bytes: [0; 16] };
    cu!(cuDeviceGetUuid(&mut u, dev))?;
    Ok(u.bytes.map(|b| b as u8))
}

#[inline]
pub(crate) fn device_can_access_peer(dev: CUdevice, peer: CUdevice) -> Result<bool> {
    let mut v = 0;
    cu!(cuDeviceCanAccessPeer(&mut v, dev, peer))?;
    Ok(v != 0)
}

#[inline]
pub(crate) fn primary_ctx_retain(dev: CUdevice) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    cu!(cuDevicePrimaryCtxRetain(&mut c, dev))?;
    Ok(c)
}

/// # Safety
/// Balances one successful [`primary_ctx_retain`] of `dev`; nothing of the context may be
/// used afterwards unless another retain holds it.
#[inline]
pub(crate) unsafe fn primary_ctx_release(dev: CUdevice) -> Result<()> {
    cu!(cuDevicePrimaryCtxRelease_v2(dev))
}

#[inline]
pub(crate) fn primary_ctx_set_flags(dev: CUdevice, flags: u32) -> Result<()> {
    cu!(cuDevicePrimaryCtxSetFlags_v2(dev, flags))
}

#[inline]
pub(crate) fn primary_ctx_state(dev: CUdevice) -> Result<(u32, bool)> {
    let (mut flags, mut active) = (0, 0);
    cu!(cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active))?;
    Ok((flags, active != 0))
}

/// Creates a context on `dev` and pushes it on the calling thread's stack.
#[inline]
pub(crate) fn ctx_create(flags: u32, dev: CUdevice) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    cu!(cuCtxCreate_v2(&mut c, flags, dev))?;
    Ok(c)
}

/// # Safety
/// `ctx` is a context this crate created and nothing will use it afterwards.
#[inline]
pub(crate) unsafe fn ctx_destroy(ctx: CUcontext) -> Result<()> {
    cu!(cuCtxDestroy_v2(ctx))
}

/// # Safety
/// `ctx` is a live context, and the caller pops it again before the context goes away.
#[inline]
pub(crate) unsafe fn ctx_push(ctx: CUcontext) -> Result<()> {
    cu!(cuCtxPushCurrent_v2(ctx))
}

/// Pops the calling thread's current context and returns it.
#[inline]
pub(crate) fn ctx_pop() -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    cu!(cuCtxPopCurrent_v2(&mut c))?;
    Ok(c)
}

/// Replaces the top of the calling thread's context stack with `ctx` (`cuCtxSetCurrent`);
/// a null `ctx` pops the top (nothing, on an empty stack).
///
/// # Safety
/// `ctx` is null or a live context, and whoever owns the entry it replaces accepts that.
#[inline]
#[cfg_attr(not(feature = "nccl"), allow(dead_code))] // used by the `nccl` feature
pub(crate) unsafe fn ctx_set_current(ctx: CUcontext) -> Result<()> {
    cu!(cuCtxSetCurrent(ctx))
}

/// The calling thread's current context (null if none).
#[inline]
pub(crate) fn ctx_get_current() -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    cu!(cuCtxGetCurrent(&mut c))?;
    Ok(c)
}

// The functions below act on the calling thread's current context; callers make the
// right context current first (see `context::ensure_current`).

#[inline]
pub(crate) fn ctx_get_device() -> Result<CUdevice> {
    let mut d = 0;
    cu!(cuCtxGetDevice(&mut d))?;
    Ok(d)
}

#[inline]
pub(crate) fn ctx_get_flags() -> Result<u32> {
    let mut f = 0;
    cu!(cuCtxGetFlags(&mut f))?;
    Ok(f)
}

#[inline]
pub(crate) fn ctx_synchronize() -> Result<()> {
    cu!(cuCtxSynchronize())
}

/// # Safety
/// `ctx` is a live context.
#[inline]
pub(crate) unsafe fn ctx_api_version(ctx: CUcontext) -> Result<u32> {
    let mut v = 0;
    cu!(cuCtxGetApiVersion(ctx, &mut v))?;
    Ok(v)
}

#[inline]
pub(crate) fn ctx_get_cache_config() -> Result<i32> {
    let mut v = 0;
    cu!(cuCtxGetCacheConfig(&mut v))?;
    Ok(v)
}

#[inline]
pub(crate) fn ctx_set_cache_config(v: i32) -> Result<()> {
    cu!(cuCtxSetCacheConfig(v))
}

#[inline]
pub(crate) fn ctx_get_shared_mem_config() -> Result<i32> {
    let mut v = 0;
    cu!(cuCtxGetSharedMemConfig(&mut v))?;
    Ok(v)
}

#[inline]
pub(crate) fn ctx_set_shared_mem_config(v: i32) -> Result<()> {
    cu!(cuCtxSetSharedMemConfig(v))
}

#[inline]
pub(crate) fn ctx_get_limit(limit: i32) -> Result<usize> {
    let mut v = 0;
    cu!(cuCtxGetLimit(&mut v, limit))?;
    Ok(v)
}

#[inline]
pub(crate) fn ctx_set_limit(limit: i32, value: usize) -> Result<()> {
    cu!(cuCtxSetLimit(limit, value))
}

#[inline]
pub(crate) fn ctx_stream_priority_range() -> Result<(i32, i32)> {
    let (mut least, mut greatest) = (0, 0);
    cu!(cuCtxGetStreamPriorityRange(&mut least, &mut greatest))?;
    Ok((least, greatest))
}

/// Outcome of a query: `Ok(true)` done, `Ok(false)` still busy.
#[inline]
fn ready(call: &'static str, raw: u32) -> Result<bool> {
    if raw == NOT_READY {
        Ok(false)
    } else {
        check(call, raw).map(|()| true)
    }
}

// Memory. Functions taking a device pointer or host pointer are `unsafe`: the caller
// guarantees the range is valid for the access, and stays valid until the (possibly
// asynchronous) operation is done.

/// Allocates in the current context.
#[inline]
pub(crate) fn mem_alloc(bytes: usize) -> Result<CUdeviceptr> {
    let mut p = 0;
    cu!(cuMemAlloc_v2(&mut p, bytes))?;
    Ok(p)
}

/// # Safety
/// `p` came from [`mem_alloc`] and is not used afterwards.
#[inline]
pub(crate) unsafe fn mem_free(p: CUdeviceptr) -> Result<()> {
    cu!(cuMemFree_v2(p))
}

/// Allocates page-locked host memory in the current context.
#[inline]
pub(crate) fn mem_host_alloc(bytes: usize, flags: u32) -> Result<*mut c_void> {
    let mut p = std::ptr::null_mut();
    cu!(cuMemHostAlloc(&mut p, bytes, flags))?;
    Ok(p)
}

/// # Safety
/// `p` came from [`mem_host_alloc`] and is not used afterwards.
#[inline]
pub(crate) unsafe fn mem_free_host(p: *mut c_void) -> Result<()> {
    cu!(cuMemFreeHost(p))
}

/// Page-locks host memory for the current context (`cuMemHostRegister`), so that copies
/// between it and the device run by DMA. Used by the crate's staging buffers
/// (`src/staging.rs`), which own the memory they register.
///
/// # Safety
/// `[p, p + bytes)` is host memory that stays allocated until it is unregistered with
/// [`mem_host_unregister`] (or its context is destroyed, which unregisters it).
#[inline]
pub(crate) unsafe fn mem_host_register(p: *mut c_void, bytes: usize, flags: u32) -> Result<()> {
    cu!(cuMemHostRegister_v2(p, bytes, flags))
}

/// Makes memory that [`mem_host_register`] page-locked in the current context pageable
/// again (`cuMemHostUnregister`).
///
/// # Safety
/// `p` is the start of a range registered in the current context, and no queued copy
/// still uses it.
#[inline]
pub(crate) unsafe fn mem_host_unregister(p: *mut c_void) -> Result<()> {
    cu!(cuMemHostUnregister(p))
}

/// Waits for the current context's legacy default stream.
///
/// The "synchronous" copies and fills of the driver are not all complete when they
/// return: `cuMemset*` and device-to-device `cuMemcpy*` are asynchronous with respect to
/// the host, and a host-to-device copy from pageable memory returns once the data is
/// staged, before the DMA has finished (CUDA's "API synchronization behavior"). Work on a
/// non-blocking stream is not ordered after them, so without this wait a scope could read
/// memory that a "finished" fill is still writing (observed on an H100: a `zeroed` buffer's
/// memset landing after a scope's copy into it).
///
/// See [`stream_wait_idle`] for what an error means.
fn legacy_stream_synchronize() -> Result<()> {
    // SAFETY: the null stream is the current context's legacy default stream.
    unsafe { stream_wait_idle(std::ptr::null_mut()) }
}

/// Waits until `s` has no work left. `cuStreamSynchronize` returns when the stream's work
/// is complete, possibly reporting an error of an earlier asynchronous operation; an error
/// of the wait itself would leave that open, so after any error the stream is polled until
/// it is no longer busy: no error path returns while queued work may still run. Returns
/// the wait's result.
///
/// # Safety
/// `s` is live (or null: the current context's legacy stream).
pub(crate) unsafe fn stream_wait_idle(s: CUstream) -> Result<()> {
    // SAFETY: the caller guarantees the stream.
    let synced = unsafe { stream_synchronize(s) };
    if synced.is_err() {
        // SAFETY: as above.
        while let Ok(false) = unsafe { stream_query(s) } {
            std::thread::yield_now();
        }
    }
    synced
}

/// Copies host to device; complete when it returns.
///
/// # Safety
/// `dst` is valid for `bytes` of device writes, `src` for `bytes` of host reads.
#[inline]
pub(crate) unsafe fn memcpy_htod(dst: CUdeviceptr, src: *const c_void, bytes: usize) -> Result<()> {
    cu!(cuMemcpyHtoD_v2(dst, src, bytes))?;
    legacy_stream_synchronize()
}

/// Copies host to device (`cuMemcpyHtoD`) without the wait of [`memcpy_htod`]: from
/// page-locked memory the copy is complete when it returns; from pageable memory the data
/// has been staged (the host range may be reused) but may still be on its way. A caller
/// that promises completion waits for the legacy stream afterwards
/// ([`stream_wait_idle`] on null), once for a whole series of such copies.
///
/// # Safety
/// As [`memcpy_htod`].
#[inline]
pub(crate) unsafe fn memcpy_htod_unwaited(
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
) -> Result<()> {
    cu!(cuMemcpyHtoD_v2(dst, src, bytes))
}

/// # Safety
/// `dst` is valid for `bytes` of host writes, `src` for `bytes` of device reads.
#[inline]
pub(crate) unsafe fn memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> Result<()> {
    cu!(cuMemcpyDtoH_v2(dst, src, bytes))
}

/// Copies device to device; complete when it returns.
///
/// # Safety
/// Both device ranges are valid for `bytes`.
#[inline]
pub(crate) unsafe fn memcpy_dtod(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> Result<()> {
    cu!(cuMemcpyDtoD_v2(dst, src, bytes))?;
    legacy_stream_synchronize()
}

/// A memset pattern of 1, 2 or 4 bytes (`pub` only so the sealed `Memset` trait can name it;
/// the module is private).
#[derive(Clone, Copy)]
pub enum Pattern {
    D8(u8),
    D16(u16),
    D32(u32),
}

/// Fills device memory; complete when it returns.
///
/// # Safety
/// `dst` is valid for `n` elements of the pattern's width.
#[inline]
pub(crate) unsafe fn memset(dst: CUdeviceptr, pattern: Pattern, n: usize) -> Result<()> {
    match pattern {
        Pattern::D8(v) => cu!(cuMemsetD8_v2(dst, v, n)),
        Pattern::D16(v) => cu!(cuMemsetD16_v2(dst, v, n)),
        Pattern::D32(v) => cu!(cuMemsetD32_v2(dst, v, n)),
    }?;
    legacy_stream_synchronize()
}

/// # Safety
/// As [`memset`], and `stream` is live; the range stays valid until the stream has run it.
#[inline]
pub(crate) unsafe fn memset_async(
    dst: CUdeviceptr,
    pattern: Pattern,
    n: usize,
    stream: CUstream,
) -> Result<()> {
    match pattern {
        Pattern::D8(v) => cu!(cuMemsetD8Async(dst, v, n, stream)),
        Pattern::D16(v) => cu!(cuMemsetD16Async(dst, v, n, stream)),
        Pattern::D32(v) => cu!(cuMemsetD32Async(dst, v, n, stream)),
    }
}

/// # Safety
/// As [`memcpy_htod`], `stream` is live, and both ranges stay valid (and the host range
/// unmodified) until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemcpyHtoDAsync_v2(dst, src, bytes, stream))
}

/// # Safety
/// As [`memcpy_dtoh`], `stream` is live, and both ranges stay valid (and the host range
/// otherwise untouched) until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemcpyDtoHAsync_v2(dst, src, bytes, stream))
}

/// # Safety
/// Both device ranges are valid for `bytes` until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemcpyDtoDAsync_v2(dst, src, bytes, stream))
}

/// # Safety
/// `p` came from a pool allocation; `stream` is live; nothing queued after the free on
/// any stream uses `p`.
#[inline]
pub(crate) unsafe fn mem_free_async(p: CUdeviceptr, stream: CUstream) -> Result<()> {
    cu!(cuMemFreeAsync(p, stream))
}

/// Free and total memory of the current context's device (`cuMemGetInfo`).
#[inline]
pub(crate) fn mem_get_info() -> Result<(usize, usize)> {
    let (mut free, mut total) = (0, 0);
    cu!(cuMemGetInfo_v2(&mut free, &mut total))?;
    Ok((free, total))
}

/// The device's default memory pool.
#[inline]
pub(crate) fn device_default_mem_pool(dev: CUdevice) -> Result<CUmemoryPool> {
    let mut pool = std::ptr::null_mut();
    cu!(cuDeviceGetDefaultMemPool(&mut pool, dev))?;
    Ok(pool)
}

/// Creates a pool of device memory on `device` (pinned, no export handles), at most
/// `max_size` bytes (0: the driver's default, no limit of its own; honoured by CUDA 12.2+).
#[inline]
pub(crate) fn mem_pool_create(device: CUdevice, max_size: usize) -> Result<CUmemoryPool> {
    let props = CUmemPoolProps {
        allocType: 1,   // CU_MEM_ALLOCATION_TYPE_PINNED
        handleTypes: 0, // CU_MEM_HANDLE_TYPE_NONE
        location: CUmemLocation {
            type_: 1, // CU_MEM_LOCATION_TYPE_DEVICE
            id: device,
        },
        win32SecurityAttributes: std::ptr::null_mut(),
        maxSize: max_size,
        usage: 0,
        reserved: [0; 54],
    };
    let mut pool = std::ptr::null_mut();
    cu!(cuMemPoolCreate(&mut pool, &props))?;
    Ok(pool)
}

/// # Safety
/// `pool` came from [`mem_pool_create`] and is not used afterwards.
#[inline]
pub(crate) unsafe fn mem_pool_destroy(pool: CUmemoryPool) -> Result<()> {
    cu!(cuMemPoolDestroy(pool))
}

/// A 64-bit attribute of a pool (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` = 4 and the
/// reserved/used statistics 5 to 8) or a 32-bit (`int`) one (the reuse policies 1 to 3).
///
/// # Safety
/// `pool` is live.
#[inline]
pub(crate) unsafe fn mem_pool_get(pool: CUmemoryPool, attribute: c_int) -> Result<u64> {
    let mut value: u64 = 0;
    cu!(cuMemPoolGetAttribute(
        pool,
        attribute,
        (&mut value as *mut u64).cast()
    ))?;
    // the `int` attributes wrote the low four bytes (little-endian targets)
    Ok(if attribute <= 3 {
        value & 0xffff_ffff
    } else {
        value
    })
}

/// Lets `device` read and write the memory of `pool` (`cuMemPoolSetAccess` with
/// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE`); `device` is not the pool's own device.
///
/// # Safety
/// `pool` is live.
#[inline]
#[cfg_attr(not(feature = "nccl"), allow(dead_code))] // used by the `nccl` feature
pub(crate) unsafe fn mem_pool_allow_device(pool: CUmemoryPool, device: CUdevice) -> Result<()> {
    let desc = CUmemAccessDesc {
        location: CUmemLocation {
            type_: 1, // CU_MEM_LOCATION_TYPE_DEVICE
            id: device,
        },
        flags: 3, // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    };
    cu!(cuMemPoolSetAccess(pool, &desc, 1))
}

/// # Safety
/// `pool` is live; `attribute` is one the driver takes a value of this width for (`int`
/// for 1 to 3, `cuuint64_t` for 4 and the resettable high watermarks 6 and 8).
#[inline]
pub(crate) unsafe fn mem_pool_set(pool: CUmemoryPool, attribute: c_int, value: u64) -> Result<()> {
    let mut v64 = value;
    let mut v32 = value as c_int;
    let ptr: *mut c_void = if attribute <= 3 {
        (&mut v32 as *mut c_int).cast()
    } else {
        (&mut v64 as *mut u64).cast()
    };
    cu!(cuMemPoolSetAttribute(pool, attribute, ptr))
}

/// # Safety
/// `pool` is live.
#[inline]
pub(crate) unsafe fn mem_pool_trim(pool: CUmemoryPool, keep: usize) -> Result<()> {
    cu!(cuMemPoolTrimTo(pool, keep))
}

/// Stream-ordered allocation from `pool`.
///
/// # Safety
/// `pool` and `stream` are live and of one device.
#[inline]
pub(crate) unsafe fn mem_alloc_from_pool_async(
    bytes: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> Result<CUdeviceptr> {
    let mut p = 0;
    cu!(cuMemAllocFromPoolAsync(&mut p, bytes, pool, stream))?;
    Ok(p)
}

/// Allocates `height` rows of `width_bytes` each, padded to the device's pitch
/// (`cuMemAllocPitch`, element size `element_bytes` of 4, 8 or 16); returns the pointer
/// and the pitch in bytes.
#[inline]
pub(crate) fn mem_alloc_pitch(
    width_bytes: usize,
    height: usize,
    element_bytes: u32,
) -> Result<(CUdeviceptr, usize)> {
    let (mut p, mut pitch) = (0, 0);
    cu!(cuMemAllocPitch_v2(
        &mut p,
        &mut pitch,
        width_bytes,
        height,
        element_bytes
    ))?;
    Ok((p, pitch))
}

/// One side of a 2D copy: host memory or device memory, with its row pitch in bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side2D {
    Host(*const c_void, usize),
    HostMut(*mut c_void, usize),
    Device(CUdeviceptr, usize),
}

fn memcpy2d_desc(dst: Side2D, src: Side2D, width_bytes: usize, height: usize) -> CUDA_MEMCPY2D {
    // CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2
    let mut d = CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: 0,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: 0,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        dstPitch: 0,
        WidthInBytes: width_bytes,
        Height: height,
    };
    match src {
        Side2D::Host(p, pitch) => (d.srcMemoryType, d.srcHost, d.srcPitch) = (1, p, pitch),
        Side2D::HostMut(p, pitch) => (d.srcMemoryType, d.srcHost, d.srcPitch) = (1, p, pitch),
        Side2D::Device(p, pitch) => (d.srcMemoryType, d.srcDevice, d.srcPitch) = (2, p, pitch),
    }
    match dst {
        Side2D::HostMut(p, pitch) => (d.dstMemoryType, d.dstHost, d.dstPitch) = (1, p, pitch),
        Side2D::Host(p, pitch) => {
            (d.dstMemoryType, d.dstHost, d.dstPitch) = (1, p.cast_mut(), pitch)
        }
        Side2D::Device(p, pitch) => (d.dstMemoryType, d.dstDevice, d.dstPitch) = (2, p, pitch),
    }
    d
}

/// A 2D copy; complete when it returns.
///
/// # Safety
/// Each side is valid for `height` rows of `width_bytes` at its pitch (host memory for
/// reading or writing as its side says).
#[inline]
pub(crate) unsafe fn memcpy_2d(
    dst: Side2D,
    src: Side2D,
    width_bytes: usize,
    height: usize,
) -> Result<()> {
    let desc = memcpy2d_desc(dst, src, width_bytes, height);
    cu!(cuMemcpy2D_v2(&desc))?;
    legacy_stream_synchronize()
}

/// # Safety
/// As [`memcpy_2d`], `stream` is live, and both sides stay valid (host memory untouched
/// by the host) until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_2d_async(
    dst: Side2D,
    src: Side2D,
    width_bytes: usize,
    height: usize,
    stream: CUstream,
) -> Result<()> {
    let desc = memcpy2d_desc(dst, src, width_bytes, height);
    cu!(cuMemcpy2DAsync_v2(&desc, stream))
}

/// One side of a 3D copy: host or device memory with its row pitch (as in a 2D copy),
/// the rows from one slice to the next, and where the copy starts in it: `at` is
/// `[x in bytes, row, slice]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Side3D {
    pub(crate) memory: Side2D,
    pub(crate) slice_rows: usize,
    pub(crate) at: [usize; 3],
}

/// A 3D copy: `extent` is `[bytes per row, rows per slice, slices]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Copy3D {
    pub(crate) dst: Side3D,
    pub(crate) src: Side3D,
    pub(crate) extent: [usize; 3],
}

impl Copy3D {
    /// Whether the copy moves no bytes (and so must not reach the driver).
    pub(crate) fn is_empty(&self) -> bool {
        self.extent.contains(&0)
    }

    /// The driver's descriptor: the memory types, pointers and pitches of the 2D one, plus
    /// the offsets, slice heights and depth (levels of detail 0, reserved pointers null).
    fn desc(&self) -> CUDA_MEMCPY3D {
        let [width_bytes, height, depth] = self.extent;
        let flat = memcpy2d_desc(self.dst.memory, self.src.memory, width_bytes, height);
        let (src, dst) = (self.src.at, self.dst.at);
        CUDA_MEMCPY3D {
            srcXInBytes: src[0],
            srcY: src[1],
            srcZ: src[2],
            srcLOD: 0,
            srcMemoryType: flat.srcMemoryType,
            srcHost: flat.srcHost,
            srcDevice: flat.srcDevice,
            srcArray: std::ptr::null_mut(),
            reserved0: std::ptr::null_mut(),
            srcPitch: flat.srcPitch,
            srcHeight: self.src.slice_rows,
            dstXInBytes: dst[0],
            dstY: dst[1],
            dstZ: dst[2],
            dstLOD: 0,
            dstMemoryType: flat.dstMemoryType,
            dstHost: flat.dstHost,
            dstDevice: flat.dstDevice,
            dstArray: std::ptr::null_mut(),
            reserved1: std::ptr::null_mut(),
            dstPitch: flat.dstPitch,
            dstHeight: self.dst.slice_rows,
            WidthInBytes: width_bytes,
            Height: height,
            Depth: depth,
        }
    }
}

/// A 3D copy (`cuMemcpy3D`); complete when it returns.
///
/// # Safety
/// Each side is valid, from its start `at`, for `extent[2]` slices `slice_rows` rows apart
/// of `extent[1]` rows of `extent[0]` bytes at its pitch (host memory for reading or
/// writing as its side says); the two do not overlap.
#[inline]
pub(crate) unsafe fn memcpy_3d(copy: &Copy3D) -> Result<()> {
    let desc = copy.desc();
    cu!(cuMemcpy3D_v2(&desc))?;
    legacy_stream_synchronize()
}

/// # Safety
/// As [`memcpy_3d`], `stream` is live, and both sides stay valid (host memory untouched by
/// the host) until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_3d_async(copy: &Copy3D, stream: CUstream) -> Result<()> {
    let desc = copy.desc();
    cu!(cuMemcpy3DAsync_v2(&desc, stream))
}

/// Managed (unified) memory accessible from the host and every device
/// (`cuMemAllocManaged`, `CU_MEM_ATTACH_GLOBAL`), in the current context.
#[inline]
pub(crate) fn mem_alloc_managed(bytes: usize) -> Result<CUdeviceptr> {
    let mut p = 0;
    cu!(cuMemAllocManaged(&mut p, bytes, 1))?;
    Ok(p)
}

/// Prefetches managed memory to `device` (`-1`: the host) in stream order.
///
/// # Safety
/// `[p, p + bytes)` is managed memory that stays allocated until `stream` has run the
/// prefetch; `stream` is live.
#[inline]
pub(crate) unsafe fn mem_prefetch_async(
    p: CUdeviceptr,
    bytes: usize,
    device: CUdevice,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemPrefetchAsync(p, bytes, device, stream))
}

/// Advises the driver about managed memory (`CUmem_advise`; `device` -1 is the host).
///
/// # Safety
/// `[p, p + bytes)` is managed memory.
#[inline]
pub(crate) unsafe fn mem_advise(
    p: CUdeviceptr,
    bytes: usize,
    advice: i32,
    device: CUdevice,
) -> Result<()> {
    cu!(cuMemAdvise(p, bytes, advice, device))
}

/// Where the memory at `p` is, as the driver sees it: its context (null for memory-pool
/// allocations and memory the driver did not allocate), whether the driver knows the
/// address at all (`CU_POINTER_ATTRIBUTE_MEMORY_TYPE` non-zero), and its device's ordinal.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PointerInfo {
    pub(crate) context: CUcontext,
    pub(crate) known: bool,
    pub(crate) device: c_int,
}

/// One `cuPointerGetAttributes` call: see [`PointerInfo`]. Never an error for an address
/// the driver does not know (it reports defaults).
#[inline]
pub(crate) fn pointer_info(p: CUdeviceptr) -> Result<PointerInfo> {
    let mut context: CUcontext = std::ptr::null_mut();
    let mut memory_type: c_uint = 0;
    let mut device: c_int = -1;
    // CU_POINTER_ATTRIBUTE_CONTEXT, _MEMORY_TYPE, _DEVICE_ORDINAL
    let mut attributes: [c_int; 3] = [1, 2, 9];
    let mut data: [*mut c_void; 3] = [
        (&mut context as *mut CUcontext).cast(),
        (&mut memory_type as *mut c_uint).cast(),
        (&mut device as *mut c_int).cast(),
    ];
    cu!(cuPointerGetAttributes(
        3,
        attributes.as_mut_ptr(),
        data.as_mut_ptr(),
        p
    ))?;
    Ok(PointerInfo {
        context,
        known: memory_type != 0,
        device,
    })
}

// Streams and events. Handles passed in are live: the callers hold their brand.

/// Creates a stream in the current context.
#[inline]
pub(crate) fn stream_create(flags: u32, priority: i32) -> Result<CUstream> {
    let mut s = std::ptr::null_mut();
    cu!(cuStreamCreateWithPriority(&mut s, flags, priority))?;
    Ok(s)
}

/// # Safety
/// `s` is a stream this crate created and nothing uses it afterwards.
#[inline]
pub(crate) unsafe fn stream_destroy(s: CUstream) -> Result<()> {
    cu!(cuStreamDestroy_v2(s))
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_synchronize(s: CUstream) -> Result<()> {
    cu!(cuStreamSynchronize(s))
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_query(s: CUstream) -> Result<bool> {
    ready("cuStreamQuery", cu_raw!(cuStreamQuery(s))?)
}

/// # Safety
/// `s` and `e` are live.
#[inline]
pub(crate) unsafe fn stream_wait_event(s: CUstream, e: CUevent) -> Result<()> {
    cu!(cuStreamWaitEvent(s, e, 0))
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_priority(s: CUstream) -> Result<i32> {
    let mut p = 0;
    cu!(cuStreamGetPriority(s, &mut p))?;
    Ok(p)
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_flags(s: CUstream) -> Result<u32> {
    let mut f = 0;
    cu!(cuStreamGetFlags(s, &mut f))?;
    Ok(f)
}

/// Creates an event in the current context.
#[inline]
pub(crate) fn event_create(flags: u32) -> Result<CUevent> {
    let mut e = std::ptr::null_mut();
    cu!(cuEventCreate(&mut e, flags))?;
    Ok(e)
}

/// # Safety
/// `e` is an event this crate created and nothing uses it afterwards.
#[inline]
pub(crate) unsafe fn event_destroy(e: CUevent) -> Result<()> {
    cu!(cuEventDestroy_v2(e))
}

/// # Safety
/// `e` and `s` are live and of the same context.
#[inline]
pub(crate) unsafe fn event_record(e: CUevent, s: CUstream) -> Result<()> {
    cu!(cuEventRecord(e, s))
}

/// # Safety
/// `e` is live.
#[inline]
pub(crate) unsafe fn event_synchronize(e: CUevent) -> Result<()> {
    cu!(cuEventSynchronize(e))
}

/// # Safety
/// `e` is live.
#[inline]
pub(crate) unsafe fn event_query(e: CUevent) -> Result<bool> {
    ready("cuEventQuery", cu_raw!(cuEventQuery(e))?)
}

/// # Safety
/// `start` and `end` are live.
#[inline]
pub(crate) unsafe fn event_elapsed_ms(start: CUevent, end: CUevent) -> Result<f32> {
    let mut ms = 0.0;
    cu!(cuEventElapsedTime(&mut ms, start, end))?;
    Ok(ms)
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_get_ctx(s: CUstream) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    cu!(cuStreamGetCtx(s, &mut c))?;
    Ok(c)
}

// Modules and functions. Handles passed in are live: the callers hold their brand.

/// Loads a module image (PTX text, NUL-terminated, or a cubin/fatbin) into the current
/// context with the default JIT options, returning the JIT error log (and info log) with a
/// failure.
///
/// # Safety
/// `image` points to a complete image: NUL-terminated text for PTX.
#[inline]
pub(crate) unsafe fn module_load(
    image: *const c_void,
) -> std::result::Result<CUmodule, (Error, String)> {
    let mut jit = match JitArgs::new("cuModuleLoadDataEx", &JitOptions::default()) {
        Ok(jit) => jit,
        Err(e) => return Err((e, String::new())),
    };
    // SAFETY: the caller guarantees the image.
    unsafe { module_load_ex(image, &mut jit) }.map_err(|e| (e, jit.failure_log()))
}

/// Loads a module image into the current context with the JIT options of `jit`, whose log
/// buffers the driver fills (read them with `jit.log()` or `jit.failure_log()`).
///
/// # Safety
/// `image` points to a complete image: NUL-terminated text for PTX.
#[inline]
pub(crate) unsafe fn module_load_ex(image: *const c_void, jit: &mut JitArgs) -> Result<CUmodule> {
    let (options, values, n) = jit.raw_parts();
    let mut module = std::ptr::null_mut();
    // The option arrays are `JitArgs`'s: `n` entries each, values of the documented
    // types, log buffers of the sizes passed, all alive for the call.
    cu!(cuModuleLoadDataEx(&mut module, image, n, options, values))?;
    Ok(module)
}

/// Loads a library (context-independent code, CUDA 12.0) with the JIT options of `jit`.
/// The driver copies the image; `jit` must stay alive as long as the library, in case it
/// compiles lazily (see `Library`).
///
/// # Safety
/// `image` points to a complete image: NUL-terminated text for PTX.
#[inline]
pub(crate) unsafe fn library_load_data(
    image: *const c_void,
    jit: &mut JitArgs,
) -> Result<CUlibrary> {
    init()?;
    let (options, values, n) = jit.raw_parts();
    let mut library = std::ptr::null_mut();
    // As for `module_load_ex`; no library options (a null array of 0 entries).
    cu!(cuLibraryLoadData(
        &mut library,
        image,
        options,
        values,
        n,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        0
    ))?;
    Ok(library)
}

/// # Safety
/// `l` came from [`library_load_data`] and nothing uses it, or a function of it, afterwards.
#[inline]
pub(crate) unsafe fn library_unload(l: CUlibrary) -> Result<()> {
    cu!(cuLibraryUnload(l))
}

/// # Safety
/// `l` is live.
#[inline]
pub(crate) unsafe fn library_get_kernel(l: CUlibrary, name: &std::ffi::CStr) -> Result<CUkernel> {
    let mut k = std::ptr::null_mut();
    cu!(cuLibraryGetKernel(&mut k, l, name.as_ptr()))?;
    Ok(k)
}

/// The function of kernel `k` in the current context (loading it there if needed).
///
/// # Safety
/// `k` is a kernel of a live library.
#[inline]
pub(crate) unsafe fn kernel_get_function(k: CUkernel) -> Result<CUfunction> {
    let mut f = std::ptr::null_mut();
    cu!(cuKernelGetFunction(&mut f, k))?;
    Ok(f)
}

/// # Safety
/// `m` is a module this crate loaded, nothing uses it afterwards, and its context is current.
#[inline]
pub(crate) unsafe fn module_unload(m: CUmodule) -> Result<()> {
    cu!(cuModuleUnload(m))
}

/// # Safety
/// `m` is live.
#[inline]
pub(crate) unsafe fn module_get_function(m: CUmodule, name: &std::ffi::CStr) -> Result<CUfunction> {
    let mut f = std::ptr::null_mut();
    cu!(cuModuleGetFunction(&mut f, m, name.as_ptr()))?;
    Ok(f)
}

/// # Safety
/// `m` is live.
#[inline]
pub(crate) unsafe fn module_get_global(
    m: CUmodule,
    name: &std::ffi::CStr,
) -> Result<(CUdeviceptr, usize)> {
    let (mut p, mut bytes) = (0, 0);
    cu!(cuModuleGetGlobal_v2(&mut p, &mut bytes, m, name.as_ptr()))?;
    Ok((p, bytes))
}

/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_get_attribute(f: CUfunction, attrib: i32) -> Result<i32> {
    let mut v = 0;
    cu!(cuFuncGetAttribute(&mut v, attrib, f))?;
    Ok(v)
}

/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_set_attribute(f: CUfunction, attrib: i32, value: i32) -> Result<()> {
    cu!(cuFuncSetAttribute(f, attrib, value))
}

/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_set_cache_config(f: CUfunction, config: i32) -> Result<()> {
    cu!(cuFuncSetCacheConfig(f, config))
}

/// `(minimum grid size for full occupancy, block size)` for a launch of `f`.
///
/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn occupancy_block_size(
    f: CUfunction,
    dynamic_smem: usize,
) -> Result<(i32, i32)> {
    let (mut grid, mut block) = (0, 0);
    cu!(cuOccupancyMaxPotentialBlockSize(
        &mut grid,
        &mut block,
        f,
        None,
        dynamic_smem,
        0
    ))?;
    Ok((grid, block))
}

/// The offset and size of parameter `index` of `f` (`cuFuncGetParamInfo`, CUDA 12.4), or
/// `None` past its last parameter; `DriverTooOld` where the driver lacks the call.
///
/// Past the last parameter the driver answers `CUDA_ERROR_INVALID_VALUE`, which
/// compute-sanitizer reports as an API error: callers ask for an index at or past the
/// count only where no count is known ([`func_param_count`], or the image's table).
///
/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_param_info(
    f: CUfunction,
    index: usize,
) -> Result<Option<(usize, usize)>> {
    let (mut offset, mut size) = (0, 0);
    match cu_raw!(cuFuncGetParamInfo(f, index, &mut offset, &mut size))? {
        0 => Ok(Some((offset, size))),
        INVALID_VALUE => Ok(None),
        raw => Err(failure("cuFuncGetParamInfo", raw)),
    }
}

/// The number of parameters of `f` (`cuFuncGetParamCount`, CUDA 13.2); `DriverTooOld`
/// where the driver lacks the call.
///
/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_param_count(f: CUfunction) -> Result<usize> {
    let mut count = 0;
    cu!(cuFuncGetParamCount(f, &mut count))?;
    Ok(count)
}

/// Which of the two parameter queries the loaded driver has: `(cuFuncGetParamInfo,
/// cuFuncGetParamCount)`; both `false` where no driver could be loaded.
pub(crate) fn param_queries() -> (bool, bool) {
    match api() {
        Ok(api) => (
            api.cuFuncGetParamInfo.is_some(),
            api.cuFuncGetParamCount.is_some(),
        ),
        Err(_) => (false, false),
    }
}

/// How many blocks of `block_size` threads and `dynamic_smem` bytes of dynamic shared
/// memory of `f` can be resident on one multiprocessor at once (an error, not undefined
/// behaviour, where no context is current).
///
/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn occupancy_max_active_blocks(
    f: CUfunction,
    block_size: u32,
    dynamic_smem: usize,
) -> Result<i32> {
    let mut blocks = 0;
    cu!(cuOccupancyMaxActiveBlocksPerMultiprocessor(
        &mut blocks,
        f,
        block_size as c_int,
        dynamic_smem
    ))?;
    Ok(blocks)
}

/// The largest cluster of `f` that can be launched with `config`'s block and shared memory
/// (its cluster dimensions are ignored; 8 at most unless `f` allows non-portable sizes).
///
/// # Safety
/// `f` is live and its context current; `config.attrs` points to `config.numAttrs` entries.
#[inline]
pub(crate) unsafe fn occupancy_max_potential_cluster_size(
    f: CUfunction,
    config: &CUlaunchConfig,
) -> Result<i32> {
    let mut size = 0;
    cu!(cuOccupancyMaxPotentialClusterSize(&mut size, f, config))?;
    Ok(size)
}

/// `cuLaunchKernelEx`: a launch with the attributes in `config`.
///
/// # Safety
/// As for [`launch_kernel`], with the stream in `config`, whose `attrs` points to
/// `numAttrs` attributes, each of its documented layout.
#[inline]
pub(crate) unsafe fn launch_kernel_ex(
    config: &CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
) -> Result<()> {
    cu!(cuLaunchKernelEx(config, f, params, std::ptr::null_mut()))
}

/// `cuLaunchCooperativeKernel`: the cooperative launch of drivers without
/// `cuLaunchKernelEx` (before CUDA 11.8).
///
/// # Safety
/// As for [`launch_kernel`].
#[inline]
pub(crate) unsafe fn launch_cooperative_kernel(
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    stream: CUstream,
    params: *mut *mut c_void,
) -> Result<()> {
    cu!(cuLaunchCooperativeKernel(
        f,
        grid[0],
        grid[1],
        grid[2],
        block[0],
        block[1],
        block[2],
        shared_mem_bytes,
        stream,
        params
    ))
}

/// The CUDA version of the loaded driver (as `cuDriverGetVersion` said when it was loaded;
/// 0 if it did not say).
#[inline]
pub(crate) fn loaded_version() -> Result<i32> {
    api().map(|api| api.version)
}

/// # Safety
/// `f` and `stream` are live and of one context; `params` points to one pointer per kernel
/// parameter, each to a value of the parameter's type, and every memory the kernel
/// reaches stays valid until the stream has run it.
#[inline]
pub(crate) unsafe fn launch_kernel(
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    stream: CUstream,
    params: *mut *mut c_void,
) -> Result<()> {
    cu!(cuLaunchKernel(
        f,
        grid[0],
        grid[1],
        grid[2],
        block[0],
        block[1],
        block[2],
        shared_mem_bytes,
        stream,
        params,
        std::ptr::null_mut()
    ))
}

// Stream capture, graphs and host functions. Handles passed in are live: the callers hold
// their brand (`graph.rs`, `host_fn.rs`).

/// `CU_STREAM_CAPTURE_MODE_RELAXED`: the capture prohibits no API call of any thread (see
/// `graph.rs` for why the crate captures in this mode).
pub(crate) const CAPTURE_MODE_RELAXED: c_int = 2;

/// Starts capturing the work queued on `s` into a graph.
///
/// # Safety
/// `s` is live and not capturing.
#[inline]
pub(crate) unsafe fn stream_begin_capture(s: CUstream, mode: c_int) -> Result<()> {
    cu!(cuStreamBeginCapture_v2(s, mode))
}

/// Ends the capture on `s`: the graph, or null if the capture was invalidated.
///
/// # Safety
/// `s` is live and capturing.
#[inline]
pub(crate) unsafe fn stream_end_capture(s: CUstream) -> Result<CUgraph> {
    let mut g = std::ptr::null_mut();
    cu!(cuStreamEndCapture(s, &mut g))?;
    Ok(g)
}

/// The number of nodes of `g`.
///
/// # Safety
/// `g` is live.
#[inline]
pub(crate) unsafe fn graph_node_count(g: CUgraph) -> Result<usize> {
    let mut n = 0;
    cu!(cuGraphGetNodes(g, std::ptr::null_mut(), &mut n))?;
    Ok(n)
}

/// Instantiates `g` (no flags).
///
/// # Safety
/// `g` is live.
#[inline]
pub(crate) unsafe fn graph_instantiate(g: CUgraph) -> Result<CUgraphExec> {
    let mut e = std::ptr::null_mut();
    cu!(cuGraphInstantiateWithFlags(&mut e, g, 0))?;
    Ok(e)
}

/// # Safety
/// `g` is a graph this crate made and nothing uses it afterwards.
#[inline]
pub(crate) unsafe fn graph_destroy(g: CUgraph) -> Result<()> {
    cu!(cuGraphDestroy(g))
}

/// # Safety
/// `e` is an executable graph this crate made and nothing uses it afterwards (a launch
/// still running completes first: the driver frees it then).
#[inline]
pub(crate) unsafe fn graph_exec_destroy(e: CUgraphExec) -> Result<()> {
    cu!(cuGraphExecDestroy(e))
}

/// # Safety
/// `e` and `s` are live and of one context; every memory the graph reaches stays valid
/// until the stream has run it.
#[inline]
pub(crate) unsafe fn graph_launch(e: CUgraphExec, s: CUstream) -> Result<()> {
    cu!(cuGraphLaunch(e, s))
}

/// Updates `e` with the parameters of `g` (`cuGraphExecUpdate_v2`, CUDA 12.0). On
/// `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE` the driver did not perform the update; the
/// error's detail names the reason it gave.
///
/// # Safety
/// `e` and `g` are live, and no launch of `e` is pending.
#[inline]
pub(crate) unsafe fn graph_exec_update(e: CUgraphExec, g: CUgraph) -> Result<()> {
    let mut info = CUgraphExecUpdateResultInfo {
        result: 0,
        errorNode: std::ptr::null_mut(),
        errorFromNode: std::ptr::null_mut(),
    };
    match cu!(cuGraphExecUpdate_v2(e, g, &mut info)) {
        Ok(()) => Ok(()),
        Err(error) if error.code() == ErrorCode::GraphExecUpdateFailure => {
            let why = match info.result {
                1 => "CU_GRAPH_EXEC_UPDATE_ERROR",
                2 => "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED",
                3 => "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED",
                4 => "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED",
                5 => "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED",
                6 => "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED",
                7 => "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE",
                8 => "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED",
                _ => "an update result this crate does not know",
            };
            Err(Error::with_detail(
                "cuGraphExecUpdate_v2",
                ErrorCode::GraphExecUpdateFailure,
                format!(
                    "the driver did not update the executable graph: {why} ({})",
                    info.result
                ),
            ))
        }
        Err(error) => Err(error),
    }
}

/// Queues a call of `f(data)` on `s`, after the work queued before it.
///
/// # Safety
/// `s` is live; `f` may be called with `data` on a driver thread until the stream has
/// passed it (or never, after an error of the context), and `data` stays valid for it.
#[inline]
pub(crate) unsafe fn launch_host_func(
    s: CUstream,
    f: unsafe extern "C" fn(*mut c_void),
    data: *mut c_void,
) -> Result<()> {
    cu!(cuLaunchHostFunc(s, Some(f), data))
}

/// Lets the current context access `peer`'s memory; `Ok` also when it already could.
///
/// # Safety
/// `peer` is a live context.
#[inline]
pub(crate) unsafe fn ctx_enable_peer_access(peer: CUcontext) -> Result<()> {
    match cu_raw!(cuCtxEnablePeerAccess(peer, 0))? {
        PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        raw => check("cuCtxEnablePeerAccess", raw),
    }
}

/// Copies between contexts (devices); complete when it returns.
///
/// # Safety
/// Both contexts are live, and each range is valid memory of its context for `bytes`.
#[inline]
pub(crate) unsafe fn memcpy_peer(
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    bytes: usize,
) -> Result<()> {
    cu!(cuMemcpyPeer(dst, dst_ctx, src, src_ctx, bytes))?;
    legacy_stream_synchronize()
}

/// # Safety
/// As [`memcpy_peer`], `stream` is live, and both ranges stay valid until it has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_peer_async(
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, bytes, stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optional_entry_point_the_driver_lacks_is_an_error_naming_both_versions() {
        let api = Api::fake(11040);
        let mut id = 0;
        // SAFETY: the fake table reaches no driver.
        let e = unsafe { api.cuCtxGetId(std::ptr::null_mut(), &mut id) }.unwrap_err();
        assert_eq!(e.code(), ErrorCode::DriverTooOld);
        assert_eq!(e.call(), "cuCtxGetId");
        assert_eq!(
            e.to_string(),
            "cuCtxGetId failed: CUDA_BRAND_DRIVER_TOO_OLD (CUDA driver is too old): \
             cuCtxGetId needs a CUDA 12.0 driver (R525 or newer); this driver is CUDA 11.4"
        );
        // libraries (CUDA 12.0): the same error, naming the entry point
        // SAFETY: the fake table reaches no driver.
        let e = unsafe {
            api.cuLibraryLoadData(
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        }
        .unwrap_err();
        assert_eq!(
            e.detail(),
            Some(
                "cuLibraryLoadData needs a CUDA 12.0 driver (R525 or newer); this driver is \
                 CUDA 11.4"
            )
        );
        // a required entry point is called (the fake returns FAKE_RESULT)
        let mut current = std::ptr::null_mut();
        // SAFETY: the fake table reaches no driver.
        let result = unsafe { api.cuCtxGetCurrent(&mut current) };
        assert_eq!(result, Ok(FAKE_RESULT));
        // every optional entry point of the fake is absent, and each says why
        let optional = api.optional_entries();
        assert_eq!(optional.len(), 11, "{optional:?}");
        assert!(
            optional
                .iter()
                .all(|&(_, since, present)| !present && since > MINIMUM_DRIVER)
        );
        let e = Api::fake(11000).lacks("cuMemAllocAsync", 11020);
        assert_eq!(
            e.detail(),
            Some(
                "cuMemAllocAsync needs a CUDA 11.2 driver (R460 or newer); this driver is CUDA 11.0"
            )
        );
    }

    #[test]
    fn versions_read_as_cuda_writes_them() {
        assert_eq!(cuda_version(11040), "CUDA 11.4");
        assert_eq!(cuda_version(12020), "CUDA 12.2");
        assert_eq!(cuda_version(13000), "CUDA 13.0");
        assert_eq!(cuda_version(0), "of an unknown version");
        assert_eq!(
            driver_for(MINIMUM_DRIVER),
            "a CUDA 11.4 driver (R470 or newer)"
        );
        assert_eq!(driver_for(12040), "a CUDA 12.4 driver (R550 or newer)");
        assert_eq!(driver_for(12070), "a CUDA 12.7 driver or newer");
    }

    #[test]
    fn a_missing_library_is_driver_not_found_with_how_to_get_one() {
        let Err(e) = Api::load(Some(OsStr::new("/nonexistent/libcuda.so.1"))) else {
            panic!("/nonexistent/libcuda.so.1 loaded");
        };
        assert_eq!(e.code(), ErrorCode::DriverNotFound);
        assert_eq!(e.call(), "loading the CUDA driver library");
        let text = e.to_string();
        for part in [
            "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_NOT_FOUND (CUDA driver \
             library not found): CUDA_BRAND_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 could not \
             be loaded (",
            "install the NVIDIA driver (CUDA 11.4, R470, or newer)",
            "scripts/install-libcuda",
        ] {
            assert!(text.contains(part), "{text}");
        }
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        assert_eq!(
            text,
            "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_NOT_FOUND (CUDA driver \
             library not found): CUDA_BRAND_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 could not \
             be loaded (/nonexistent/libcuda.so.1: cannot open shared object file: No such file \
             or directory): point it at the driver library, or unset it; install the NVIDIA \
             driver (CUDA 11.4, R470, or newer), or on Debian without a GPU run cuda-brand's \
             scripts/install-libcuda (it installs libcuda1, whose cuInit reports no device)"
        );
    }

    #[test]
    fn the_link_placeholder_is_never_reported_and_never_a_library_the_loader_opens() {
        let dir = "/w/target/debug/build/cuda-brand-0123456789abcdef/out/stub";
        let stub = format!("{dir}/libcuda.so: invalid ELF header");
        let text = failure_text(OsStr::new("libcuda.so"), stub, Some(dir));
        assert_eq!(
            text,
            "libcuda.so: no driver library of this name (only cuda-brand's link placeholder)"
        );
        assert!(!text.contains("stub") && !text.contains(dir), "{text}");
        // every other failure is the loader's own words
        let other = "libcuda.so.1: cannot open shared object file: No such file or directory";
        for stub_dir in [Some(dir), Some(""), None] {
            assert_eq!(
                failure_text(OsStr::new("libcuda.so.1"), other.to_owned(), stub_dir),
                other
            );
        }
        // a directory whose name only begins like the placeholder's is not it
        let beside = format!("{dir}2/libcuda.so: invalid ELF header");
        assert_eq!(
            failure_text(OsStr::new("libcuda.so"), beside.clone(), Some(dir)),
            beside
        );
        // the build's placeholder (Linux) is an empty archive, never a shared object's name
        // (build.rs always makes the directory; a test binary copied to another machine
        // finds none)
        if let Some(dir) = LINK_STUB_DIR.filter(|dir| std::path::Path::new(dir).is_dir()) {
            let dir = std::path::Path::new(dir);
            assert_eq!(
                std::fs::read(dir.join("libcuda.a")).ok(),
                Some(b"!<arch>\n".to_vec())
            );
            for name in DRIVER_LIBRARIES {
                assert!(
                    !dir.join(name).exists(),
                    "{} exists",
                    dir.join(name).display()
                );
            }
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_library_without_a_required_entry_point_is_driver_too_old_naming_it() {
        // The C library loads everywhere and has no CUDA entry points.
        let Err(e) = Api::load(Some(OsStr::new("libc.so.6"))) else {
            panic!("libc.so.6 passed for a CUDA driver");
        };
        assert_eq!(
            e.to_string(),
            "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_TOO_OLD (CUDA driver is \
             too old): libc.so.6 has no cuDriverGetVersion: cuda-brand needs a CUDA 11.4 driver \
             (R470 or newer); this driver is of an unknown version"
        );
        assert_eq!(
            lacks_required("libcuda.so.1", "cuGraphInstantiateWithFlags", 11030).to_string(),
            "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_TOO_OLD (CUDA driver is \
             too old): libcuda.so.1 has no cuGraphInstantiateWithFlags: cuda-brand needs a CUDA \
             11.4 driver (R470 or newer); this driver is CUDA 11.3"
        );
    }

    /// With a driver library installed (this crate's CI installs Debian's libcuda1, no GPU
    /// needed), checks the real table; without one, that the load failed as it should.
    #[test]
    fn the_installed_driver_lacks_only_entry_points_newer_than_it() {
        let api = match api() {
            Ok(api) => api,
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::DriverNotFound, "{e}");
                eprintln!("skipped: no driver library ({e})");
                return;
            }
        };
        assert!(api.version >= MINIMUM_DRIVER, "driver {}", api.version);
        for (name, since, present) in api.optional_entries() {
            assert!(
                present || api.version < since,
                "a CUDA {} driver lacks {name} (CUDA {since})",
                api.version
            );
        }
        if api.cuFuncGetParamInfo.is_none() {
            let (mut offset, mut size) = (0, 0);
            // SAFETY: the entry point is absent, so nothing reaches the driver.
            let e =
                unsafe { api.cuFuncGetParamInfo(std::ptr::null_mut(), 0, &mut offset, &mut size) }
                    .unwrap_err();
            assert_eq!(
                e.detail(),
                Some(
                    format!(
                        "cuFuncGetParamInfo needs a CUDA 12.4 driver (R550 or newer); this \
                         driver is {}",
                        cuda_version(api.version)
                    )
                    .as_str()
                )
            );
        }
    }
}
