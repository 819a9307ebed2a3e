// Rule: a launch keeps every buffer argument borrowed until its scope has synchronized, so a
// buffer a queued kernel uses cannot be dropped (freed) in the meantime.
//
// Without it: the free races the kernel. docs/c/free_while_running.out: cuMemFree of
// cuMemAlloc memory happens to wait for the queued work (429.5 ms), but cuMemFree of
// stream-ordered memory returns in 0.1 ms, the next allocation gets the same address, and
// the queued kernel silently writes into it.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, LaunchConfig, Module, Out, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let mut x = DeviceBuffer::from_slice(ctx, &[1.0f32; 1 << 20])?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| {
            s.launch(&scale, LaunchConfig::linear(1024, 256), (&mut x, 2.0f32))?;
            drop(x); // wrong: the kernel may not have run yet
            Ok(())
        })
    })
}
