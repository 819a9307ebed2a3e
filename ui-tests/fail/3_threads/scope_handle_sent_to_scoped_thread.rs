// Rule: a stream scope's handle stays on the thread that opened the scope: `StreamScope` is
// not `Sync`, so `&StreamScope` cannot be sent to another thread, not even a scoped thread
// that is joined inside the scope.
//
// The scope carries a marker, `ScopesStayOnTheirThread`, that makes it neither `Send` nor
// `Sync`; rustc's one error begins with the marker's message, the rule. The rule keeps
// the scope's bookkeeping (its stream-ordered allocations, freed when it ends, and the
// order book that a multi-stream scope shares between its streams) and its stream's order
// on one thread, where the scope's closure runs.
//
// Without it: two threads allocating through one scope (`alloc_zeroed`) would race on the
// list, a data race in the crate's own bookkeeping that no driver call can detect, and an
// allocation lost from the list would never be freed. Stream operations themselves may run
// on any thread (they need no context current: docs/c/facts/stream_ops_other_context.out):
// work for another thread goes through its own stream and scope (a
// `Stream` is `Send` and `Sync`).

use cuda_brand::{ContextFlags, Device, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| {
            std::thread::scope(|threads| {
                let worker = threads.spawn(|| s.alloc_zeroed::<u32>(1024).map(drop));
                let here = s.alloc_zeroed::<u32>(1024).map(drop);
                worker.join().expect("worker panicked").and(here)
            })
        })
    })
}
