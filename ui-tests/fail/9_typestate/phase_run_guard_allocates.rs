// Rule: the run phase of `with_phases` allocates nothing: its guard,
// `ContextGuard<'ctx, Run>`, is not `Allocating`, the bound of every method that
// allocates, loads or creates, so calling one with it is that trait's error.
//
// Without it: "dynamic memory only during initialization" (AUTOSAR A18-5-5/A18-5-7,
// MISRA C++:2023 21.6.1) would be a code-review rule instead of a compile error.
//
// Fix: allocate in `Phases::setup` and use the buffer in the run phase.

use cuda_brand::{with_phases, ContextFlags, Device, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let scratch = run.zeroed::<f32>(1024)?;
        drop(scratch);
        Ok(())
    })
}
