// Rule: only events that record timestamps are timed: `Recorded::elapsed` needs both
// records to be of events of kind `Timing` (the bound `Timed`), and an event made by
// `ctx.new_event_without_timing()` is an `Event<'ctx, NoTiming>`.
//
// Whether an event records timestamps is its type, chosen where it is made, so timing an
// event made for ordering streams is found by the compiler, at the call, with the crate's
// message.
//
// Without it: a run-time error. `cuEventElapsedTime` returns CUDA_ERROR_INVALID_HANDLE "if
// either event was created with the CU_EVENT_DISABLE_TIMING flag" (its documentation), after
// the work being timed has run.
//
// Fix: make the events you time with `ctx.new_event()` (or `Event::new`): kind `Timing`.

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let mut buf = ctx.zeroed::<u8>(64 << 20)?;
        let (mut start, mut end) = (ctx.new_event_without_timing()?, ctx.new_event_without_timing()?);
        let (t0, t1) = stream.scope(|s| {
            let t0 = start.record(s)?;
            s.fill(&mut buf, 7u8)?;
            end.record(s).map(|t1| (t0, t1))
        })?;
        println!("64 MiB fill: {:?}", t0.elapsed(&t1)?);
        Ok(())
    })
}
