// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `Stream::as_raw` is an `unsafe
// fn`, so the lint refuses it.
//
// Why: a raw handle outlives the value it came from and reaches the driver without the
// brand or a scope: code holding it can destroy the stream while the `Stream` still uses
// it, or queue work on it that no scope waits for, and no borrow stops it.
//
// Fix: the stream's methods (`stream.synchronize()`, `stream.scope(...)`); code that must
// hand the handle to another CUDA library does so in a module of its own that allows
// `unsafe_code`, where the promise is written down.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        // SAFETY: (the case is about the lint, not the promise)
        let handle = unsafe { stream.as_raw() };
        println!("{handle:?}");
        Ok(())
    })
}
