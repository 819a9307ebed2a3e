// Rule: a phase's guard has no `share()`: its phase (`Setup<'s>` here, `Run` too) is not
// `NoPhases`. The shared form of a context hands out a plain guard on other threads.
//
// Without it: a worker thread given the shared form during setup would keep it into the run
// phase (a `SharedContext<'ctx>` carries no phase), enter it there and allocate with the plain
// guard `enter` gives, which the run phase promises never happens.
//
// Fix: make what the workers need in `Phases::setup` and hand them those values; streams,
// buffers and kernels are `Send`.

use cuda_brand::{with_phases, ContextFlags, Device, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (shared, _run) = phases.setup(|setup| Ok::<_, Error>(setup.share()))?; // does not compile
        std::thread::scope(|s| {
            s.spawn(move || shared.enter(|ctx| ctx.zeroed::<u32>(4).map(drop)));
        });
        Ok::<_, Error>(())
    })
}
