// Rule: an executable graph of context A is launched only by a scope of a stream of A.
//
// Without it: cuGraphLaunch of A's graph on B's stream: the driver refuses it at best, and
// at worst runs A's work where B's stream orders it.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let mut x = a.zeroed::<u32>(1024)?;
        let exec = a.capture(|g| g.fill(&mut x, 7))?.0.instantiate()?;
        with_context(&device, ContextFlags::default(), |b| {
            let stream_b = b.new_stream()?;
            stream_b.scope(|s| exec.launch(s)) // wrong: `exec` is a graph of context a
        })
    })
}
