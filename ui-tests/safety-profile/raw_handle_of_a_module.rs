// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `Module::as_raw` is an `unsafe
// fn`, so the lint refuses it.
//
// Why: a raw handle outlives the value it came from and reaches the driver without the
// brand or a scope: code holding it can unload the module while its kernels are declared,
// or write its globals while a kernel reads them, and no borrow stops it.
//
// Fix: the module's methods (`module.kernel`, `module.global`); code that must hand the
// handle to another CUDA library does so in a module of its own that allows `unsafe_code`,
// where the promise is written down.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
        // SAFETY: (the case is about the lint, not the promise)
        let handle = unsafe { module.as_raw() };
        println!("{handle:?}");
        Ok(())
    })
}
