// Rule: pitched 3D memory is allocated during the setup phase of `with_phases` (and freed
// only by its teardown): `DeviceBuffer3D::zeroed` needs a guard that may allocate, and the
// run-phase guard is not one.
//
// Without it: a volume allocated in the run phase, outside the memory the setup accounted
// for.
//
// Fix: allocate the 3D buffer in `Phases::setup`.

use cuda_brand::{with_phases, ContextFlags, Device, DeviceBuffer3D, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let volume = DeviceBuffer3D::<f32>::zeroed(run, 64, 64, 64)?;
        drop(volume);
        Ok::<_, Error>(())
    })
}
