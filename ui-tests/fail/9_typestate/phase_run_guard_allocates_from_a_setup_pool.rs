// Rule: a buffer of a memory pool takes the context's guard like every other buffer
// (`DeviceBuffer::zeroed_in(ctx, &pool, len)`), so the run phase of `with_phases` cannot
// make one, even from a pool made during setup: the run-phase guard is not `Allocating`.
//
// Without it: the run phase could grow a pool made in setup buffer by buffer (8 MiB each
// in the issue that found it), outside every scope, and a buffer made in setup from a pool
// was freed the moment it was dropped in the run phase.
//
// Fix: make the buffer in `Phases::setup` (`ctx.zeroed_in(&pool, len)`), or take bounded
// scratch from the pool inside a scope of a setup stream (`s.alloc_zeroed_in(&pool, len)`),
// which the scope frees when it ends.

use cuda_brand::{with_phases, ContextFlags, Device, DeviceBuffer, Error, MemoryPool};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (pool, run) = phases.setup(|ctx| MemoryPool::with_max_size(ctx, 64 << 20))?;
        let late = DeviceBuffer::<f32>::zeroed_in(run, &pool, 2 << 20)?;
        drop(late);
        Ok::<_, Error>(())
    })
}
