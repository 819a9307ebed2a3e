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

use std::ffi::{c_char, c_int, c_uint};
use std::sync::OnceLock;

pub(crate) use cuda_driver_sys::{CUcontext, CUdevice, CUuuid};

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
pub(crate) fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuDriverGetVersion(&mut v)) }?;
    Ok(v)
}

pub(crate) fn device_count() -> Result<i32> {
    init()?;
    let mut n = 0;
    // SAFETY: the out-pointer is a live local; the driver is initialised.
    unsafe { cu!(cuDeviceGetCount(&mut n)) }?;
    Ok(n)
}

pub(crate) fn device_get(ordinal: i32) -> Result<CUdevice> {
    init()?;
    let mut d = 0;
    // SAFETY: the out-pointer is a live local; any ordinal is accepted (bad ones are an error).
    unsafe { cu!(cuDeviceGet(&mut d, ordinal)) }?;
    Ok(d)
}

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

pub(crate) fn device_total_mem(dev: CUdevice) -> Result<usize> {
    let mut b = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuDeviceTotalMem_v2(&mut b, dev)) }?;
    Ok(b)
}

pub(crate) fn device_attribute(dev: CUdevice, attrib: c_int) -> Result<i32> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local; unknown attributes are reported as an error.
    unsafe { cu!(cuDeviceGetAttribute(&mut v, attrib, dev)) }?;
    Ok(v)
}

pub(crate) fn device_uuid(dev: CUdevice) -> Result<[u8; 16]> {
    let mut u = CUuuid { bytes: [0; 16] };
    // SAFETY: the out-pointer is a live local of the driver's struct type.
    unsafe { cu!(cuDeviceGetUuid(&mut u, dev)) }?;
    Ok(u.bytes.map(|b| b as u8))
}

pub(crate) fn device_can_access_peer(dev: CUdevice, peer: CUdevice) -> Result<bool> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuDeviceCanAccessPeer(&mut v, dev, peer)) }?;
    Ok(v != 0)
}

pub(crate) fn primary_ctx_retain(dev: CUdevice) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuDevicePrimaryCtxRetain(&mut c, dev)) }?;
    Ok(c)
}

/// # Safety
/// Balances one successful [`primary_ctx_retain`] of `dev`; nothing of the context may be
/// used afterwards unless another retain holds it.
pub(crate) unsafe fn primary_ctx_release(dev: CUdevice) -> Result<()> {
    // SAFETY: the caller balances a retain.
    unsafe { cu!(cuDevicePrimaryCtxRelease_v2(dev)) }
}

pub(crate) fn primary_ctx_set_flags(dev: CUdevice, flags: u32) -> Result<()> {
    // SAFETY: takes plain values; the driver validates them.
    unsafe { cu!(cuDevicePrimaryCtxSetFlags_v2(dev, flags)) }
}

pub(crate) fn primary_ctx_state(dev: CUdevice) -> Result<(u32, bool)> {
    let (mut flags, mut active) = (0, 0);
    // SAFETY: the out-pointers are live locals.
    unsafe { cu!(cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active)) }?;
    Ok((flags, active != 0))
}

/// Creates a context on `dev` and pushes it on the calling thread's stack.
pub(crate) fn ctx_create(flags: u32, dev: CUdevice) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local; flags and device are validated by the driver.
    unsafe { cu!(cuCtxCreate_v2(&mut c, flags, dev)) }?;
    Ok(c)
}

/// # Safety
/// `ctx` is a context this crate created and nothing will use it afterwards.
pub(crate) unsafe fn ctx_destroy(ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller owns `ctx` and gives it up.
    unsafe { cu!(cuCtxDestroy_v2(ctx)) }
}

/// # Safety
/// `ctx` is a live context, and the caller pops it again before the context goes away.
pub(crate) unsafe fn ctx_push(ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller guarantees `ctx` is alive.
    unsafe { cu!(cuCtxPushCurrent_v2(ctx)) }
}

/// Pops the calling thread's current context and returns it.
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

pub(crate) fn ctx_get_device() -> Result<CUdevice> {
    let mut d = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuCtxGetDevice(&mut d)) }?;
    Ok(d)
}

pub(crate) fn ctx_get_flags() -> Result<u32> {
    let mut f = 0;
    // SAFETY: the out-pointer is a live local.
    unsafe { cu!(cuCtxGetFlags(&mut f)) }?;
    Ok(f)
}

pub(crate) fn ctx_synchronize() -> Result<()> {
    // SAFETY: takes no arguments; acts on the current context.
    unsafe { cu!(cuCtxSynchronize()) }
}

/// # Safety
/// `ctx` is a live context.
pub(crate) unsafe fn ctx_api_version(ctx: CUcontext) -> Result<u32> {
    let mut v = 0;
    // SAFETY: the caller guarantees `ctx` is alive; the out-pointer is a live local.
    unsafe { cu!(cuCtxGetApiVersion(ctx, &mut v)) }?;
    Ok(v)
}

pub(crate) fn ctx_get_cache_config() -> Result<i32> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local (read as an integer, not as an enum).
    unsafe { cu!(cuCtxGetCacheConfig(&mut v)) }?;
    Ok(v)
}

pub(crate) fn ctx_set_cache_config(v: i32) -> Result<()> {
    // SAFETY: plain value, validated by the driver.
    unsafe { cu!(cuCtxSetCacheConfig(v)) }
}

pub(crate) fn ctx_get_shared_mem_config() -> Result<i32> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local (read as an integer, not as an enum).
    unsafe { cu!(cuCtxGetSharedMemConfig(&mut v)) }?;
    Ok(v)
}

pub(crate) fn ctx_set_shared_mem_config(v: i32) -> Result<()> {
    // SAFETY: plain value, validated by the driver.
    unsafe { cu!(cuCtxSetSharedMemConfig(v)) }
}

pub(crate) fn ctx_get_limit(limit: i32) -> Result<usize> {
    let mut v = 0;
    // SAFETY: the out-pointer is a live local; unknown limits are an error.
    unsafe { cu!(cuCtxGetLimit(&mut v, limit)) }?;
    Ok(v)
}

pub(crate) fn ctx_set_limit(limit: i32, value: usize) -> Result<()> {
    // SAFETY: plain values, validated by the driver.
    unsafe { cu!(cuCtxSetLimit(limit, value)) }
}

pub(crate) fn ctx_stream_priority_range() -> Result<(i32, i32)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: the out-pointers are live locals.
    unsafe { cu!(cuCtxGetStreamPriorityRange(&mut least, &mut greatest)) }?;
    Ok((least, greatest))
}
