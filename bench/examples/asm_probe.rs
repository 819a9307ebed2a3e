//! Probes for reading the generated code: `cargo rustc --release --example asm_probe -- --emit asm`
//! writes `target/release/examples/asm_probe-*.s`; compare `probe_branded_*` with `probe_raw_*`
//! (BENCHMARKS.md shows the result). `main` does nothing.

use cuda_brand::{DeviceMut, Error, Kernel, LaunchConfig, Out, SharedContext, StreamScope};
use cuda_driver_sys as sys;

#[inline(never)]
#[unsafe(no_mangle)]
pub fn probe_branded_enter(shared: SharedContext<'_>) -> Result<sys::CUcontext, Error> {
    // SAFETY: the handle is only returned.
    shared.enter(|c| Ok::<_, Error>(unsafe { std::hint::black_box(c).as_raw() }))
}

#[inline(never)]
#[unsafe(no_mangle)]
/// # Safety
/// `ctx` is a live context.
pub unsafe fn probe_raw_enter(ctx: sys::CUcontext) -> sys::CUcontext {
    // SAFETY: the caller's promise.
    unsafe {
        let mut c = std::ptr::null_mut();
        assert_eq!(sys::cuCtxPushCurrent_v2(ctx), sys::CUresult::CUDA_SUCCESS);
        let r = std::hint::black_box(ctx);
        assert_eq!(sys::cuCtxPopCurrent_v2(&mut c), sys::CUresult::CUDA_SUCCESS);
        r
    }
}

#[inline(never)]
#[unsafe(no_mangle)]
pub fn probe_branded_launch<'scope, 'ctx>(
    s: &'scope StreamScope<'scope, '_, 'ctx>,
    kernel: &'scope Kernel<'_, 'ctx, (Out<f32>,)>,
    buf: DeviceMut<'scope, 'ctx, f32>,
) -> Result<(), Error> {
    s.launch(kernel, LaunchConfig::linear(1, 32), (buf,))
}

/// # Safety
/// `f` and `stream` are live handles of one context; `ptr` is valid for `len` floats.
#[inline(never)]
#[unsafe(no_mangle)]
pub unsafe fn probe_raw_launch(
    f: sys::CUfunction,
    stream: sys::CUstream,
    ptr: u64,
    len: u64,
) -> sys::CUresult {
    let (mut p, mut n) = (ptr, len);
    let mut params = [
        (&mut p as *mut u64).cast::<std::ffi::c_void>(),
        (&mut n as *mut u64).cast(),
    ];
    // SAFETY: the caller's promise; `params` points at the two parameters.
    unsafe {
        sys::cuLaunchKernel(
            f,
            1,
            1,
            1,
            32,
            1,
            1,
            0,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
}

fn main() {}
