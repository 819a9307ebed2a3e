// Rule: a stream waits only for a recorded event: `Stream::wait_event` takes the proof of a
// record, the `Recorded` that `Event::record` returns, not an `Event`.
//
// An `Event` says nothing about whether it was ever recorded; the `Recorded` that
// `record` returns does, and it names that record. The error is a plain type mismatch:
// `&Recorded` expected, `&Event` given.
//
// Without it: nothing waits. `cuStreamWaitEvent` on an event never recorded "acts as if the
// record has already completed, and so is a functional no-op" (its documentation): here
// stream `b` would copy `on_device` to the host while stream `a` may still be filling it,
// and `host` could get 0s, 7s or a mix (two streams run independently:
// docs/c/facts/two_streams.out).
//
// Fix: record the event after the work to wait for, and wait for what `record` returns:
// `let filled = done.record(sa)?; sb.wait_event(&filled)?;`.

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        let done = ctx.new_event_without_timing()?;
        let mut on_device = ctx.zeroed::<u32>(1 << 20)?;
        let mut host = vec![0u32; 1 << 20];
        a.scope_pair(&b, |sa, sb| {
            let d = sa.bind_mut(&mut on_device);
            sa.fill(d, 7)?;
            sb.wait_event(&done)?;
            sb.copy_to_host(&mut host, d.into_ref())
        })
    })
}
