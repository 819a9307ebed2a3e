// Rule: a pointer parameter the kernel writes (`OutPtr<T>`, a bare `T *` in C) takes what a
// slice it writes (`Out<T>`) takes: `&mut buffer`, `&mut buffer[range]` or a `DeviceMut`,
// an exclusive borrow. `&buffer` is for a pointer it only reads (`InPtr<T>`, `const T *`).
//
// Without it: a shared borrow leaves other shared borrows of `y` alive beside the launch,
// so other code may read `y` (a copy on another stream, `y.to_vec()` on another thread)
// while saxpy writes it, or pass `&y` again as the same launch's `InPtr`: `cuLaunchKernel`
// takes any address for any pointer, and what the reader sees is old, new or a mix of
// both, reported by no call.
//
// Fix: `&mut y`.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        // SAFETY: saxpy(int n, float a, const float *x, float *y) reads x[0..n] and writes
        // y[0..n]; every launch below passes n at most both lengths.
        let saxpy = unsafe { module.kernel::<(i32, f32, InPtr<f32>, OutPtr<f32>)>("saxpy") }?;
        let x = ctx.from_slice(&[1.0f32; 256])?;
        let y = ctx.from_slice(&[2.0f32; 256])?;
        let config = saxpy.config_for(256)?;
        // wrong: a shared borrow for the pointer the kernel writes
        ctx.new_stream()?.scope(|s| s.launch(&saxpy, config, (256i32, 3.0f32, &x, &y)))
    })
}
