// Rule: a kernel's parameter list is declared as a tuple, also when it has one parameter:
// `(Out<f32>,)`, not `Out<f32>`.
//
// `Module::kernel::<P>` requires `P: KernelParams`, implemented for tuples of 1 to 12
// parameter kinds only.
//
// Without it: nothing at run time, this one is about the declaration's form; the tuple is
// what lets the crate count the C parameters (a slice is two: pointer and length) and pair
// each with one argument of the launch.
//
// Fix: `module.kernel::<(Out<f32>, f32)>("scale")`, the whole list of `scale(float *x,
// size_t x_len, float k)`.

use cuda_brand::{ContextFlags, Device, Module, Out, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let _scale = unsafe { module.kernel::<Out<f32>>("scale") }?;
        Ok(())
    })
}
