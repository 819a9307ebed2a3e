// Safety profile: `Module::from_binary_unchecked` is removed.
//
// It hands an image to the driver, which follows the offsets inside it without knowing the
// slice's length, on the caller's `unsafe` promise that the image is complete and
// undamaged. Under the profile every image goes through `Module::from_binary`, which
// checks every offset against the slice first (SOUNDNESS.md, rule 4), or is PTX text
// (`Module::from_ptx`).
//
// Fix: `Module::from_binary(ctx, &image)`; for an image the check does not know (a
// compressed fatbin), rebuild it (`nvcc --no-compress`) or load its PTX.

use cuda_brand::{ContextFlags, Device, Module, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let image = std::fs::read("kernels/kernels_sm90.cubin").unwrap_or_default();
    with_context(&device, ContextFlags::default(), |ctx| {
        // SAFETY: (this case is about the function being gone, not about the promise)
        let _module = unsafe { Module::from_binary_unchecked(ctx, &image) }?;
        Ok(())
    })
}
