// Rule: a launch passes one argument per declared parameter, in order, as a tuple (a
// one-parameter kernel takes `(arg,)`).
//
// `StreamScope::launch` takes `impl KernelArgs<'scope, 'ctx, P>` for the kernel's declared
// list `P`; a tuple of another length implements it for no `P` of that length.
//
// Without it: `cuLaunchKernel` reads as many entries of the `void**` parameter array as
// the kernel has parameters, with no length to check against: a missing argument is read
// from whatever lies past the array, on the host, and passed to the kernel (here a garbage
// factor `k`; for a missing slice a garbage pointer or length, and a write where nothing
// reports it, as in docs/c/out_of_bounds.out).
//
// Fix: `(&mut x, 2.0f32)`.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, LaunchConfig, Module, Out, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let mut x = DeviceBuffer::from_slice(ctx, &[1.0f32, 2.0])?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // wrong: the factor is missing
        stream.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x,)))
    })
}
