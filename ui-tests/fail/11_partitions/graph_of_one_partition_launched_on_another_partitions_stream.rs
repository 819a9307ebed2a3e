// Rule: a graph captured in a partition (`ContextGuard::capture` with the partition's
// guard) carries the partition's brand `'p`, so it is launched on that partition's
// streams only: `ExecGraph::launch` on another partition's scope does not compile.
//
// Without it: the replay would run on the other partition's SMs, against the promise
// that one partition's work does not delay another's, and on memory of the first
// partition that nothing orders with the first partition's streams (two partitions'
// streams are never ordered with each other).
//
// Fix: launch the graph on a stream of the partition that captured it (`a.new_stream()`).

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, second) = sms.split(16)?;
        first.enter(|a| {
            let mut x = a.zeroed::<u32>(64)?;
            let exec = a.capture(|g| g.fill(&mut x, 3))?.0.instantiate()?;
            // wrong: a graph of `a` on a stream of `b`
            second.enter(|b| b.new_stream()?.scope(|s| exec.launch(s)))
        })
    })
}
