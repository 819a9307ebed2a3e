// Rule: a `DeviceBuffer` cannot leave the `with_context` closure: it carries the brand of
// the guard it was allocated with, like every value made from a guard.
//
// Without it: the buffer would be used, and finally freed, after `with_context` destroyed
// its context. shared/gpu/FACTS.md: `cuMemcpyHtoD` into memory of a destroyed context
// returns `CUDA_ERROR_INVALID_VALUE`; rustacuda 0.1.3 allows this in safe code: "keep a
// `DeviceBuffer` after its `Context` is dropped: `copy_to`/`copy_from` return
// `Err(InvalidContext)`; dropping the buffer panics in `Drop`".

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
