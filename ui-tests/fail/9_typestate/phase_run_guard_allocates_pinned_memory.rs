// Rule: page-locked host memory is allocated during the setup phase of `with_phases`:
// `pinned_zeroed`, `pinned_from_slice` and `PinnedBuffer`'s constructors need a guard that
// may allocate, and the run-phase guard is not one.
//
// Without it: `cuMemHostAlloc` locks pages in the operating system, a call whose time
// nothing bounds, in the middle of the run.
//
// Fix: allocate the pinned buffer in `Phases::setup` and reuse it in every pass.

use cuda_brand::{with_phases, ContextFlags, Device, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let host = run.pinned_zeroed::<f32>(1024)?;
        drop(host);
        Ok::<_, Error>(())
    })
}
