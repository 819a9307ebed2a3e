// Rule: a helper generic over the guard (`impl Allocates<'ctx>`, the one bound of "any guard
// that may allocate") takes a plain guard, a setup-phase guard and a partition's, but not the
// run-phase guard: `Run` is not `Allocating`, so its guard is not `Allocates`. Making code
// generic opens no way around the phases.
//
// Without it: the helper would allocate device memory in the middle of the run, where the
// setup never accounted for it (and where a safety-critical program promised it would not).
//
// Fix: call the helper in `Phases::setup` and return what it made.

use cuda_brand::prelude::*;
use cuda_brand::{Allocates, with_phases};

/// Uploads `host` with any guard that may allocate.
fn upload<'ctx>(ctx: impl Allocates<'ctx>, host: &[f32]) -> Result<DeviceBuffer<'ctx, f32>> {
    ctx.into_guard().from_slice(host)
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (early, run) = phases.setup(|setup| upload(setup, &[1.0]))?; // fine in setup
        let late = upload(run, &[2.0])?; // the run phase allocates nothing: does not compile
        drop((early, late));
        Ok::<_, Error>(())
    })
}
