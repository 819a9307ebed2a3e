// Rule: resource limits are set during the setup phase of `with_phases`: the heap and
// stack limits reserve device memory, so `set_limit` needs a guard that may allocate, and
// the run-phase guard is not one (reading a limit, `limit`, works in every phase).
//
// Without it: raising the device-side `malloc` heap in the run phase reserves device
// memory the setup never accounted for.
//
// Fix: set the limits in `Phases::setup`.

use cuda_brand::{with_phases, ContextFlags, Device, Error, ResourceLimit};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        run.set_limit(ResourceLimit::MallocHeapSize, 64 << 20)?;
        Ok::<_, Error>(())
    })
}
