// Rule: the guard of `with_primary_context` cannot leave its closure either.
//
// `with_primary_context` has the same `for<'ctx>` closure as `with_context`. The primary
// context is not destroyed by this crate, but it is released after the closure: when no
// one else retains it, the driver destroys it (and a later retain creates a new one).
//
// Without it: the guard would outlive this crate's retain of the primary context.
// `cuStreamSynchronize` on a stream of a destroyed context killed the process inside
// libcuda (docs/c/destroyed_context.out); after destroying the current context,
// `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out).

use cuda_brand::{Device, DeviceBuffer, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let ctx = with_primary_context(&device, |ctx| Ok::<_, cuda_brand::Error>(ctx))?;
    // the primary context is released here
    let buffer = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?;
    println!("{:?}", buffer.to_vec()?);
    Ok(())
}
