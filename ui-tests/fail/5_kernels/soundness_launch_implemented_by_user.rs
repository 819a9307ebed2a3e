// Rule: `Launch`, what a scope can launch, is sealed: `&kernel` for a `Kernel`, `&mut
// kernel` for a `KernelMut`, and a `ScopedKernel` from `s.bind_kernel(&mut kernel)`. A
// type of your own cannot be launched.
//
// `Launch` has a hidden supertrait (`launch::sealed::Launch`, in a private module of the
// crate) that hands the launch the function, the limits its configuration is checked
// against, and the module whose globals it writes (for the stream order). The crate's
// impls exist only for kernels whose parameter list was declared with `unsafe`
// (`Module::kernel`, `Module::kernel_mut`), the one promise the driver cannot check.
// rustc names the hidden supertrait and notes that `Launch` is a "sealed trait" (its
// remark that `Undeclared` "implements similarly named trait `Launch`" is about the public
// half, the one in the `impl` below).
//
// Without it: `Undeclared` below would launch a `Function` with a parameter list nobody
// promised, in safe code: the driver copies the arguments into whatever parameters the
// kernel really has (a float read as a pointer is a wild address: an illegal address, a
// sticky error that ends the process's CUDA use, docs/c/sticky_error.out). It could also
// hide a kernel that writes its module's globals from the order between streams, and
// report any limits, so a too-large block would reach the driver unchecked.
//
// Fix: declare the kernel once, with `unsafe` and a SAFETY comment:
// `let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;`, then launch
// `&scale`.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, Function, Launch, LaunchConfig, Module, Out, Stream,
    StreamFlags, with_context,
};

/// A function launched as it is, with the parameter list the caller assumes.
struct Undeclared<'m, 'c>(Function<'m, 'c>);

// wrong: a user type may not be launched
impl<'s, 'm, 'c> Launch<'s, 'c, (Out<f32>, f32)> for Undeclared<'m, 'c> {}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        let scale = Undeclared(module.function("scale")?);
        let mut x = DeviceBuffer::from_slice(ctx, &[1.0f32, 2.0, 3.0])?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| s.launch(scale, LaunchConfig::linear(1, 32), (&mut x, 2.0f32)))
    })
}
