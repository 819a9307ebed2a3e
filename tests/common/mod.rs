//! Shared by the GPU tests: find a device or skip.
#![allow(dead_code)]

use cuda_brand::{ContextFlags, ContextGuard, Device, Error, ErrorCode, with_context};

/// Device 0, or `None` after printing why the test is skipped. With
/// `CUDA_BRAND_REQUIRE_GPU=1` a missing device is a failure instead.
pub fn gpu() -> Option<Device> {
    match Device::get(0) {
        Ok(device) => Some(device),
        Err(e) => {
            let required = std::env::var("CUDA_BRAND_REQUIRE_GPU").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "CUDA_BRAND_REQUIRE_GPU=1 but no usable device: {e}"
            );
            assert!(
                matches!(
                    e.code(),
                    ErrorCode::NoDevice | ErrorCode::InvalidDevice | ErrorCode::StubLibrary
                ),
                "unexpected error looking for a GPU: {e}"
            );
            eprintln!("skipped: no CUDA device ({e})");
            None
        }
    }
}

/// Returns from the test (skipping it) when there is no GPU.
#[macro_export]
macro_rules! gpu_or_skip {
    () => {
        match common::gpu() {
            Some(device) => device,
            None => return,
        }
    };
}

/// The calling thread's current context, straight from the driver.
pub fn current() -> cuda_brand::sys::CUcontext {
    let mut raw = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local.
    let rc = unsafe { cuda_brand::sys::cuCtxGetCurrent(&mut raw) };
    assert_eq!(rc, cuda_brand::sys::CUresult::CUDA_SUCCESS);
    raw
}

/// Free device memory of the current context's device, straight from the driver.
pub fn free_memory() -> usize {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: the out-pointers are live locals; a context is current.
    let rc = unsafe { cuda_brand::sys::cuMemGetInfo_v2(&mut free, &mut total) };
    assert_eq!(rc, cuda_brand::sys::CUresult::CUDA_SUCCESS);
    free
}

/// True (after printing a notice) when the test runs under compute-sanitizer: tests that
/// provoke a driver error on purpose skip there, because memcheck counts every failed API
/// call as an error. They run, and assert the error, in the plain GPU run.
pub fn under_sanitizer_skip(what: &str) -> bool {
    let under = std::env::var_os("NV_SANITIZER_INJECTION_PORT_BASE").is_some();
    if under {
        eprintln!("skipped under compute-sanitizer: {what} provokes a driver error on purpose");
    }
    under
}

/// Runs `f` in a fresh context of device 0, or skips (see [`gpu`]); a failure panics.
pub fn in_context(f: impl for<'ctx> FnOnce(ContextGuard<'ctx>) -> Result<(), Error>) {
    let Some(device) = gpu() else { return };
    with_context(&device, ContextFlags::default(), f).unwrap();
}

unsafe extern "C" {
    #[link_name = "cuPointerGetAttribute"]
    fn cu_pointer_get_attribute(data: *mut std::ffi::c_void, attribute: i32, ptr: u64) -> u32;
}

/// The memory pool an allocation came from (`CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`, 17;
/// newer than the bindings' enum), or 0 for memory from `cuMemAlloc`.
pub fn mempool_of(ptr: u64) -> usize {
    let mut pool: usize = 0;
    // SAFETY: the out-pointer is a live local of the attribute's size (a handle).
    let rc = unsafe { cu_pointer_get_attribute((&mut pool as *mut usize).cast(), 17, ptr) };
    assert_eq!(rc, 0, "cuPointerGetAttribute(MEMPOOL_HANDLE)");
    pool
}
