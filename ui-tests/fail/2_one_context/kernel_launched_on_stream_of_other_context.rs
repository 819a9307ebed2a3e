// Rule: a kernel launches only on a stream of its own context: the kernel, the stream and
// every buffer argument of a launch share one brand.
//
// Without it: cuLaunchKernel with a function of context A on a stream of context B returns
// CUDA_ERROR_INVALID_HANDLE at run time (docs/c/cross_context_stream.out); what cudarc
// 0.19.10 does with the same launch: bench/examples/peer_crates.out.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, LaunchConfig, Module, Out, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let module = Module::from_ptx(a, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        with_context(&device, ContextFlags::default(), |b| {
            let mut on_b = DeviceBuffer::from_slice(b, &[1.0f32, 2.0])?;
            let stream_b = Stream::new(b, StreamFlags::NonBlocking)?;
            // wrong: `scale` belongs to context a
            stream_b.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut on_b, 2.0f32)))
        })
    })
}
