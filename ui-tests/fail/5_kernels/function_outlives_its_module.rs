// Rule: a function or kernel borrows its module: it cannot outlive it.
//
// Without it: cuModuleUnload frees the module's code while a CUfunction taken from it is
// still held; launching that handle afterwards is use-after-free in the driver.

use cuda_brand::{ContextFlags, Device, Module, Out, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        drop(module); // unloads the code
        println!("{scale:?}");
        Ok(())
    })
}
