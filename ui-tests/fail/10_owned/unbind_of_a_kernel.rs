// Rule: `OwnedContext::unbind` takes only values that have an owned form; a declared
// kernel (`Kernel<'m, 'ctx, P>`) is not one: it borrows its module. Its owned form is
// `OwnedKernel<P>`, which holds the module.
//
// `unbind` is bounded by the sealed `Unbind<'ctx>` trait, implemented by buffers, pools,
// streams, events and modules of the guard's brand; its message lists them.
//
// Without it: the owned kernel would outlive the borrow of its module, which would be
// unloaded when the closure ends; a launch would use a dangling function handle.
//
// Fix: unbind the module, then declare the kernel from it:
// `let module = Arc::new(home.unbind(ctx, module)?);`
// `let scale = unsafe { OwnedKernel::<(Out<f32>, f32)>::new(&module, "scale") }?;`.

use cuda_brand::owned::OwnedContext;
use cuda_brand::{Device, Out};

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let scale = home.enter(|ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        // SAFETY: scale(float *x, size_t x_len, float k) writes x[0..x_len] only.
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, scale)?)
    })?;
    drop(scale);
    Ok(())
}
