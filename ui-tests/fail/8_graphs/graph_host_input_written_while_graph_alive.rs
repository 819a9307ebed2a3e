// Rule: a captured copy reads its host memory at every replay, so the graph borrows it for
// its whole life: a slice given to `copy_from_host` cannot be written while the graph
// exists. To write new input between replays, lend it to the graph (`Capture::lend_host`)
// and write it through `exec.host_mut(key)`, which needs no replay to be queued.
//
// Without it: the host rewrites the input while a replay's copy reads it (for pinned
// memory the copy engine reads it then: docs/c/async_host_memory.out shows the mix of old
// and new data such a race leaves on the device).

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut input = ctx.pinned_zeroed::<u32>(1024)?;
        let mut x = ctx.zeroed::<u32>(1024)?;
        let exec = ctx.capture(|g| g.copy_from_host(&mut x, &input[..]))?.0.instantiate()?;
        let stream = ctx.new_stream()?;
        for i in 0..10 {
            input.fill(i); // wrong: the graph reads `input` at every replay
            stream.scope(|s| exec.launch(s))?;
        }
        Ok(())
    })
}
