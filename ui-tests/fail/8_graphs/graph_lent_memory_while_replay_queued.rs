// Rule: a graph lends its memory back only while no replay is queued: `exec.host_mut(key)`
// needs `&mut exec`, and a scope that launched the graph borrows it until it has
// synchronized. Read the output after the scope.
//
// Without it: the host reads the output buffer while the replay's copy is still writing it.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut output = ctx.pinned_zeroed::<u32>(1024)?;
        let mut x = ctx.zeroed::<u32>(1024)?;
        let (graph, out) = ctx.capture(|g| {
            let (output, out) = g.lend_host(&mut output);
            let x = g.bind_mut(&mut x);
            g.fill(x, 7)?;
            g.copy_to_host(output, x.into_ref())?;
            Ok(out)
        })?;
        let mut exec = graph.instantiate()?;
        ctx.new_stream()?.scope(|s| {
            exec.launch(s)?;
            println!("{}", exec.host_mut(out)[0]); // wrong: the replay may still be writing it
            Ok(())
        })
    })
}
