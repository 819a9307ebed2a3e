// Rule: `Module::from_binary_unchecked` is an `unsafe fn`: calling it is a promise that the
// image is complete and undamaged, as `nvcc` or `nvlink` wrote it. Safe code loads images
// with `Module::from_binary`, which checks them first.
//
// `cuModuleLoadDataEx` takes the image as a bare pointer, without a length, and follows
// the offsets and sizes written inside it (ELF section and program headers, fatbin entry
// sizes). The unchecked loader checks only the first four bytes (the ELF or fatbin magic).
//
// Without it: a truncated or corrupted image (a half-written file, bytes from the network)
// makes the driver read outside the slice, on the host: garbage loaded as code, or a
// segfault inside libcuda.
//
// Fix: `Module::from_binary(ctx, image)?` (checked, an `Err` for a damaged image), or,
// for an image you built yourself, `unsafe { Module::from_binary_unchecked(ctx, image) }`
// with a `// SAFETY:` comment saying where the image comes from.

use cuda_brand::{ContextFlags, Device, Module, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let image = std::fs::read("kernels/kernels_sm90.cubin").expect("the cubin");
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_binary_unchecked(ctx, &image)?;
        println!("{:?}", module.function("scale")?);
        Ok(())
    })
}
