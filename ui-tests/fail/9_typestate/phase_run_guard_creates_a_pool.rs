// Rule: a memory pool is made during the setup phase of `with_phases`: every pool
// constructor (`new`, `with_max_size`, `of_device`, `device_default`) takes a guard that
// may allocate, and the run-phase guard is not one.
//
// Without it: a pool made in the run phase would be a new bound for scope scratch, sized
// while the program runs instead of when it initializes.
//
// Fix: make the pool in `Phases::setup` and return it with the rest.

use cuda_brand::{with_phases, ContextFlags, Device, Error, MemoryPool};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let pool = MemoryPool::with_max_size(run, 64 << 20)?;
        drop(pool);
        Ok::<_, Error>(())
    })
}
