// Rule: pitched 2D memory is allocated during the setup phase of `with_phases` (and freed
// only by its teardown): `DeviceBuffer2D::zeroed` needs a guard that may allocate, and the
// run-phase guard is not one.
//
// Without it: `cuMemAllocPitch` in the run phase, an allocation "dynamic memory only
// during initialization" (AUTOSAR A18-5-7) forbids.
//
// Fix: allocate the 2D buffer in `Phases::setup`.

use cuda_brand::{with_phases, ContextFlags, Device, DeviceBuffer2D, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let tile = DeviceBuffer2D::<f32>::zeroed(run, 640, 480)?;
        drop(tile);
        Ok::<_, Error>(())
    })
}
