// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `Graph::as_raw` is an `unsafe fn`,
// so the lint refuses it.
//
// Why: a raw handle outlives the value it came from and reaches the driver without the
// brand or a scope: code holding it can add nodes that touch memory the graph does not
// hold, and no borrow stops it.
//
// Fix: capture what the graph should do (`ctx.capture`); code that must hand the handle to
// another CUDA library does so in a module of its own that allows `unsafe_code`, where the
// promise is written down.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut x = ctx.zeroed::<f32>(256)?;
        let (graph, ()) = ctx.capture(|g| g.fill(&mut x, 1.0f32))?;
        // SAFETY: (the case is about the lint, not the promise)
        let handle = unsafe { graph.as_raw() };
        println!("{handle:?}");
        Ok(())
    })
}
