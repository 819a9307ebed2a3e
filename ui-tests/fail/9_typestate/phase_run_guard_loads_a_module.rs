// Rule: the run phase of `with_phases` loads nothing: a run-phase guard passed where a
// guard that may allocate is needed (here, to JIT-compile a module) does not compile.
//
// Without it: a module JIT-compiled in the middle of a control loop costs milliseconds
// and device memory the setup never accounted for.
//
// Fix: load the module in `Phases::setup`.

use cuda_brand::{with_phases, ContextFlags, Device, Error, Module};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let module = Module::from_ptx(run, ".version 7.0\n.target sm_70\n.address_size 64\n")?;
        drop(module);
        Ok(())
    })
}
