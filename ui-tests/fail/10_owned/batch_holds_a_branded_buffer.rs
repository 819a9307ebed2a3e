// Rule: an awaited batch holds owned handles, not branded values: a `DeviceBuffer<'ctx, T>`
// made in `enter` is not a part of a batch until `OwnedContext::unbind` makes it an
// `OwnedDeviceBuffer<T>`.
//
// A batch is `'static` (the future that holds it may outlive every closure, and may be
// forgotten); a branded buffer carries its closure's brand, and is freed when that
// closure's context would be destroyed.
//
// Without it: the buffer would be freed with `enter`'s closure (or its context torn down)
// while the batch's queued work still writes it; the next allocation gets the freed
// address, and work still queued on it writes the new owner's memory
// (docs/c/free_while_running.out).
//
// Fix: `stream.submit(home.unbind(ctx, buf)?, |s, d| s.fill(d, 1.0))`.

use std::sync::Arc;

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let stream = Arc::new(home.enter(|ctx| {
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, ctx.new_stream()?)?)
    })?);
    home.enter(|ctx| {
        let buf = ctx.zeroed::<f32>(1024)?;
        let pending = stream.submit(buf, |s, d| s.fill(d, 1.0));
        drop(pending);
        Ok::<_, cuda_brand::Error>(())
    })
}
