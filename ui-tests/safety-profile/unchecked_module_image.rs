// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `Module::from_binary_unchecked` is
// an `unsafe fn`, so the lint refuses it.
//
// Why: the driver follows the offsets inside the image without knowing the slice's length,
// on the promise that the image is complete and undamaged. `Module::from_binary` checks
// every offset against the slice first (SOUNDNESS.md, rule 4).
//
// Fix: `Module::from_binary(ctx, &image)`; for an image the check does not know (a
// compressed fatbin), rebuild it (`nvcc --no-compress`) or load its PTX.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let image = std::fs::read("kernels/kernels_sm90.cubin").unwrap_or_default();
    with_context(&device, ContextFlags::default(), |ctx| {
        // SAFETY: (the case is about the lint, not the promise)
        let module = unsafe { Module::from_binary_unchecked(ctx, &image) }?;
        println!("{module:?}");
        Ok(())
    })
}
