//! The private driver layer: the only code that calls into `libcuda`.
//!
//! Why not call `cuda_driver_sys` functions directly: the bindings declare every entry
//! point as returning the Rust enum `CUresult`, which only knows the codes of CUDA 10. A
//! newer driver returns codes outside it (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION` = 222 for
//! a PTX that is too new, `CUDA_ERROR_STUB_LIBRARY` = 34, ...), and an out-of-range value in
//! a Rust enum is undefined behaviour. So the entry points used here are declared again,
//! with the same symbols and argument types, but returning the raw `u32`, and enum-typed
//! out-parameters are read as integers. `cuda_driver_sys` still provides the handle types
//! and the link to `libcuda`. Entry points newer than its CUDA 10 headers (stream-ordered
//! allocation) are declared here the same way.
//!
//! Each wrapper is `#[inline]` and turns the code into [`Result`]; the error path is cold.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

pub(crate) use cuda_driver_sys::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUstream, CUuuid,
};

use crate::error::{Error, ErrorCode, Result};

#[link(name = "cuda")]
unsafe extern "C" {
    fn cuInit(flags: c_uint) -> u32;
    fn cuDriverGetVersion(version: *mut c_int) -> u32;
    fn cuDeviceGetCount(count: *mut c_int) -> u32;
    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> u32;
    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> u32;
    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> u32;
    fn cuDeviceGetAttribute(value: *mut c_int, attrib: c_int, dev: CUdevice) -> u32;
    fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) -> u32;
    fn cuDeviceCanAccessPeer(can: *mut c_int, dev: CUdevice, peer: CUdevice) -> u32;
    fn cuCtxEnablePeerAccess(peer: CUcontext, flags: c_uint) -> u32;
    fn cuMemcpyPeer(
        dst: CUdeviceptr,
        dst_ctx: CUcontext,
        src: CUdeviceptr,
        src_ctx: CUcontext,
        bytes: usize,
    ) -> u32;
    fn cuMemcpyPeerAsync(
        dst: CUdeviceptr,
        dst_ctx: CUcontext,
        src: CUdeviceptr,
        src_ctx: CUcontext,
        bytes: usize,
        stream: CUstream,
    ) -> u32;

    fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice) -> u32;
    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> u32;
    fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint) -> u32;
    fn cuDevicePrimaryCtxGetState(dev: CUdevice, flags: *mut c_uint, active: *mut c_int) -> u32;

    fn cuCtxCreate_v2(ctx: *mut CUcontext, flags: c_uint, dev: CUdevice) -> u32;
    fn cuCtxDestroy_v2(ctx: CUcontext) -> u32;
    fn cuCtxPushCurrent_v2(ctx: CUcontext) -> u32;
    fn cuCtxPopCurrent_v2(ctx: *mut CUcontext) -> u32;
    fn cuCtxGetCurrent(ctx: *mut CUcontext) -> u32;
    fn cuCtxGetDevice(dev: *mut CUdevice) -> u32;
    fn cuCtxGetFlags(flags: *mut c_uint) -> u32;
    fn cuCtxSynchronize() -> u32;
    fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint) -> u32;
    fn cuCtxGetCacheConfig(config: *mut c_int) -> u32;
    fn cuCtxSetCacheConfig(config: c_int) -> u32;
    fn cuCtxGetSharedMemConfig(config: *mut c_int) -> u32;
    fn cuCtxSetSharedMemConfig(config: c_int) -> u32;
    fn cuCtxGetLimit(value: *mut usize, limit: c_int) -> u32;
    fn cuCtxSetLimit(limit: c_int, value: usize) -> u32;
    fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) -> u32;

    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize) -> u32;
    fn cuMemFree_v2(dptr: CUdeviceptr) -> u32;
    fn cuMemHostAlloc(pp: *mut *mut c_void, bytes: usize, flags: c_uint) -> u32;
    fn cuMemFreeHost(p: *mut c_void) -> u32;
    fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, bytes: usize) -> u32;
    fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> u32;
    fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> u32;
    fn cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize) -> u32;
    fn cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize) -> u32;
    fn cuMemsetD32_v2(dst: CUdeviceptr, value: u32, n: usize) -> u32;
    fn cuMemcpyHtoDAsync_v2(
        dst: CUdeviceptr,
        src: *const c_void,
        bytes: usize,
        stream: CUstream,
    ) -> u32;
    fn cuMemcpyDtoHAsync_v2(
        dst: *mut c_void,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    ) -> u32;
    fn cuMemcpyDtoDAsync_v2(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    ) -> u32;
    fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream) -> u32;
    fn cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, stream: CUstream) -> u32;
    fn cuMemsetD32Async(dst: CUdeviceptr, value: u32, n: usize, stream: CUstream) -> u32;
    // CUDA 11.2+, absent from the bindings' CUDA 10 headers.
    fn cuMemAllocAsync(dptr: *mut CUdeviceptr, bytes: usize, stream: CUstream) -> u32;
    fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) -> u32;
    fn cuPointerGetAttribute(data: *mut c_void, attribute: c_int, ptr: CUdeviceptr) -> u32;

    fn cuStreamCreateWithPriority(stream: *mut CUstream, flags: c_uint, priority: c_int) -> u32;
    fn cuStreamDestroy_v2(stream: CUstream) -> u32;
    fn cuStreamSynchronize(stream: CUstream) -> u32;
    fn cuStreamQuery(stream: CUstream) -> u32;
    fn cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: c_uint) -> u32;
    fn cuStreamGetPriority(stream: CUstream, priority: *mut c_int) -> u32;
    fn cuStreamGetFlags(stream: CUstream, flags: *mut c_uint) -> u32;
    fn cuStreamGetCtx(stream: CUstream, ctx: *mut CUcontext) -> u32;

    fn cuEventCreate(event: *mut CUevent, flags: c_uint) -> u32;
    fn cuEventDestroy_v2(event: CUevent) -> u32;
    fn cuEventRecord(event: CUevent, stream: CUstream) -> u32;
    fn cuEventSynchronize(event: CUevent) -> u32;
    fn cuEventQuery(event: CUevent) -> u32;
    fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent) -> u32;

    fn cuModuleLoadDataEx(
        module: *mut CUmodule,
        image: *const c_void,
        num_options: c_uint,
        options: *mut c_int,
        values: *mut *mut c_void,
    ) -> u32;
    fn cuModuleUnload(module: CUmodule) -> u32;
    fn cuModuleGetFunction(f: *mut CUfunction, module: CUmodule, name: *const c_char) -> u32;
    fn cuModuleGetGlobal_v2(
        dptr: *mut CUdeviceptr,
        bytes: *mut usize,
        module: CUmodule,
        name: *const c_char,
    ) -> u32;
    fn cuFuncGetAttribute(value: *mut c_int, attrib: c_int, f: CUfunction) -> u32;
    fn cuFuncSetAttribute(f: CUfunction, attrib: c_int, value: c_int) -> u32;
    fn cuFuncSetCacheConfig(f: CUfunction, config: c_int) -> u32;
    fn cuOccupancyMaxPotentialBlockSize(
        min_grid_size: *mut c_int,
        block_size: *mut c_int,
        f: CUfunction,
        smem_for_block: Option<unsafe extern "C" fn(c_int) -> usize>,
        dynamic_smem: usize,
        block_size_limit: c_int,
    ) -> u32;
    fn cuLaunchKernel(
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
    ) -> u32;
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

/// Calls a driver entry point of this module and checks its result, naming the call.
macro_rules! cu {
    ($f:ident($($arg:expr),* $(,)?)) => {
        check(stringify!($f), $f($($arg),*))
    };
}

/// Runs `cuInit(0)` once per process; later calls return the first outcome.
pub(crate) fn init() -> Result<()> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    INIT.get_or_init(|| {
        // SAFETY: cuInit takes only a flags word (which must be 0) and may be called at any time.
        unsafe { cu!(cuInit(0)) }
    })
    .clone()
}

/// The driver's CUDA version, e.g. 12020 for 12.2. Needs no `cuInit`.
#[inline]
pub(crate) fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuDriverGetVersion(&mut v)) }?;
    Ok(v)
}

#[inline]
pub(crate) fn device_count() -> Result<i32> {
    init()?;
    let mut n = 0;
    // SAFETY: the out-pointer is a live local; the driver is initialised.
    unsafe { cu!(cuDeviceGetCount(&mut n)) }?;
    Ok(n)
}

#[inline]
pub(crate) fn device_get(ordinal: i32) -> Result<CUdevice> {
    init()?;
    let mut d = 0;
    // SAFETY: the out-pointer is a live local; any ordinal is accepted (bad ones are an error).
    unsafe { cu!(cuDeviceGet(&mut d, ordinal)) }?;
    Ok(d)
}

#[inline]
pub(crate) fn device_name(dev: CUdevice) -> Result<String> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: the buffer is live and its length is passed; the driver NUL-terminates.
    unsafe { cu!(cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, dev)) }?;
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
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuDeviceTotalMem_v2(&mut b, dev)) }?;
    Ok(b)
}

#[inline]
pub(crate) fn device_attribute(dev: CUdevice, attrib: c_int) -> Result<i32> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local; unknown attributes are reported as an error.
    unsafe { cu!(cuDeviceGetAttribute(&mut v, attrib, dev)) }?;
    Ok(v)
}

#[inline]
pub(crate) fn device_uuid(dev: CUdevice) -> Result<[u8; 16]> {
    let mut u = CUuuid { bytes: [0; 16] };
    // SAFETY: the out-pointer is a live local of the driver's struct type.
    unsafe { cu!(cuDeviceGetUuid(&mut u, dev)) }?;
    Ok(u.bytes.map(|b| b as u8))
}

#[inline]
pub(crate) fn device_can_access_peer(dev: CUdevice, peer: CUdevice) -> Result<bool> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuDeviceCanAccessPeer(&mut v, dev, peer)) }?;
    Ok(v != 0)
}

#[inline]
pub(crate) fn primary_ctx_retain(dev: CUdevice) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuDevicePrimaryCtxRetain(&mut c, dev)) }?;
    Ok(c)
}

/// # Safety
/// Balances one successful [`primary_ctx_retain`] of `dev`; nothing of the context may be
/// used afterwards unless another retain holds it.
#[inline]
pub(crate) unsafe fn primary_ctx_release(dev: CUdevice) -> Result<()> {
    // SAFETY: the caller balances a retain.
    unsafe { cu!(cuDevicePrimaryCtxRelease_v2(dev)) }
}

#[inline]
pub(crate) fn primary_ctx_set_flags(dev: CUdevice, flags: u32) -> Result<()> {
    // SAFETY: takes plain values; the driver validates them.
    unsafe { cu!(cuDevicePrimaryCtxSetFlags_v2(dev, flags)) }
}

#[inline]
pub(crate) fn primary_ctx_state(dev: CUdevice) -> Result<(u32, bool)> {
    let (mut flags, mut active) = (0, 0);
    // SAFETY: the out-pointers are live locals.
    unsafe { cu!(cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active)) }?;
    Ok((flags, active != 0))
}

/// Creates a context on `dev` and pushes it on the calling thread's stack.
#[inline]
pub(crate) fn ctx_create(flags: u32, dev: CUdevice) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local; flags and device are validated by the driver.
    unsafe { cu!(cuCtxCreate_v2(&mut c, flags, dev)) }?;
    Ok(c)
}

/// # Safety
/// `ctx` is a context this crate created and nothing will use it afterwards.
#[inline]
pub(crate) unsafe fn ctx_destroy(ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller owns `ctx` and gives it up.
    unsafe { cu!(cuCtxDestroy_v2(ctx)) }
}

/// # Safety
/// `ctx` is a live context, and the caller pops it again before the context goes away.
#[inline]
pub(crate) unsafe fn ctx_push(ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller guarantees `ctx` is alive.
    unsafe { cu!(cuCtxPushCurrent_v2(ctx)) }
}

/// Pops the calling thread's current context and returns it.
#[inline]
pub(crate) fn ctx_pop() -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local; popping an empty stack is an error, not UB.
    unsafe { cu!(cuCtxPopCurrent_v2(&mut c)) }?;
    Ok(c)
}

/// The calling thread's current context (null if none).
#[inline]
pub(crate) fn ctx_get_current() -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuCtxGetCurrent(&mut c)) }?;
    Ok(c)
}

// The functions below act on the calling thread's current context; callers make the
// right context current first (see `context::ensure_current`).

#[inline]
pub(crate) fn ctx_get_device() -> Result<CUdevice> {
    let mut d = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuCtxGetDevice(&mut d)) }?;
    Ok(d)
}

#[inline]
pub(crate) fn ctx_get_flags() -> Result<u32> {
    let mut f = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuCtxGetFlags(&mut f)) }?;
    Ok(f)
}

#[inline]
pub(crate) fn ctx_synchronize() -> Result<()> {
    // SAFETY: takes no arguments; acts on the current context.
    unsafe { cu!(cuCtxSynchronize()) }
}

/// # Safety
/// `ctx` is a live context.
#[inline]
pub(crate) unsafe fn ctx_api_version(ctx: CUcontext) -> Result<u32> {
    let mut v = 0;
    // SAFETY: the caller guarantees `ctx` is alive; the out-pointer is a live local.
    unsafe { cu!(cuCtxGetApiVersion(ctx, &mut v)) }?;
    Ok(v)
}

#[inline]
pub(crate) fn ctx_get_cache_config() -> Result<i32> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local (read as an integer, not as an enum).
    unsafe { cu!(cuCtxGetCacheConfig(&mut v)) }?;
    Ok(v)
}

#[inline]
pub(crate) fn ctx_set_cache_config(v: i32) -> Result<()> {
    // SAFETY: plain value, validated by the driver.
    unsafe { cu!(cuCtxSetCacheConfig(v)) }
}

#[inline]
pub(crate) fn ctx_get_shared_mem_config() -> Result<i32> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local (read as an integer, not as an enum).
    unsafe { cu!(cuCtxGetSharedMemConfig(&mut v)) }?;
    Ok(v)
}

#[inline]
pub(crate) fn ctx_set_shared_mem_config(v: i32) -> Result<()> {
    // SAFETY: plain value, validated by the driver.
    unsafe { cu!(cuCtxSetSharedMemConfig(v)) }
}

#[inline]
pub(crate) fn ctx_get_limit(limit: i32) -> Result<usize> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local; unknown limits are an error.
    unsafe { cu!(cuCtxGetLimit(&mut v, limit)) }?;
    Ok(v)
}

#[inline]
pub(crate) fn ctx_set_limit(limit: i32, value: usize) -> Result<()> {
    // SAFETY: plain values, validated by the driver.
    unsafe { cu!(cuCtxSetLimit(limit, value)) }
}

#[inline]
pub(crate) fn ctx_stream_priority_range() -> Result<(i32, i32)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: the out-pointers are live locals.
    unsafe { cu!(cuCtxGetStreamPriorityRange(&mut least, &mut greatest)) }?;
    Ok((least, greatest))
}

/// `CUDA_ERROR_NOT_READY`: what `cuStreamQuery` and `cuEventQuery` return for "busy".
const NOT_READY: u32 = 600;

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
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuMemAlloc_v2(&mut p, bytes)) }?;
    Ok(p)
}

/// # Safety
/// `p` came from [`mem_alloc`] and is not used afterwards.
#[inline]
pub(crate) unsafe fn mem_free(p: CUdeviceptr) -> Result<()> {
    // SAFETY: the caller gives up `p`.
    unsafe { cu!(cuMemFree_v2(p)) }
}

/// Allocates page-locked host memory in the current context.
#[inline]
pub(crate) fn mem_host_alloc(bytes: usize, flags: u32) -> Result<*mut c_void> {
    let mut p = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuMemHostAlloc(&mut p, bytes, flags)) }?;
    Ok(p)
}

/// # Safety
/// `p` came from [`mem_host_alloc`] and is not used afterwards.
#[inline]
pub(crate) unsafe fn mem_free_host(p: *mut c_void) -> Result<()> {
    // SAFETY: the caller gives up `p`.
    unsafe { cu!(cuMemFreeHost(p)) }
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
fn legacy_stream_synchronize() -> Result<()> {
    // SAFETY: the null stream is the current context's legacy default stream.
    unsafe { cu!(cuStreamSynchronize(std::ptr::null_mut())) }
}

/// Copies host to device; complete when it returns.
///
/// # Safety
/// `dst` is valid for `bytes` of device writes, `src` for `bytes` of host reads.
#[inline]
pub(crate) unsafe fn memcpy_htod(dst: CUdeviceptr, src: *const c_void, bytes: usize) -> Result<()> {
    // SAFETY: the caller guarantees both ranges.
    unsafe { cu!(cuMemcpyHtoD_v2(dst, src, bytes)) }?;
    legacy_stream_synchronize()
}

/// # Safety
/// `dst` is valid for `bytes` of host writes, `src` for `bytes` of device reads.
#[inline]
pub(crate) unsafe fn memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> Result<()> {
    // SAFETY: the caller guarantees both ranges.
    unsafe { cu!(cuMemcpyDtoH_v2(dst, src, bytes)) }
}

/// Copies device to device; complete when it returns.
///
/// # Safety
/// Both device ranges are valid for `bytes`.
#[inline]
pub(crate) unsafe fn memcpy_dtod(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> Result<()> {
    // SAFETY: the caller guarantees both ranges.
    unsafe { cu!(cuMemcpyDtoD_v2(dst, src, bytes)) }?;
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
    // SAFETY: the caller guarantees the range.
    unsafe {
        match pattern {
            Pattern::D8(v) => cu!(cuMemsetD8_v2(dst, v, n)),
            Pattern::D16(v) => cu!(cuMemsetD16_v2(dst, v, n)),
            Pattern::D32(v) => cu!(cuMemsetD32_v2(dst, v, n)),
        }
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
    // SAFETY: the caller guarantees the range, the stream and the lifetime.
    unsafe {
        match pattern {
            Pattern::D8(v) => cu!(cuMemsetD8Async(dst, v, n, stream)),
            Pattern::D16(v) => cu!(cuMemsetD16Async(dst, v, n, stream)),
            Pattern::D32(v) => cu!(cuMemsetD32Async(dst, v, n, stream)),
        }
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
    // SAFETY: the caller guarantees the ranges, the stream and the lifetime.
    unsafe { cu!(cuMemcpyHtoDAsync_v2(dst, src, bytes, stream)) }
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
    // SAFETY: the caller guarantees the ranges, the stream and the lifetime.
    unsafe { cu!(cuMemcpyDtoHAsync_v2(dst, src, bytes, stream)) }
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
    // SAFETY: the caller guarantees the ranges, the stream and the lifetime.
    unsafe { cu!(cuMemcpyDtoDAsync_v2(dst, src, bytes, stream)) }
}

/// Stream-ordered allocation; `Ok(None)` where the device has no memory pools.
///
/// # Safety
/// `stream` is live.
#[inline]
pub(crate) unsafe fn mem_alloc_async(
    bytes: usize,
    stream: CUstream,
) -> Result<Option<CUdeviceptr>> {
    let mut p = 0;
    // SAFETY: the out-pointer is a live local; the caller guarantees the stream.
    match unsafe { cuMemAllocAsync(&mut p, bytes, stream) } {
        0 => Ok(Some(p)),
        801 => Ok(None), // CUDA_ERROR_NOT_SUPPORTED: no memory pools on this device
        raw => Err(failure("cuMemAllocAsync", raw)),
    }
}

/// # Safety
/// `p` came from [`mem_alloc_async`]; `stream` is live; nothing queued after the free on
/// any stream uses `p`.
#[inline]
pub(crate) unsafe fn mem_free_async(p: CUdeviceptr, stream: CUstream) -> Result<()> {
    // SAFETY: the caller guarantees all of the above.
    unsafe { cu!(cuMemFreeAsync(p, stream)) }
}

/// The context that owns the memory at `p` (`CU_POINTER_ATTRIBUTE_CONTEXT`).
///
/// # Safety
/// `p` is an address the driver allocated.
#[inline]
pub(crate) unsafe fn pointer_context(p: CUdeviceptr) -> Result<CUcontext> {
    let mut c: CUcontext = std::ptr::null_mut();
    const CU_POINTER_ATTRIBUTE_CONTEXT: c_int = 1;
    // SAFETY: the out-pointer is a live local of the attribute's type.
    unsafe {
        cu!(cuPointerGetAttribute(
            (&mut c as *mut CUcontext).cast(),
            CU_POINTER_ATTRIBUTE_CONTEXT,
            p
        ))
    }?;
    Ok(c)
}

// Streams and events. Handles passed in are live: the callers hold their brand.

/// Creates a stream in the current context.
#[inline]
pub(crate) fn stream_create(flags: u32, priority: i32) -> Result<CUstream> {
    let mut s = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuStreamCreateWithPriority(&mut s, flags, priority)) }?;
    Ok(s)
}

/// # Safety
/// `s` is a stream this crate created and nothing uses it afterwards.
#[inline]
pub(crate) unsafe fn stream_destroy(s: CUstream) -> Result<()> {
    // SAFETY: the caller gives up `s`.
    unsafe { cu!(cuStreamDestroy_v2(s)) }
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_synchronize(s: CUstream) -> Result<()> {
    // SAFETY: the caller guarantees the stream.
    unsafe { cu!(cuStreamSynchronize(s)) }
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_query(s: CUstream) -> Result<bool> {
    // SAFETY: the caller guarantees the stream.
    ready("cuStreamQuery", unsafe { cuStreamQuery(s) })
}

/// # Safety
/// `s` and `e` are live.
#[inline]
pub(crate) unsafe fn stream_wait_event(s: CUstream, e: CUevent) -> Result<()> {
    // SAFETY: the caller guarantees both handles.
    unsafe { cu!(cuStreamWaitEvent(s, e, 0)) }
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_priority(s: CUstream) -> Result<i32> {
    let mut p = 0;
    // SAFETY: the caller guarantees the stream; the out-pointer is a live local.
    unsafe { cu!(cuStreamGetPriority(s, &mut p)) }?;
    Ok(p)
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_flags(s: CUstream) -> Result<u32> {
    let mut f = 0;
    // SAFETY: the caller guarantees the stream; the out-pointer is a live local.
    unsafe { cu!(cuStreamGetFlags(s, &mut f)) }?;
    Ok(f)
}

/// Creates an event in the current context.
#[inline]
pub(crate) fn event_create(flags: u32) -> Result<CUevent> {
    let mut e = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuEventCreate(&mut e, flags)) }?;
    Ok(e)
}

/// # Safety
/// `e` is an event this crate created and nothing uses it afterwards.
#[inline]
pub(crate) unsafe fn event_destroy(e: CUevent) -> Result<()> {
    // SAFETY: the caller gives up `e`.
    unsafe { cu!(cuEventDestroy_v2(e)) }
}

/// # Safety
/// `e` and `s` are live and of the same context.
#[inline]
pub(crate) unsafe fn event_record(e: CUevent, s: CUstream) -> Result<()> {
    // SAFETY: the caller guarantees both handles.
    unsafe { cu!(cuEventRecord(e, s)) }
}

/// # Safety
/// `e` is live.
#[inline]
pub(crate) unsafe fn event_synchronize(e: CUevent) -> Result<()> {
    // SAFETY: the caller guarantees the event.
    unsafe { cu!(cuEventSynchronize(e)) }
}

/// # Safety
/// `e` is live.
#[inline]
pub(crate) unsafe fn event_query(e: CUevent) -> Result<bool> {
    // SAFETY: the caller guarantees the event.
    ready("cuEventQuery", unsafe { cuEventQuery(e) })
}

/// # Safety
/// `start` and `end` are live.
#[inline]
pub(crate) unsafe fn event_elapsed_ms(start: CUevent, end: CUevent) -> Result<f32> {
    let mut ms = 0.0;
    // SAFETY: the caller guarantees both events; the out-pointer is a live local.
    unsafe { cu!(cuEventElapsedTime(&mut ms, start, end)) }?;
    Ok(ms)
}

/// # Safety
/// `s` is live.
#[inline]
pub(crate) unsafe fn stream_get_ctx(s: CUstream) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    // SAFETY: the caller guarantees the stream; the out-pointer is a live local.
    unsafe { cu!(cuStreamGetCtx(s, &mut c)) }?;
    Ok(c)
}

// Modules and functions. Handles passed in are live: the callers hold their brand.

/// Loads a module image (PTX text, NUL-terminated, or a cubin/fatbin) into the current
/// context, returning the JIT error log (and info log) with a failure.
///
/// # Safety
/// `image` points to a complete image: NUL-terminated text for PTX.
#[inline]
pub(crate) unsafe fn module_load(
    image: *const c_void,
) -> std::result::Result<CUmodule, (Error, String)> {
    const LOG: usize = 16 << 10;
    let mut error_log = vec![0u8; LOG];
    let mut info_log = vec![0u8; LOG];
    // CU_JIT_INFO_LOG_BUFFER, its size, CU_JIT_ERROR_LOG_BUFFER, its size.
    let mut options: [c_int; 4] = [3, 4, 5, 6];
    let mut values: [*mut c_void; 4] = [
        info_log.as_mut_ptr().cast(),
        LOG as *mut c_void,
        error_log.as_mut_ptr().cast(),
        LOG as *mut c_void,
    ];
    let mut module = std::ptr::null_mut();
    // SAFETY: the option arrays have 4 entries whose values are of the documented types;
    // the log buffers outlive the call; the caller guarantees the image.
    let raw = unsafe {
        cuModuleLoadDataEx(
            &mut module,
            image,
            4,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    };
    match check("cuModuleLoadDataEx", raw) {
        Ok(()) => Ok(module),
        Err(e) => {
            let text = |buf: &[u8]| {
                String::from_utf8_lossy(
                    &buf[..buf.iter().position(|&b| b == 0).unwrap_or(buf.len())],
                )
                .trim()
                .to_owned()
            };
            let (error_log, info_log) = (text(&error_log), text(&info_log));
            let log = match (error_log.is_empty(), info_log.is_empty()) {
                (false, true) => error_log,
                (false, false) => format!("{error_log}\n{info_log}"),
                (true, _) => info_log,
            };
            Err((e, log))
        }
    }
}

/// # Safety
/// `m` is a module this crate loaded, nothing uses it afterwards, and its context is current.
#[inline]
pub(crate) unsafe fn module_unload(m: CUmodule) -> Result<()> {
    // SAFETY: the caller gives up `m`.
    unsafe { cu!(cuModuleUnload(m)) }
}

/// # Safety
/// `m` is live.
#[inline]
pub(crate) unsafe fn module_get_function(m: CUmodule, name: &std::ffi::CStr) -> Result<CUfunction> {
    let mut f = std::ptr::null_mut();
    // SAFETY: the caller guarantees the module; the name is NUL-terminated.
    unsafe { cu!(cuModuleGetFunction(&mut f, m, name.as_ptr())) }?;
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
    // SAFETY: the caller guarantees the module; the name is NUL-terminated.
    unsafe { cu!(cuModuleGetGlobal_v2(&mut p, &mut bytes, m, name.as_ptr())) }?;
    Ok((p, bytes))
}

/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_get_attribute(f: CUfunction, attrib: i32) -> Result<i32> {
    let mut v = 0;
    // SAFETY: the caller guarantees the function; the out-pointer is a live local.
    unsafe { cu!(cuFuncGetAttribute(&mut v, attrib, f)) }?;
    Ok(v)
}

/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_set_attribute(f: CUfunction, attrib: i32, value: i32) -> Result<()> {
    // SAFETY: the caller guarantees the function.
    unsafe { cu!(cuFuncSetAttribute(f, attrib, value)) }
}

/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_set_cache_config(f: CUfunction, config: i32) -> Result<()> {
    // SAFETY: the caller guarantees the function.
    unsafe { cu!(cuFuncSetCacheConfig(f, config)) }
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
    // SAFETY: the caller guarantees the function; no callback; out-pointers are locals.
    unsafe {
        cu!(cuOccupancyMaxPotentialBlockSize(
            &mut grid,
            &mut block,
            f,
            None,
            dynamic_smem,
            0
        ))
    }?;
    Ok((grid, block))
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
    // SAFETY: the caller guarantees all of the above.
    unsafe {
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
}

/// Lets the current context access `peer`'s memory; `Ok` also when it already could.
///
/// # Safety
/// `peer` is a live context.
#[inline]
pub(crate) unsafe fn ctx_enable_peer_access(peer: CUcontext) -> Result<()> {
    const PEER_ACCESS_ALREADY_ENABLED: u32 = 704;
    // SAFETY: the caller guarantees the context; flags must be 0.
    match unsafe { cuCtxEnablePeerAccess(peer, 0) } {
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
    // SAFETY: the caller guarantees the contexts and the ranges.
    unsafe { cu!(cuMemcpyPeer(dst, dst_ctx, src, src_ctx, bytes)) }?;
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
    // SAFETY: the caller guarantees all of the above.
    unsafe { cu!(cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, bytes, stream)) }
}
