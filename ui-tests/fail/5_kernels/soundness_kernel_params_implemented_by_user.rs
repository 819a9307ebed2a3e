// Rule: `KernelParams`, a kernel's whole parameter list, is sealed: only tuples of 1 to 12
// `KernelParam`s implement it. A type of your own cannot be a parameter list.
//
// `KernelParams` has a hidden supertrait (`launch::sealed::Params`, in a private module of
// the crate) that counts the C parameters the list stands for; the crate sizes the `void**`
// array it hands `cuLaunchKernel` by it, and pairs each declared parameter with exactly one
// argument of a matching kind. rustc names the hidden supertrait and notes that
// `KernelParams` is a "sealed trait".
//
// Without it: a hand-made list would decide how many entries the driver finds in the
// parameter array, which the driver reads without a length (as many as the kernel has
// parameters): a list that counts fewer than the kernel takes makes the driver read past
// the array, on the host, and pass whatever it finds there as pointers to the kernel.
//
// Fix: declare the list as a tuple: `(Out<f32>, f32)` for `scale(float *x, size_t x_len,
// float k)`, `(In<f32>,)` for a single slice. A kernel with more than 12 parameters can
// take a `#[repr(C)]` struct passed `ByValue<T>`.

use cuda_brand::{ContextFlags, Device, KernelParams, Module, with_context};

/// The parameter list of `scale`, spelled as a struct.
struct ScaleParams;

// wrong: only the crate's tuples may be a parameter list
impl KernelParams for ScaleParams {}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float *x, size_t x_len, float k) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<ScaleParams>("scale") }?;
        println!("{:?}", scale.function());
        Ok(())
    })
}
