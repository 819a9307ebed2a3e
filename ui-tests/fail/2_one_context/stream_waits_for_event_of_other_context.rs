// Rule: a stream only waits for events of its own context: `Stream::wait_event` takes
// `&Recorded<'_, 'ctx, K>`, the proof of a record of an event with the stream's brand.
//
// The event of context A carries A's brand, which never unifies with B's (the brand is
// invariant, and each `with_context` closure gets a fresh one). rustc reports the mismatch
// from both sides: B's brand would have to leave B's closure (first error), and A's brand
// would have to be `'static` (second error).
//
// Without it: nothing goes wrong in the driver; this rule is the crate's, stricter than
// CUDA. `cuStreamWaitEvent` documents that "hEvent may be from a different context or
// device than hStream", and a stream of B waiting for an event of A returns CUDA_SUCCESS,
// as does the stream's synchronization afterwards (measured for this case on an H100,
// driver 580.159.04). This case pins the current signature; ordering streams of two
// contexts needs an API that takes an event of any live context.

use cuda_brand::{ContextFlags, Device, Event, EventFlags, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx_a| {
        let stream_a = Stream::new(ctx_a, StreamFlags::NonBlocking)?;
        let mut event_a = Event::without_timing(ctx_a, EventFlags::new())?;
        let recorded_a = event_a.record(&stream_a)?;
        with_context(&device, ContextFlags::default(), |ctx_b| {
            let stream_b = Stream::new(ctx_b, StreamFlags::NonBlocking)?;
            stream_b.wait_event(&recorded_a)?;
            stream_b.synchronize()
        })
    })
}
