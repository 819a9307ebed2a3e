// Rule: a `DeviceBuffer` cannot leave the `with_context` closure: it carries the brand of
// the guard it was allocated with, like every value made from a guard.
//
// Without it: the buffer would be used, and finally freed, after `with_context` destroyed
// its context. `cuMemcpyHtoD` into memory of a destroyed context returns
// `CUDA_ERROR_INVALID_VALUE` (docs/c/destroyed_context.out); rustacuda 0.1.3 allows this
// in safe code: a `DeviceBuffer` kept after its `Context` is dropped, copied with and
// dropped (bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let buffer = with_context(&device, ContextFlags::default(), |ctx| {
        DeviceBuffer::from_slice(ctx, &[1.0f32, 2.0, 3.0])
    })?;
    // the context is destroyed here
    println!("{:?}", buffer.to_vec()?);
    Ok(())
}
