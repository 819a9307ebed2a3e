// Rule: a kernel's declared parameters are the crate's kinds only: `In<T>` (a slice it
// reads), `Out<T>` (a slice it writes), the primitive numbers, and `ByValue<T>` for a
// `#[repr(C)]` struct passed by value.
//
// `Module::kernel::<P>` requires `P: KernelParams`, a tuple of `KernelParam`s; `Vec<f32>`
// is none (and cannot be made one: `KernelParam` is sealed).
//
// Without it: a declaration would promise a parameter the crate cannot lay out: a `Vec`
// is a host pointer, a capacity and a length, bytes a kernel cannot use, and the crate
// would have no element count to pass beside a device pointer.
//
// Fix: `(Out<f32>, f32)` for `scale(float *x, size_t x_len, float k)`.

use cuda_brand::{ContextFlags, Device, Module, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let _scale = unsafe { module.kernel::<(Vec<f32>, f32)>("scale") }?;
        Ok(())
    })
}
