//! Wrappers: device, page-locked host, pitched and managed allocations, page-locking host
//! memory, and what the driver knows of an address. Functions taking a device pointer or
//! host pointer are `unsafe`: the caller guarantees the range is valid for the access, and
//! stays valid until the (possibly asynchronous) operation is done.

use std::ffi::{c_int, c_uint, c_void};

use super::{CUcontext, CUdevice, CUdeviceptr, CUmemoryPool, CUstream};
use crate::error::Result;

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
/// (`src/memory/staging/`), which own the memory they register.
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

/// Free and total memory of the current context's device (`cuMemGetInfo`).
#[inline]
pub(crate) fn mem_get_info() -> Result<(usize, usize)> {
    let (mut free, mut total) = (0, 0);
    cu!(cuMemGetInfo_v2(&mut free, &mut total))?;
    Ok((free, total))
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
/// address at all (`CU_POINTER_ATTRIBUTE_MEMORY_TYPE` non-zero), its device's ordinal, and
/// whether the host can read it directly (managed memory, or host memory: page-locked,
/// mapped, or of a pool on the host), and whether it is memory of a pool (never a module
/// global, so the order of synchronous operations can place it: `crate::synchronous`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PointerInfo {
    pub(crate) context: CUcontext,
    pub(crate) known: bool,
    pub(crate) device: c_int,
    pub(crate) host_visible: bool,
    pub(crate) pooled: bool,
}

/// One `cuPointerGetAttributes` call: see [`PointerInfo`]. Never an error for an address
/// the driver does not know (it reports defaults).
#[inline]
pub(crate) fn pointer_info(p: CUdeviceptr) -> Result<PointerInfo> {
    let mut context: CUcontext = std::ptr::null_mut();
    let mut memory_type: c_uint = 0;
    let mut device: c_int = -1;
    let mut managed: c_int = 0;
    let mut pool: CUmemoryPool = std::ptr::null_mut();
    // CU_POINTER_ATTRIBUTE_CONTEXT, _MEMORY_TYPE, _DEVICE_ORDINAL, _IS_MANAGED,
    // _MEMPOOL_HANDLE
    let mut attributes: [c_int; 5] = [1, 2, 9, 8, 17];
    let mut data: [*mut c_void; 5] = [
        (&mut context as *mut CUcontext).cast(),
        (&mut memory_type as *mut c_uint).cast(),
        (&mut device as *mut c_int).cast(),
        (&mut managed as *mut c_int).cast(),
        (&mut pool as *mut CUmemoryPool).cast(),
    ];
    cu!(cuPointerGetAttributes(
        5,
        attributes.as_mut_ptr(),
        data.as_mut_ptr(),
        p
    ))?;
    Ok(PointerInfo {
        context,
        known: memory_type != 0,
        device,
        // CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_UNIFIED = 4
        host_visible: managed != 0 || memory_type == 1 || memory_type == 4,
        pooled: !pool.is_null(),
    })
}

/// What the driver says of an allocation containing an address, for the checks of the
/// `from_raw_parts` constructors: [`PointerInfo`]'s facts and whether it is managed memory
/// and of which memory pool. All zero (`memory_type` 0, null handles) for an address the
/// driver does not know.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Allocation {
    /// `CU_POINTER_ATTRIBUTE_CONTEXT`: the context it was allocated in (null for memory of a
    /// memory pool, which is tied to no context, and for unknown addresses).
    pub(crate) context: CUcontext,
    /// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`: 0 unknown, 1 host, 2 device, 4 unified.
    pub(crate) memory_type: c_uint,
    /// `CU_POINTER_ATTRIBUTE_IS_MANAGED`.
    pub(crate) managed: bool,
    /// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` (-1 where the driver says none).
    pub(crate) device: c_int,
    /// `CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE` (CUDA 11.3): the pool, or null for memory of
    /// no pool.
    pub(crate) pool: CUmemoryPool,
}

/// The memory types of `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` (`CUmemorytype`).
pub(crate) const MEMORY_TYPE_HOST: c_uint = 1;

/// One `cuPointerGetAttributes` call: see [`Allocation`]. Never an error for an address the
/// driver does not know (it reports defaults), so refusing one provokes no driver error.
#[inline]
pub(crate) fn allocation_of(p: CUdeviceptr) -> Result<Allocation> {
    let mut context: CUcontext = std::ptr::null_mut();
    let mut memory_type: c_uint = 0;
    // the driver writes a boolean; a zeroed word reads it whatever its width (little end)
    let mut managed: c_uint = 0;
    let mut device: c_int = -1;
    let mut pool: CUmemoryPool = std::ptr::null_mut();
    // CU_POINTER_ATTRIBUTE_CONTEXT, _MEMORY_TYPE, _IS_MANAGED, _DEVICE_ORDINAL,
    // _MEMPOOL_HANDLE
    let mut attributes: [c_int; 5] = [1, 2, 8, 9, 17];
    let mut data: [*mut c_void; 5] = [
        (&mut context as *mut CUcontext).cast(),
        (&mut memory_type as *mut c_uint).cast(),
        (&mut managed as *mut c_uint).cast(),
        (&mut device as *mut c_int).cast(),
        (&mut pool as *mut CUmemoryPool).cast(),
    ];
    cu!(cuPointerGetAttributes(
        5,
        attributes.as_mut_ptr(),
        data.as_mut_ptr(),
        p
    ))?;
    Ok(Allocation {
        context,
        memory_type,
        managed: managed != 0,
        device,
        pool,
    })
}

/// The address range of the device allocation containing `p`
/// (`CU_POINTER_ATTRIBUTE_RANGE_START_ADDR`, `_RANGE_SIZE`, what `cuMemGetAddressRange`
/// reports, in one `cuPointerGetAttributes` call): its start and size in bytes, or
/// `(0, 0)` where the driver reports none. Asked only of device and managed memory.
#[inline]
pub(crate) fn address_range(p: CUdeviceptr) -> Result<(CUdeviceptr, usize)> {
    let mut start: CUdeviceptr = 0;
    let mut size: usize = 0;
    let mut attributes: [c_int; 2] = [11, 12];
    let mut data: [*mut c_void; 2] = [
        (&mut start as *mut CUdeviceptr).cast(),
        (&mut size as *mut usize).cast(),
    ];
    cu!(cuPointerGetAttributes(
        2,
        attributes.as_mut_ptr(),
        data.as_mut_ptr(),
        p
    ))?;
    Ok((start, size))
}
