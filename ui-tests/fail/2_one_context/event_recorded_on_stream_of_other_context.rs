// Rule: an event is only recorded on a stream of its own context: `Event::record` takes
// `&Stream<'ctx>` with the event's brand.
//
// The stream of context B carries B's brand, which never unifies with A's (the brand is
// invariant, and each `with_context` closure gets a fresh one). rustc reports the mismatch
// from both sides: B's brand would have to leave B's closure (first error), and A's brand
// would have to be `'static` (second error).
//
// Without it: a run-time error. `cuEventRecord` with an event of A and a stream of B
// returns CUDA_ERROR_INVALID_HANDLE (measured for this case on an H100, driver 580.159.04),
// as its documentation says: "hEvent and hStream must be from the same context otherwise
// CUDA_ERROR_INVALID_HANDLE is returned" (docs/c/cross_context_stream.out records both
// this and the launch of A's function on B's stream: CUDA_ERROR_INVALID_HANDLE).

use cuda_brand::{ContextFlags, Device, Event, EventFlags, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx_a| {
        let mut event_a = Event::new(ctx_a, EventFlags::new())?;
        with_context(&device, ContextFlags::default(), |ctx_b| {
            let stream_b = Stream::new(ctx_b, StreamFlags::NonBlocking)?;
            event_a.record(&stream_b)?.synchronize()
        })
    })
}
