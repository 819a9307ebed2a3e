// Rule: a view from `Owned::bind` carries the brand of the guard it was bound to, so it
// cannot be stored outside that guard's closure.
//
// `bind` checks the guard's context once and gives `&DeviceBuffer<'ctx, T>`: from there
// every rule of the closure layer holds, rule 1 included. The variable outside was typed
// where `'ctx` does not exist.
//
// Without it: the view would be used after the closure returned, where nothing says its
// context is current (or, once the last handle is gone, alive); binding is cheap (one
// compare), so the crate binds again instead of keeping views.
//
// Fix: keep the owned handle and bind it in each closure that uses it:
// `home.enter(|ctx| buf.bind(ctx)?.to_vec())`.

use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};
use cuda_brand::{Device, DeviceBuffer};

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let buf: OwnedDeviceBuffer<u32> = home.enter(|ctx| {
        let buf = ctx.from_slice(&[1u32, 2, 3])?;
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, buf)?)
    })?;
    let mut kept: Option<&DeviceBuffer<'_, u32>> = None;
    home.enter(|ctx| {
        kept = Some(buf.bind(ctx)?);
        Ok::<_, cuda_brand::Error>(())
    })?;
    if let Some(view) = kept {
        println!("{:?}", view.to_vec()?);
    }
    Ok(())
}
