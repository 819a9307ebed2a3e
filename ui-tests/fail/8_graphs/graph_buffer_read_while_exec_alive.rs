// Rule: while an executable graph exists, the host cannot read (or write) memory the graph
// writes: the graph holds it exclusively. To read it between replays, lend it out of the
// graph (`Capture::lend_mut`, then `exec.device(key)`), or drop the graph first.
//
// Without it: a read between two launches races the replay still running, and sees a
// half-written buffer.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut x = ctx.zeroed::<u32>(1024)?;
        let exec = ctx.capture(|g| g.fill(&mut x, 7))?.0.instantiate()?;
        let stream = ctx.new_stream()?;
        stream.scope(|s| exec.launch(s))?;
        println!("{:?}", x.to_vec()?); // wrong: the graph still holds `x`
        stream.scope(|s| exec.launch(s))
    })
}
