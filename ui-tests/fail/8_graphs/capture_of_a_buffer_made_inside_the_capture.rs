// Rule: the graph holds what it captured for its whole life, so a buffer made inside the
// capture closure (and freed at its end) cannot be captured. Make it before the capture.
//
// Without it: the buffer is freed when the closure returns, and every replay writes freed
// memory (docs/c/graph_freed_buffer.c).

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let (_graph, ()) = ctx.capture(|g| {
            let mut scratch = ctx.zeroed::<u32>(1024)?;
            g.fill(&mut scratch, 7) // wrong: `scratch` is freed when the closure returns
        })?;
        Ok(())
    })
}
