// Rule: the unsafe pool form, `DeviceBuffer::uninitialized_in`, takes the phase's guard
// too: its `unsafe` is about stale contents, not about when it may allocate, and the
// run-phase guard of `with_phases` is not `Allocating`.
//
// Without it: the escape hatch would be a way around "no allocation after
// initialization" (AUTOSAR A18-5-7) that no compile error catches.
//
// Fix: allocate in `Phases::setup`, or use scope scratch from the pool
// (`s.alloc_in(&pool, len)` in a scope of a setup stream).

use cuda_brand::{with_phases, ContextFlags, Device, DeviceBuffer, Error, MemoryPool};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (pool, run) = phases.setup(|ctx| MemoryPool::with_max_size(ctx, 64 << 20))?;
        // SAFETY: never read.
        let late = unsafe { DeviceBuffer::<u8>::uninitialized_in(run, &pool, 1 << 20) }?;
        drop(late);
        Ok::<_, Error>(())
    })
}
