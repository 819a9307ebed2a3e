// Rule: managed memory is allocated during the setup phase of `with_phases` (and freed
// only by its teardown, like every setup buffer): `ManagedBuffer`'s constructors need a
// guard that may allocate, and the run-phase guard is not one.
//
// Without it: managed memory would be the one kind of device memory the run phase could
// still allocate.
//
// Fix: allocate the managed buffer in `Phases::setup`.

use cuda_brand::{with_phases, ContextFlags, Device, Error, ManagedBuffer};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let shared = ManagedBuffer::<f32>::zeroed(run, 1024)?;
        drop(shared);
        Ok::<_, Error>(())
    })
}
