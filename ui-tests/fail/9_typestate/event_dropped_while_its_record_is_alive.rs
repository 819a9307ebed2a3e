// Rule: an event lives as long as the proofs of its records: a `Recorded` borrows its
// `Event`, so the event cannot be dropped (destroyed) while one is alive.
//
// Without it: the proof would name a destroyed event. `cuStreamWaitEvent` and
// `cuEventSynchronize` on a destroyed handle are undefined: the handle may already belong
// to another event, or to nothing (the same kind of dangling handle as a stream of a
// destroyed context, docs/c/destroyed_context.out).
//
// Fix: keep the event alive until the last use of its `Recorded`: drop it after.

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        let mut done = ctx.new_event_without_timing()?;
        let recorded = done.record(&a)?;
        drop(done);
        b.wait_event(&recorded)?;
        b.synchronize()
    })
}
