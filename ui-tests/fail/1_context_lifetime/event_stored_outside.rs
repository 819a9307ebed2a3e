// Rule: an `Event` cannot leave its context's `with_context` closure, not even stored in a
// variable declared outside it.
//
// The event carries the brand `'ctx` (`Event<'ctx>`), and `'ctx` exists only inside the
// closure: the outer variable's type cannot name it.
//
// Without it: `with_context` destroys the context when the closure returns, and its events
// with it, so the event would be a dangling handle. The driver on a destroyed context's
// handles: `cuStreamSynchronize` on a stream of a destroyed context killed the process
// inside libcuda (docs/c/destroyed_context.out); rustacuda 0.1.3 in safe code:
// `Stream::synchronize` after its `Context` is dropped (bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, Event, EventFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let mut done = None;
    with_context(&device, ContextFlags::default(), |ctx| {
        done = Some(Event::new(ctx, EventFlags::new())?);
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    drop(done); // cuEventDestroy of an event of a destroyed context
    Ok(())
}
