// Rule: a capture's views (`bind_mut`, `lend_host`) stay in the capture closure: they
// carry its higher-ranked brand `'c`, which nothing outside the closure can name.
//
// Without it: a view kept after the capture would name memory that the graph holds, usable
// by other work while a replay writes it.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut x = ctx.zeroed::<u32>(1024)?;
        let (_graph, view) = ctx.capture(|g| {
            let x = g.bind_mut(&mut x);
            g.fill(x, 7)?;
            Ok(x) // wrong: the view cannot leave the capture
        })?;
        println!("{view:?}");
        Ok(())
    })
}
