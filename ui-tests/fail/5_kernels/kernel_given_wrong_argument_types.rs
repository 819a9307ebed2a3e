// Rule: a typed kernel's launch takes exactly its declared parameters: a slice where a
// slice is declared (read-only `In<T>` accepts `&buffer`, writable `Out<T>` needs
// `&mut buffer`), a scalar of the declared type where a scalar is.
//
// Without it: cuLaunchKernel copies whatever bytes `kernelParams` points at into the
// kernel's parameter space; the driver checks neither count nor types. A float passed where
// the kernel reads a pointer is a wild address on the GPU (an illegal address, a sticky
// error that ends the process's CUDA use: docs/c/sticky_error.out), and a buffer passed
// for reading to a parameter the kernel writes is silently overwritten.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, LaunchConfig, Module, Out, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let x = DeviceBuffer::from_slice(ctx, &[1.0f32, 2.0])?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // wrong twice: a shared borrow for the written slice, and an integer for the float
        stream.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&x, 2u32)))
    })
}
