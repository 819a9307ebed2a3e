// Rule: an owned handle cannot be dropped while a view bound from it is alive.
//
// `bind` borrows the handle for as long as the view lives (`&'a self` gives `&'a
// DeviceBuffer<'ctx, T>`), so the borrow checker refuses the drop, as for any borrowed
// value.
//
// Without it: the drop frees the device memory (in its context) and the view still points
// at it; the next allocation gets the same address, so the view would read another
// buffer (docs/c/free_while_running.out).
//
// Fix: drop the handle after the last use of the view, or take the value out of it with
// `buf.into_bound(ctx)?`, which ends the handle and gives the branded buffer itself.

use cuda_brand::Device;
use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let buf: OwnedDeviceBuffer<u32> = home.enter(|ctx| {
        let buf = ctx.from_slice(&[1u32, 2, 3])?;
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, buf)?)
    })?;
    home.enter(|ctx| {
        let view = buf.bind(ctx)?;
        drop(buf);
        println!("{:?}", view.to_vec()?);
        Ok::<_, cuda_brand::Error>(())
    })
}
