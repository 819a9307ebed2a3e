// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `Library::from_binary_unchecked`
// is an `unsafe fn`, so the lint refuses it.
//
// Why: as for `Module::from_binary_unchecked`: the driver reads the image unchecked.
//
// Fix: `Library::from_binary(&image)`, which checks it.

#![deny(unsafe_code)]

use cuda_brand::Library;

fn main() -> cuda_brand::Result<()> {
    let image = std::fs::read("kernels/kernels_sm90.cubin").unwrap_or_default();
    // SAFETY: (the case is about the lint, not the promise)
    let library = unsafe { Library::from_binary_unchecked(&image) }?;
    println!("{library:?}");
    Ok(())
}
