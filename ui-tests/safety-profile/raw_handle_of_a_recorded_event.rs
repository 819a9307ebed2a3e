// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `Recorded::as_raw` is an `unsafe
// fn`, so the lint refuses it.
//
// Why: a raw handle outlives the value it came from and reaches the driver without the
// brand or a scope: code holding it can record the event again behind the proof, which then
// stands for another point of another stream, and no borrow stops it.
//
// Fix: the proof's methods (`recorded.synchronize()`, `stream.wait_event(recorded)`); code
// that must hand the handle to another CUDA library does so in a module of its own that
// allows `unsafe_code`, where the promise is written down.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut event = ctx.new_event()?;
        let stream = ctx.new_stream()?;
        let recorded = event.record(&stream)?;
        // SAFETY: (the case is about the lint, not the promise)
        let handle = unsafe { recorded.as_raw() };
        println!("{handle:?}");
        Ok(())
    })
}
