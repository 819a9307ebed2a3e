// Rule: a scope's views cannot be captured: they carry the scope's brand, not the
// capture's. Bind the buffer in the capture itself (`g.bind_mut(&mut buffer)`).
//
// Without it: the graph would write memory that the scope also queues work on, on its own
// stream, unordered with the graph's replays, and that the scope releases when it returns
// while the graph still holds its address.
//
// Reading the error: "`g` escapes the closure body here" blames the capture, which is used
// correctly. `g` stands for the capture's brand; the mistake is `x`, the scope's view,
// "declared here, outside of the closure body": giving it to the capture would make the
// scope's brand and the capture's one (the guide, chapter 9, E0521).

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut x = ctx.zeroed::<u32>(1024)?;
        ctx.new_stream()?.scope(|s| {
            let x = s.bind_mut(&mut x);
            s.fill(x, 1)?;
            let (_graph, ()) = ctx.capture(|g| g.fill(x, 7))?; // wrong: `x` is the scope's view
            Ok(())
        })
    })
}
