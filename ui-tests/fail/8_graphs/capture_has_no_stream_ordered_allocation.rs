// Rule: a capture offers no stream-ordered allocation: a captured cuMemAllocAsync would be
// a graph allocation made at every replay, which must be freed before the next one. Memory
// that lives across replays is a `DeviceBuffer` the graph borrows.
//
// Without it: a graph that allocates without freeing fails its second launch
// (CUDA_ERROR_INVALID_VALUE, cuGraphLaunch's documentation), and memory freed outside the
// graph would be used by the next replay.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let (_graph, ()) = ctx.capture(|g| {
            let scratch = g.alloc_zeroed::<u32>(1024)?; // wrong: no allocation in a capture
            g.fill(scratch, 7)
        })?;
        Ok(())
    })
}
