// Rule: declaring a library kernel's parameter list is the same unsafe promise as for a
// module's (`Module::kernel`): the driver checks at most the parameters' sizes (CUDA 12.4
// and newer, which the crate does), never what the kernel touches.
//
// Without it: a kernel declared with the wrong parameter list reads its arguments from the
// wrong bytes; one that writes past the lengths it is given silently overwrites other
// memory (docs/c/out_of_bounds.out).

use cuda_brand::{ContextFlags, Device, Library, Out, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let library = Library::from_ptx(include_str!("../../../kernels/kernels.ptx"))?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _scale = library.kernel::<(Out<f32>, f32)>(ctx, "scale")?;
        Ok(())
    })
}
