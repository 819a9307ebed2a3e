// Rule: a graph is captured with a plain guard only: a partition's guard
// (`ContextGuard<'p, Partitioned>`) has no `capture`, so a partition cannot capture its work
// with its launch attributes (a cooperative launch checked against the device) and replay it.
//
// Without it: the capture's stream would be made with `cuStreamCreate`, not
// `cuGreenCtxStreamCreate`, so the captured kernels would run on any SM of the device, beside
// the partitions, and a cooperative node checked against the whole device's multiprocessors
// would be replayed where only the partition's are meant to run it.
//
// Fix: capture before `with_partitions`, or launch in a scope of the partition's stream
// (`p.stream()?.scope(...)`), which its SMs run.

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, _rest) = sms.split(16)?;
        first.enter(|p| {
            let mut x = p.zeroed::<u32>(256)?;
            let (graph, ()) = p.capture(|g| g.fill(&mut x, 1))?; // wrong: no capture in a partition
            graph.instantiate().map(drop)
        })
    })
}
