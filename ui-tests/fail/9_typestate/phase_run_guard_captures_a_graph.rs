// Rule: a graph is captured with a guard that may create (`P: Allocating`): a plain
// guard, a setup-phase guard or a partition's, never a run-phase guard. A graph captured
// in setup is launched in the run phase (`ExecGraph::launch` takes any stream of the
// context, a preallocated one too).
//
// `ContextGuard::capture` creates a stream of its own to capture on, and the driver
// creates the graph and, at `instantiate`, the executable graph: host and device
// resources made at that moment.
//
// Without it: the run phase, which promises to create nothing (`cuda_brand::phase`),
// would make a stream and a graph each time it captures; either can fail in the middle
// of the run.
//
// Fix: capture in `Phases::setup` and return the `ExecGraph` with what setup built.

use cuda_brand::{ContextFlags, Device, with_phases};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (mut a, run) = phases.setup(|ctx| ctx.zeroed::<u32>(64))?;
        // wrong: a capture in the run phase
        let (graph, ()) = run.capture(|g| g.fill(&mut a, 3))?;
        let _ = graph;
        Ok::<_, cuda_brand::Error>(())
    })
}
