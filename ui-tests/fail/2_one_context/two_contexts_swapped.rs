// Rule: guards of two contexts cannot be swapped with `std::mem::swap`.
//
// `swap` needs two places of one type; the brands of two contexts are different invariant
// lifetimes, so `ContextGuard<'outer>` and `ContextGuard<'inner>` are different types.
//
// Without it: after the swap the outer closure's variable would hold the inner context's
// guard, which outlives the inner `with_context` and names a destroyed context.
// `cuStreamSynchronize` on a stream of a destroyed context killed the process inside
// libcuda (docs/c/destroyed_context.out); after destroying the current context,
// `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |mut outer| {
        with_context(&device, ContextFlags::default(), |mut inner| {
            std::mem::swap(&mut outer, &mut inner);
            inner.synchronize()
        })?;
        // the inner context is destroyed here
        outer.synchronize()
    })
}
