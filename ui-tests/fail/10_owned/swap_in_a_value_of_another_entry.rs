// Owning layer: `bind_mut` gives `&mut DeviceBuffer<'ctx, T>` of its guard's brand, so
// `mem::swap` can only put a value of the same entry into the handle. Without that, a
// handle could keep a value whose context (another entry's) is torn down before it.
// Fix: swap only values of the same entry.
use cuda_brand::owned::OwnedContext;
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let mut buf =
        home.enter(|ctx| Ok::<_, cuda_brand::Error>(home.unbind(ctx, ctx.zeroed::<u32>(16)?)?))?;
    home.enter(|a| {
        home.enter(|b| {
            let mut other = b.zeroed::<u32>(16)?;
            std::mem::swap(buf.bind_mut(a)?, &mut other);
            Ok::<_, cuda_brand::Error>(())
        })
    })
}
