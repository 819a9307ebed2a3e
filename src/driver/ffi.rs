//! Types of `cuda.h` that the table's signatures need and the bindings (CUDA 10) lack or
//! declare with Rust enums; layouts are those of `cuda.h` on 64-bit targets (checked
//! below). Enum-typed fields are plain integers, so a zeroed value is valid.

#![allow(dead_code, non_camel_case_types)]

use std::ffi::{c_int, c_uint, c_void};

pub(crate) use cuda_driver_sys::{CUarray, CUgraph, CUgraphExec, CUgraphNode, CUhostFn};
use cuda_driver_sys::{CUdeviceptr, CUstream};

/// `CUstreamCallback`: the bindings declare its status as their `CUresult` enum, which a
/// code newer than CUDA 10 would make undefined behaviour; here it is the raw `u32`.
pub(crate) type CUstreamCallback =
    Option<unsafe extern "C" fn(stream: CUstream, status: u32, data: *mut c_void)>;

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

/// `struct CUgreenCtx_st` (CUDA 12.4): a green context, a context over some of a device's
/// SMs.
#[repr(C)]
pub(crate) struct CUgreenCtx_st {
    _opaque: [u8; 0],
}
/// `CUgreenCtx` (CUDA 12.4).
pub(crate) type CUgreenCtx = *mut CUgreenCtx_st;

/// `struct CUdevResourceDesc_st` (CUDA 12.4): a descriptor of resources that a green
/// context is created with. The driver has no call that frees one.
#[repr(C)]
pub(crate) struct CUdevResourceDesc_st {
    _opaque: [u8; 0],
}
/// `CUdevResourceDesc` (CUDA 12.4).
pub(crate) type CUdevResourceDesc = *mut CUdevResourceDesc_st;

/// `CU_DEV_RESOURCE_TYPE_SM` (`CUdevResourceType`, CUDA 12.4).
pub(crate) const CU_DEV_RESOURCE_TYPE_SM: c_int = 1;
/// `CU_GREEN_CTX_DEFAULT_STREAM` (`CUgreenCtxCreate_flags`, CUDA 12.4): the flag that
/// `cuGreenCtxCreate` requires.
pub(crate) const CU_GREEN_CTX_DEFAULT_STREAM: c_uint = 1;

/// `CUdevSmResource` as of CUDA 13.0 (`cuda.h` 13.0.0: `smCount`, `minSmPartitionSize`,
/// `smCoscheduledAlignment`; NVIDIA's CUDA 13.0 driver API reference, "CUdevSmResource
/// Struct Reference", and the `cydriver.pxd` that cuda-python generates from `cuda.h`
/// 13.0.0). CUDA 12.4 to 12.9 declare only `smCount`: the two later fields lie in bytes
/// that 12.x headers call `_oversize`, so a driver older than 13.0 leaves them undefined
/// (the crate reads them only from a 13.0 driver, see `driver::green`). CUDA 13.1 adds
/// `flags` after them, also inside the same bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CUdevSmResource {
    pub(crate) smCount: c_uint,
    pub(crate) minSmPartitionSize: c_uint,
    pub(crate) smCoscheduledAlignment: c_uint,
}

/// `CUdevResource` (`CUdevResource_v1`, CUDA 12.4), a fixed-size tagged union of 144 bytes:
/// `CUdevResourceType type; unsigned char _internal_padding[92];` then the union at byte
/// 96. In `cuda.h` 12.4 to 13.0 the union is `{ CUdevSmResource sm; unsigned char
/// _oversize[48]; }`; from 13.1 it is 40 bytes (`RESOURCE_ABI_BYTES`) followed by a
/// `CUdevResource_st *nextResource` at byte 136, which makes the struct 8-aligned. Every
/// version is 144 bytes with `sm` at byte 96, which is all the crate reads; the rest is
/// kept as bytes and handed back to the driver unchanged. Aligned to 8 here, as 13.1
/// requires (more alignment than 13.0 asks for is harmless).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(crate) struct CUdevResource {
    /// `CUdevResourceType`.
    pub(crate) type_: c_int,
    pub(crate) _internal_padding: [u8; 92],
    pub(crate) sm: CUdevSmResource,
    pub(crate) _rest: [u8; 36],
}

impl CUdevResource {
    /// All bytes zero (an invalid resource, `CU_DEV_RESOURCE_TYPE_INVALID`), for the driver
    /// to fill.
    pub(crate) const ZEROED: CUdevResource = CUdevResource {
        type_: 0,
        _internal_padding: [0; 92],
        sm: CUdevSmResource {
            smCount: 0,
            minSmPartitionSize: 0,
            smCoscheduledAlignment: 0,
        },
        _rest: [0; 36],
    };
}

impl std::fmt::Debug for CUdevResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CUdevResource")
            .field("type", &self.type_)
            .field("sm", &self.sm)
            .finish_non_exhaustive()
    }
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
    // green contexts: 4 + 92 + 48 bytes in cuda.h 12.4 to 13.0; 4 + 92 + 40 + 8 in 13.1+
    assert!(size_of::<CUdevResource>() == 144);
    assert!(std::mem::align_of::<CUdevResource>() == 8);
    assert!(offset_of!(CUdevResource, sm) == 96);
    assert!(size_of::<CUdevSmResource>() == 12);
    assert!(offset_of!(CUdevResource, sm) + offset_of!(CUdevSmResource, minSmPartitionSize) == 100);
    assert!(
        offset_of!(CUdevResource, sm) + offset_of!(CUdevSmResource, smCoscheduledAlignment) == 104
    );
};
