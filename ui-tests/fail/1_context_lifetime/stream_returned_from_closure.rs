// Rule: a `Stream` cannot leave the `with_context` closure: it carries the brand of the
// guard it was created with.
//
// Without it: the stream would be synchronized, and finally destroyed, after its context.
// shared/gpu/FACTS.md: `cuStreamSynchronize` on a stream of a destroyed context is a
// segmentation fault inside libcuda; rustacuda 0.1.3 allows this in safe code:
// "`Stream::synchronize` after its `Context` is dropped, all safe code: segmentation fault
// (exit 139)".

use cuda_brand::{ContextFlags, Device, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let stream = with_context(&device, ContextFlags::default(), |ctx| {
        Stream::new(ctx, StreamFlags::NonBlocking)
    })?;
    // the context is destroyed here
    stream.synchronize()
}
