// Rule: a `Stream` cannot leave its context's `with_context` closure, not even stored in
// a variable declared outside it.
//
// The stream carries the brand `'ctx` (`Stream<'ctx>`), and `'ctx` exists only inside
// the closure: the outer variable's type cannot name it.
//
// Without it: `with_context` destroys the context when the closure returns, and its
// streams with it. The driver: `cuStreamSynchronize` on a stream of a destroyed context
// killed the process inside libcuda (docs/c/destroyed_context.out). rustacuda 0.1.3 lets
// safe code do exactly this (`Stream::synchronize` after its `Context` is dropped:
// bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let mut kept = None;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.synchronize()?;
        kept = Some(stream);
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    if let Some(stream) = &kept {
        stream.synchronize()?;
    }
    Ok(())
}
