// Rule: a host function may borrow from its environment only what outlives the scope: it
// runs when the stream reaches it, after the closure that queued it may have returned.
//
// Without it: the function reads `label` after the closure has freed it.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut dev = ctx.zeroed::<u32>(1 << 20)?;
        ctx.new_stream()?.scope(|s| {
            let label = String::from("filled");
            s.fill(&mut dev, 7)?;
            s.host_fn(|| println!("{label}")) // wrong: `label` is dropped when the closure returns
        })
    })
}
