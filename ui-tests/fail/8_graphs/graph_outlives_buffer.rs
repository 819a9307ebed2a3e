// Rule: an executable graph cannot outlive the memory it reads or writes: a capture borrows
// every buffer its operations touch for the life of the graph, not of the capture closure.
//
// Without it: an instantiated graph holds plain device pointers. docs/c/graph_freed_buffer.c
// frees a buffer the graph writes, allocates again, and launches the graph: the replay
// writes whatever now lives at the old address (the guide's chapter 10).

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut x = ctx.zeroed::<u32>(1024)?;
        let (graph, ()) = ctx.capture(|g| g.fill(&mut x, 7))?;
        let exec = graph.instantiate()?;
        drop(x); // wrong: the graph still writes `x` at every replay
        ctx.new_stream()?.scope(|s| exec.launch(s))
    })
}
