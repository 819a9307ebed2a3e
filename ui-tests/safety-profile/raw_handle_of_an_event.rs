// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `Event::as_raw` is an `unsafe fn`,
// so the lint refuses it.
//
// Why: a raw handle outlives the value it came from and reaches the driver without the
// brand or a scope: code holding it can destroy the event, or record it again while a proof
// of its last record is what a stream waits for, and no borrow stops it.
//
// Fix: `event.record(&stream)` and the proof it returns; code that must hand the handle to
// another CUDA library does so in a module of its own that allows `unsafe_code`, where the
// promise is written down.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let event = ctx.new_event()?;
        // SAFETY: (the case is about the lint, not the promise)
        let handle = unsafe { event.as_raw() };
        println!("{handle:?}");
        Ok(())
    })
}
