//! Shared by the GPU tests: their harness, the device, the skips, and the driver calls tests
//! make directly. `tests/gpu.rs` declares it `#[macro_use]`, so that its modules (the test
//! files) have the harness's `gpu_tests!`.
#![allow(dead_code)]

pub mod child;
#[macro_use]
pub mod harness;
pub mod ordering;

pub use harness::skip;

use std::ffi::{c_int, c_uint, c_void};
use std::sync::OnceLock;

// The crate's handle types, which `as_raw` returns; the raw driver table below is declared
// with them (they are layout-compatible with `cuda.h`'s).
use cuda_brand::phase::Phase;
use cuda_brand::sys::{CUcontext, CUdevice, CUdeviceptr, CUstream};
use cuda_brand::sys::{CUgraphExec, CUmemoryPool};
use cuda_brand::{ContextFlags, ContextGuard, Device, Error, ErrorCode, Part, with_context};

/// Device 0. Where there is none the test is skipped (reported `ignored`, with the
/// driver's error); with `CUDA_BRAND_REQUIRE_GPU=1` a missing device is a failure instead.
pub fn gpu() -> Device {
    match Device::get(0) {
        Ok(device) => device,
        Err(e) => {
            let required = std::env::var("CUDA_BRAND_REQUIRE_GPU").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "CUDA_BRAND_REQUIRE_GPU=1 but no usable device: {e}"
            );
            assert!(
                matches!(
                    e.code(),
                    ErrorCode::NoDevice
                        | ErrorCode::InvalidDevice
                        | ErrorCode::StubLibrary
                        | ErrorCode::DriverNotFound
                ),
                "unexpected error looking for a GPU: {e}"
            );
            skip(format!("no CUDA device ({e})"))
        }
    }
}

/// The driver entry points that tests call directly, loaded from the library the crate
/// loads, and declared with the raw `u32` result (not the bindings' `CUresult` enum, which
/// is undefined behaviour for a code newer than CUDA 10). Only GPU tests call them.
#[allow(non_snake_case)]
pub struct Driver {
    pub cuCtxGetCurrent: unsafe extern "C" fn(*mut CUcontext) -> u32,
    pub cuMemGetInfo_v2: unsafe extern "C" fn(*mut usize, *mut usize) -> u32,
    pub cuPointerGetAttribute: unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> u32,
    pub cuDevicePrimaryCtxRetain: unsafe extern "C" fn(*mut CUcontext, CUdevice) -> u32,
    pub cuDevicePrimaryCtxRelease_v2: unsafe extern "C" fn(CUdevice) -> u32,
    pub cuCtxPushCurrent_v2: unsafe extern "C" fn(CUcontext) -> u32,
    pub cuCtxPopCurrent_v2: unsafe extern "C" fn(*mut CUcontext) -> u32,
    pub cuCtxDestroy_v2: unsafe extern "C" fn(CUcontext) -> u32,
    pub cuCtxSynchronize: unsafe extern "C" fn() -> u32,
    pub cuPointerGetAttributes:
        unsafe extern "C" fn(c_uint, *mut c_int, *mut *mut c_void, CUdeviceptr) -> u32,
    pub cuMemAlloc_v2: unsafe extern "C" fn(*mut CUdeviceptr, usize) -> u32,
    pub cuMemFree_v2: unsafe extern "C" fn(CUdeviceptr) -> u32,
    pub cuMemAllocAsync: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> u32,
    pub cuMemAllocFromPoolAsync:
        unsafe extern "C" fn(*mut CUdeviceptr, usize, CUmemoryPool, CUstream) -> u32,
    pub cuMemFreeAsync: unsafe extern "C" fn(CUdeviceptr, CUstream) -> u32,
    pub cuMemAllocManaged: unsafe extern "C" fn(*mut CUdeviceptr, usize, c_uint) -> u32,
    pub cuMemHostAlloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> u32,
    pub cuMemFreeHost: unsafe extern "C" fn(*mut c_void) -> u32,
    pub cuMemHostRegister_v2: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> u32,
    pub cuMemHostUnregister: unsafe extern "C" fn(*mut c_void) -> u32,
    pub cuMemcpyDtoH_v2: unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize) -> u32,
    pub cuMemsetD32_v2: unsafe extern "C" fn(CUdeviceptr, c_uint, usize) -> u32,
    pub cuDeviceGetDefaultMemPool: unsafe extern "C" fn(*mut CUmemoryPool, CUdevice) -> u32,
    pub cuStreamCreate: unsafe extern "C" fn(*mut CUstream, c_uint) -> u32,
    pub cuStreamDestroy_v2: unsafe extern "C" fn(CUstream) -> u32,
    pub cuStreamSynchronize: unsafe extern "C" fn(CUstream) -> u32,
    pub cuLaunchHostFunc:
        unsafe extern "C" fn(CUstream, unsafe extern "C" fn(*mut c_void), *mut c_void) -> u32,
    pub cuMemsetD32Async: unsafe extern "C" fn(CUdeviceptr, c_uint, usize, CUstream) -> u32,
    pub cuGraphLaunch: unsafe extern "C" fn(CUgraphExec, CUstream) -> u32,
}

/// The driver library as the crate finds it: the file `CUDA_BRAND_DRIVER_LIBRARY` names,
/// else `libcuda.so.1`, then `libcuda.so` (`nvcuda.dll` on Windows); `Err` with the
/// loader's messages when none loads.
pub fn load_driver_library() -> Result<libloading::Library, String> {
    let names: Vec<std::ffi::OsString> = match std::env::var_os("CUDA_BRAND_DRIVER_LIBRARY") {
        Some(file) if !file.is_empty() => vec![file],
        _ if cfg!(windows) => vec!["nvcuda.dll".into()],
        _ => vec!["libcuda.so.1".into(), "libcuda.so".into()],
    };
    let mut failures = Vec::new();
    for name in names {
        // SAFETY: loading the driver library runs its initialisers, which have no
        // preconditions.
        match unsafe { libloading::Library::new(&name) } {
            Ok(library) => return Ok(library),
            Err(e) => failures.push(e.to_string()),
        }
    }
    Err(failures.join("; "))
}

/// The entry points of [`Driver`], loaded once; panics if the library or one of them is
/// missing (a GPU test only gets here after finding a device).
pub fn driver() -> &'static Driver {
    static DRIVER: OnceLock<Driver> = OnceLock::new();
    DRIVER.get_or_init(|| {
        let library = load_driver_library().expect("the CUDA driver library");
        let library: &'static libloading::Library = Box::leak(Box::new(library));
        macro_rules! entry {
            ($name:literal) => {
                // SAFETY: the field the symbol goes to has the signature cuda.h gives it
                // (with the raw `u32` result); the library is never unloaded.
                *unsafe { library.get(concat!($name, "\0").as_bytes()) }
                    .expect(concat!("the driver exports ", $name))
            };
        }
        Driver {
            cuCtxGetCurrent: entry!("cuCtxGetCurrent"),
            cuMemGetInfo_v2: entry!("cuMemGetInfo_v2"),
            cuPointerGetAttribute: entry!("cuPointerGetAttribute"),
            cuDevicePrimaryCtxRetain: entry!("cuDevicePrimaryCtxRetain"),
            cuDevicePrimaryCtxRelease_v2: entry!("cuDevicePrimaryCtxRelease_v2"),
            cuCtxPushCurrent_v2: entry!("cuCtxPushCurrent_v2"),
            cuCtxPopCurrent_v2: entry!("cuCtxPopCurrent_v2"),
            cuCtxDestroy_v2: entry!("cuCtxDestroy_v2"),
            cuCtxSynchronize: entry!("cuCtxSynchronize"),
            cuPointerGetAttributes: entry!("cuPointerGetAttributes"),
            cuMemAlloc_v2: entry!("cuMemAlloc_v2"),
            cuMemFree_v2: entry!("cuMemFree_v2"),
            cuMemAllocAsync: entry!("cuMemAllocAsync"),
            cuMemAllocFromPoolAsync: entry!("cuMemAllocFromPoolAsync"),
            cuMemFreeAsync: entry!("cuMemFreeAsync"),
            cuMemAllocManaged: entry!("cuMemAllocManaged"),
            cuMemHostAlloc: entry!("cuMemHostAlloc"),
            cuMemFreeHost: entry!("cuMemFreeHost"),
            cuMemHostRegister_v2: entry!("cuMemHostRegister_v2"),
            cuMemHostUnregister: entry!("cuMemHostUnregister"),
            cuMemcpyDtoH_v2: entry!("cuMemcpyDtoH_v2"),
            cuMemsetD32_v2: entry!("cuMemsetD32_v2"),
            cuDeviceGetDefaultMemPool: entry!("cuDeviceGetDefaultMemPool"),
            cuStreamCreate: entry!("cuStreamCreate"),
            cuStreamDestroy_v2: entry!("cuStreamDestroy_v2"),
            cuStreamSynchronize: entry!("cuStreamSynchronize"),
            cuLaunchHostFunc: entry!("cuLaunchHostFunc"),
            cuMemsetD32Async: entry!("cuMemsetD32Async"),
            cuGraphLaunch: entry!("cuGraphLaunch"),
        }
    })
}

/// The raw handle of `ctx` (`ContextGuard::as_raw`), to compare with the contexts the
/// driver reports (`current`) and with other guards' handles.
pub fn handle<P: Phase, S: Part>(ctx: ContextGuard<'_, P, S>) -> CUcontext {
    // SAFETY: the tests compare the handle, and pass it to `with_raw_context` while the
    // context is alive; none destroys, resets or pops the context through it while the
    // crate holds the context.
    unsafe { ctx.as_raw() }
}

/// The calling thread's current context, straight from the driver.
pub fn current() -> CUcontext {
    let mut raw = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local.
    let rc = unsafe { (driver().cuCtxGetCurrent)(&mut raw) };
    assert_eq!(rc, 0, "cuCtxGetCurrent");
    raw
}

/// Free device memory of the current context's device, straight from the driver.
pub fn free_memory() -> usize {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: the out-pointers are live locals; a context is current.
    let rc = unsafe { (driver().cuMemGetInfo_v2)(&mut free, &mut total) };
    assert_eq!(rc, 0, "cuMemGetInfo_v2");
    free
}

/// Skips the test (reported `ignored`: "under compute-sanitizer: {what} provokes a driver
/// error on purpose") when it runs under compute-sanitizer with its default options, which
/// count every failed API call as an error; returns otherwise. The tests that call it run,
/// and assert the error, in the plain GPU run, and under compute-sanitizer with
/// `--report-api-errors no`, which `scripts/sanitize` says with
/// `CUDA_BRAND_SANITIZER_API_ERRORS=no` (it runs the tests that fault on purpose, the
/// `fault` lines of `tests/DRIVER_ERRORS`, never under compute-sanitizer).
pub fn skip_under_sanitizer(what: &str) {
    let under = std::env::var_os("NV_SANITIZER_INJECTION_PORT_BASE").is_some()
        && std::env::var_os("CUDA_BRAND_SANITIZER_API_ERRORS").is_none_or(|v| v != "no");
    if under {
        skip(format!(
            "under compute-sanitizer: {what} provokes a driver error on purpose"
        ));
    }
}

/// True when the test runs under compute-sanitizer (any options). Its tools run one kernel
/// at a time (a kernel queued beside a running one waits for it), so a test that measures
/// kernels running side by side cannot assert it there.
pub fn under_sanitizer() -> bool {
    std::env::var_os("NV_SANITIZER_INJECTION_PORT_BASE").is_some()
}

/// The reason a test that measures two kernels side by side is skipped under
/// compute-sanitizer (see [`under_sanitizer`]).
pub const SERIAL_UNDER_SANITIZER: &str =
    "compute-sanitizer runs one kernel at a time: a kernel beside a running one waits for it";

/// Runs `f` in a fresh context of device 0, or skips (see [`gpu`]); a failure panics.
pub fn in_context(f: impl for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<(), Error>) {
    with_context(&gpu(), ContextFlags::default(), f).unwrap();
}

/// The memory pool an allocation came from (`CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`, 17;
/// newer than the bindings' enum), or 0 for memory from `cuMemAlloc`.
pub fn mempool_of(ptr: u64) -> usize {
    let mut pool: usize = 0;
    // SAFETY: the out-pointer is a live local of the attribute's size (a handle).
    let rc = unsafe { (driver().cuPointerGetAttribute)((&mut pool as *mut usize).cast(), 17, ptr) };
    assert_eq!(rc, 0, "cuPointerGetAttribute(MEMPOOL_HANDLE)");
    pool
}
