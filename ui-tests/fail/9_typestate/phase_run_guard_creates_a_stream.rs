// Rule: streams are created during the setup phase of `with_phases` (as
// `Stream<'ctx, Preallocated>`): the run-phase guard is not `Allocating`, so `new_stream()`
// and `Stream::new` do not take it.
//
// Without it: creating a stream allocates driver resources in the middle of the run,
// where the setup never accounted for them.
//
// Fix: create every stream in `Phases::setup` and return it.

use cuda_brand::{with_phases, ContextFlags, Device, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let stream = run.new_stream()?;
        drop(stream);
        Ok::<_, Error>(())
    })
}
