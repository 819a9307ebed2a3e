// Rule: events are created during the setup phase of `with_phases`: `new_event()`,
// `event_without_timing()`, `Event::new` and `Event::without_timing` need a guard that may
// create, and the run-phase guard is not one.
//
// Without it: a control loop that creates an event per pass creates driver objects for as
// long as it runs.
//
// Fix: create the events in `Phases::setup` and record them again in each pass.

use cuda_brand::{with_phases, ContextFlags, Device, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_ctx| Ok::<_, Error>(()))?;
        let event = run.new_event()?;
        drop(event);
        Ok::<_, Error>(())
    })
}
