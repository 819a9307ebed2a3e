// Rule: `KernelParam`, what a kernel's declared parameter can be, is sealed: `In<T>`,
// `Out<T>`, the primitive numbers and `ByValue<T>`. A type of your own cannot be a
// parameter kind.
//
// `KernelParam` has a hidden supertrait (`launch::sealed::Param`, in a private module of
// the crate) that says how many C parameters the Rust parameter stands for (a slice is two:
// pointer and length), the bytes each one is, and where the `void**` array handed to
// `cuLaunchKernel` points for it. rustc names the hidden supertrait and notes that
// `KernelParam` is a "sealed trait".
//
// Without it: the parameter list would say what the driver reads, and the crate could no
// longer vouch for it. `DevicePtr` below would declare a bare pointer, with no length
// beside it and no buffer behind it: the kernel could not keep its accesses in bounds
// (that is why every slice parameter is a pointer *and* an element count), and a kind whose
// layout the crate does not know would make the parameter array point at values of the
// wrong size.
//
// Fix: declare slices as `In<T>` (read) or `Out<T>` (written), each a `const T*`/`T*`
// followed by a `size_t` in the kernel, numbers as themselves, and a `#[repr(C)]` struct
// passed by value as `ByValue<T>`. `scale(float *x, size_t x_len, float k)` is
// `(Out<f32>, f32)`.

use std::marker::PhantomData;

use cuda_brand::{ContextFlags, Device, KernelParam, Module, with_context};

/// A raw `T*` kernel parameter, without a length.
struct DevicePtr<T>(PhantomData<T>);

// wrong: a user type may not be a kernel parameter kind
impl<T> KernelParam for DevicePtr<T> {}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float *x, size_t x_len, float k): the pointer, the length as a
        // number, and the factor.
        let scale = unsafe { module.kernel::<(DevicePtr<f32>, u64, f32)>("scale") }?;
        println!("{:?}", scale.function());
        Ok(())
    })
}
