// Rule: a `DeviceBuffer` cannot leave its context's `with_context` closure, not even
// pushed into a collection declared outside it.
//
// The buffer carries the brand `'ctx` (`DeviceBuffer<'ctx, T>`), and `'ctx` exists only
// inside the closure: the outer `Vec`'s element type cannot name it.
//
// Without it: `with_context` destroys the context when the closure returns, and its
// allocations with it, so the buffers would be used, and finally freed, after their
// context. The driver: `cuMemcpyHtoD` into memory of a destroyed context returns
// CUDA_ERROR_INVALID_VALUE (docs/c/destroyed_context.out). rustacuda 0.1.3 lets safe code
// keep such a buffer, copy with it and drop it, and its `Drop` panics when the free fails
// (its source; what happens: bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let mut results = Vec::new();
    with_context(&device, ContextFlags::default(), |ctx| {
        for i in 0..4u32 {
            results.push(DeviceBuffer::from_slice(ctx, &[i; 256])?);
        }
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    for buf in &results {
        println!("{:?}", buf.to_vec()?);
    }
    Ok(())
}
