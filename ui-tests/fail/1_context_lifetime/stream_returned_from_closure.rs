// Rule: a `Stream` cannot leave the `with_context` closure: it carries the brand of the
// guard it was created with.
//
// Without it: the stream would be synchronized, and finally destroyed, after its context.
// `cuStreamSynchronize` on a stream of a destroyed context killed the process inside
// libcuda (docs/c/destroyed_context.out); rustacuda 0.1.3 allows this in safe code
// (`Stream::synchronize` after its `Context` is dropped:
// bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let stream = with_context(&device, ContextFlags::default(), |ctx| {
        Stream::new(ctx, StreamFlags::NonBlocking)
    })?;
    // the context is destroyed here
    stream.synchronize()
}
