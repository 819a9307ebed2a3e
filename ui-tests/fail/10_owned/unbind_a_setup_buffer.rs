// Owning layer: `OwnedContext::unbind` takes an unphased guard, so memory of a setup phase
// (which its phase's teardown frees) cannot be owned. Without that, the buffer would be
// freed twice, or used after the `with_phases` teardown freed it.
// Fix: make owned buffers in an owned entry (`home.enter`).
use cuda_brand::owned::OwnedContext;
use cuda_brand::prelude::*;
use cuda_brand::with_phases;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let home = OwnedContext::primary(&device)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), _run) = phases.setup(|setup| {
            let buf = setup.zeroed::<u32>(16)?;
            let _owned = home.unbind(setup, buf)?;
            Ok::<_, cuda_brand::Error>(())
        })?;
        Ok::<_, cuda_brand::Error>(())
    })
}
