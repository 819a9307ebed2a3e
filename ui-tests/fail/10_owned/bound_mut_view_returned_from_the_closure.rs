// Rule: a view from `Owned::bind_mut` cannot be returned from the guard's closure: it
// carries the guard's brand, which does not exist outside.
//
// `bind_mut` gives `&mut DeviceBuffer<'ctx, T>`; a closure's result cannot mention `'ctx`
// (rule 1), so the view ends with the closure, as every branded value does.
//
// Without it: the view would be written after `enter` has restored the thread's previous
// context, with nothing to say its own is alive: the owning layer would be a way around
// rule 1.
//
// Fix: do the writing inside the closure (`home.enter(|ctx| buf.bind_mut(ctx)?.fill(7))`),
// or take the value itself out of its handle with `into_bound` (still inside).

use cuda_brand::Device;
use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let mut buf: OwnedDeviceBuffer<u32> = home.enter(|ctx| {
        let buf = ctx.zeroed::<u32>(64)?;
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, buf)?)
    })?;
    let view = home.enter(|ctx| buf.bind_mut(ctx))?;
    view.fill(7)?;
    Ok(())
}
