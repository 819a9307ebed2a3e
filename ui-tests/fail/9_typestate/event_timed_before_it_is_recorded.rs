// Rule: only recorded events are timed: `Recorded::elapsed` takes the proof of the end
// record, the `Recorded` that `Event::record` returns, not an `Event`.
//
// `end` is never recorded here; its type says so, and the call does not type-check: `&Recorded`
// expected, `&Event` given.
//
// Without it: a run-time error after the work has run. `cuEventElapsedTime` returns
// CUDA_ERROR_INVALID_HANDLE "if cuEventRecord() has not been called on either event" (its
// documentation); and an event recorded in an earlier round would time the wrong interval.
//
// Fix: record `end` after the work, and time the two records:
// `let t1 = end.record(s)?; ... t0.elapsed(&t1)?`.

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let mut buf = ctx.zeroed::<u8>(64 << 20)?;
        let (mut start, end) = (ctx.new_event()?, ctx.new_event()?);
        let t0 = stream.scope(|s| {
            let t0 = start.record(s)?;
            s.fill(&mut buf, 7u8)?;
            Ok::<_, cuda_brand::Error>(t0)
        })?;
        println!("64 MiB fill: {:?}", t0.elapsed(&end)?);
        Ok(())
    })
}
