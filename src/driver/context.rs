//! Wrappers: initialisation, the driver's version, devices, primary and created contexts,
//! the calling thread's context stack, and peer access between contexts.

use std::ffi::{c_char, c_int};
use std::marker::PhantomData;
use std::sync::OnceLock;

use super::host_fn_flag::{driver_call_refused, in_host_fn};
use super::table::{Api, api};
use super::{CUcontext, CUdevice, CUuuid, check, raw_code};
use crate::error::{ErrorCode, Result};

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

/// A context the calling thread pushed to enter it ([`ctx_push_entering`]), and the loaded
/// table the push went through: its [`pop`](Pushed::pop) is the pop of [`ctx_pop`] without
/// the checks the push already made. `!Send`: popped on the thread that pushed it.
#[derive(Clone, Copy)]
pub(crate) struct Pushed {
    api: &'static Api,
    on_this_thread: PhantomData<*const ()>,
}

/// [`ctx_push`] for a context entered for a closure, returning the [`Pushed`] whose pop
/// skips the checks this push makes.
///
/// # Safety
/// As [`ctx_push`].
#[inline]
pub(crate) unsafe fn ctx_push_entering(ctx: CUcontext) -> Result<Pushed> {
    if in_host_fn() {
        return Err(driver_call_refused("cuCtxPushCurrent_v2"));
    }
    // SAFETY: the caller's promise, and the host-function flag is clear (just checked).
    unsafe { ctx_push_unrefused(ctx) }
}

/// [`ctx_push_entering`] without its host-function check, for a caller that made it itself
/// (with [`refuses_nothing`](super::refuses_nothing), which checks the partition rule's
/// count in the same load).
///
/// # Safety
/// As [`ctx_push`]; and the calling thread runs no host function of the crate
/// ([`in_host_fn`] is false).
#[inline(always)]
pub(crate) unsafe fn ctx_push_unrefused(ctx: CUcontext) -> Result<Pushed> {
    let api = api()?;
    // SAFETY: the table's "Safety of the calls": `ctx` is live (the caller's promise).
    check("cuCtxPushCurrent_v2", unsafe {
        api.cuCtxPushCurrent_v2(ctx)
    }?)?;
    Ok(Pushed {
        api,
        on_this_thread: PhantomData,
    })
}

impl Pushed {
    /// Pops the calling thread's current context and returns it ([`ctx_pop`]) through the
    /// table of the push, without a check of the host-function flag: the push found it clear
    /// on this thread (`Pushed` is made by no other path and is `!Send`), and the flag is set
    /// only for the length of a host function's call ([`HostFnFlag`](super::HostFnFlag), a
    /// guard that puts it back), so it is clear again whenever the code that pushed runs on
    /// to pop, normally or while unwinding. The table is loaded: the push used it.
    #[inline(always)]
    pub(crate) fn pop(self) -> Result<CUcontext> {
        let mut c = std::ptr::null_mut();
        // SAFETY: the table's "Safety of the calls": an out-pointer to a live local.
        check("cuCtxPopCurrent_v2", unsafe {
            self.api.cuCtxPopCurrent_v2(&mut c)
        }?)?;
        Ok(c)
    }
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
#[cfg(feature = "nccl")]
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

/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`.
const PEER_ACCESS_ALREADY_ENABLED: u32 = raw_code(ErrorCode::PeerAccessAlreadyEnabled);

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
