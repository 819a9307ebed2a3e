// Rule: a `ContextGuard` cannot be returned from the `with_context` closure.
//
// The closure must work for any brand `'ctx` (`for<'ctx> FnOnce(ContextGuard<'ctx>)`), and
// its result type is chosen outside the closure, so it cannot mention `'ctx`.
//
// Without it: `with_context` destroys the context when the closure returns, so the
// returned guard would name a destroyed context. What the driver does with a destroyed
// context's handles: `cuStreamSynchronize` on a stream of a destroyed context killed the
// process inside libcuda (docs/c/destroyed_context.out); `cuMemAlloc` after destroying the
// current context returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out).
// rustacuda 0.1.3 lets safe code do this (`Stream::synchronize` after its `Context` is
// dropped: bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let ctx = with_context(&device, ContextFlags::default(), |ctx| {
        Ok::<_, cuda_brand::Error>(ctx)
    })?;
    // the context is destroyed here
    let stream = Stream::new(ctx, StreamFlags::Default)?;
    stream.synchronize()
}
