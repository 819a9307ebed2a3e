// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `StreamScope::alloc` is an `unsafe
// fn`, so the lint refuses it.
//
// Why: the new memory holds whatever it held before, possibly another allocation's data,
// until written: no undefined behaviour for `DeviceCopy` types, but a read of stale data
// the compiler cannot rule out.
//
// Fix: `StreamScope::alloc_zeroed`.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        ctx.new_stream()?.scope(|s| {
            // SAFETY: (the case is about the lint, not the promise)
            let scratch = unsafe { s.alloc::<u32>(16) }?;
            s.fill(scratch, 7)
        })?;
        Ok(())
    })
}
