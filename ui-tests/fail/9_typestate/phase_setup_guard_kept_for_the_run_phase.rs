// Rule: the setup guard, `ContextGuard<'ctx, Setup<'s>>`, lives only as long as the setup
// closure (`'s`): it cannot be returned from it, so it cannot allocate in the run phase.
//
// Without it: keeping the setup guard would undo the phases: everything it can make
// (buffers, streams, modules) could be made in the run phase after all.
//
// Fix: make everything in the setup closure and return the values, not the guard.

use cuda_brand::{with_phases, ContextFlags, Device, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (setup, _run) = phases.setup(|ctx| Ok::<_, Error>(ctx))?;
        let late = setup.zeroed::<f32>(1024)?;
        drop(late);
        Ok::<_, Error>(())
    })
}
