// Rule: a function or kernel taken from a library borrows the library: the library cannot
// be unloaded (dropped) while one exists, nor while a launch of one is queued.
//
// Without it: cuLibraryUnload frees the library's code in every context while a
// CUfunction taken from it (cuKernelGetFunction) is still held; launching that handle
// afterwards is use-after-free in the driver.
//
// Fix: drop the kernel (and end the scopes that launch it) before the library.

use cuda_brand::{ContextFlags, Device, LaunchConfig, Library, Out, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let library = Library::from_ptx(include_str!("../../../kernels/kernels.ptx"))?;
    with_context(&device, ContextFlags::default(), |ctx| {
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { library.kernel::<(Out<f32>, f32)>(ctx, "scale") }?;
        drop(library); // unloads the code, in every context
        let mut x = ctx.from_slice(&[1.0f32, 2.0])?;
        ctx.new_stream()?.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x, 2.0f32)))
    })
}
