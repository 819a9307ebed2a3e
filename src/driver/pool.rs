//! Wrappers: memory pools and stream-ordered allocation (CUDA 11.2).

use std::ffi::{c_int, c_void};

use super::{
    CUdevice, CUdeviceptr, CUmemAccessDesc, CUmemLocation, CUmemPoolProps, CUmemoryPool, CUstream,
};
use crate::error::Result;

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

/// # Safety
/// `p` came from a pool allocation; `stream` is live; nothing queued after the free on
/// any stream uses `p`.
#[inline]
pub(crate) unsafe fn mem_free_async(p: CUdeviceptr, stream: CUstream) -> Result<()> {
    cu!(cuMemFreeAsync(p, stream))
}
