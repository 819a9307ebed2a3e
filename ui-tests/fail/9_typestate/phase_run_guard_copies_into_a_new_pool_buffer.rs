// Rule: the run phase of `with_phases` allocates nothing, from a pool neither: copying host
// data into a new buffer of a pool (`from_slice_in`, here as the guard's method) needs a
// guard that may allocate, and the run-phase guard is not one.
//
// Without it: every pass of the run phase could allocate a new device buffer from a pool
// made in setup, unbounded (only scope scratch is bounded by the pool and freed by its scope).
//
// Fix: make the buffer in `Phases::setup` and copy into it in the run phase
// (`buffer.copy_from_host(&host)`, or `s.copy_from_host(..)` in a scope).

use cuda_brand::{with_phases, ContextFlags, Device, Error, MemoryPool};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let host = vec![1.0f32; 1024];
    with_phases(&device, ContextFlags::default(), |phases| {
        let (pool, run) = phases.setup(|ctx| MemoryPool::new(ctx))?;
        let copy = run.from_slice_in(&pool, &host)?;
        drop(copy);
        Ok::<_, Error>(())
    })
}
