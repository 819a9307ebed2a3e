// Rule: declaring a kernel's parameter list is the one promise the crate cannot check, so it
// is `unsafe`: the caller states, in an `unsafe` block with a SAFETY comment, that the C
// signature matches and that the kernel stays in bounds.
//
// Without it: the driver checks neither the number nor the types of a kernel's parameters
// (cuLaunchKernel copies whatever `kernelParams` points at), nor its accesses: a write past
// the end of a buffer silently overwrote the next one, and compute-sanitizer memcheck
// reported 0 errors (docs/c/out_of_bounds.out, out_of_bounds.sanitizer.out).

use cuda_brand::{ContextFlags, Device, Module, Out, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        let _scale = module.kernel::<(Out<f32>, f32)>("scale")?;
        Ok(())
    })
}
