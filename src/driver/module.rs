//! Wrappers: modules and libraries (loading with JIT options, kernels, globals) and the
//! attributes of functions. Handles passed in are live: the callers hold their brand.

use std::ffi::c_void;

use super::jit_args::{DEFAULT_LOG_BYTES, JitArgs};
use super::{CUdeviceptr, CUfunction, CUkernel, CUlibrary, CUmodule, init};
use crate::error::{Error, Result};

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
    let mut jit = JitArgs::with_logs(DEFAULT_LOG_BYTES);
    // SAFETY: the caller guarantees the image.
    unsafe { module_load_ex(image, &mut jit) }.map_err(|e| (e, jit.failure_log()))
}

/// Loads a module image into the current context with the JIT options of `jit`, whose log
/// buffers the driver fills (read them with `jit.info_log()`, `jit.wall_time_ms()` or
/// `jit.failure_log()`).
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
