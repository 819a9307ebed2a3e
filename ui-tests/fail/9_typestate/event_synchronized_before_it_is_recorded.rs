// Rule: the host waits only for a recorded event: `synchronize`, `is_complete` and
// `synchronize_within` are methods of `Recorded`, the proof of a record, not of `Event`.
//
// An `Event` that was never recorded has nothing to wait for, so it has no such method.
//
// Without it: the wait returns at once. `cuEventQuery` reports an event never recorded as
// complete (CUDA_SUCCESS, its documentation), and `cuEventSynchronize` returns for it
// without waiting: here the host would read `host` while the copy into it may still run.
//
// Fix: wait for what `record` returns: `let copied = done.record(&stream)?;
// copied.synchronize()?;` (or, simplest, let the scope end: it waits for its stream).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let done = ctx.new_event_without_timing()?;
        let on_device = ctx.from_slice(&[7u32; 1024])?;
        let mut host = vec![0u32; 1024];
        stream.scope(|s| {
            s.copy_to_host(&mut host, &on_device)?;
            done.synchronize()
        })?;
        Ok(())
    })
}
