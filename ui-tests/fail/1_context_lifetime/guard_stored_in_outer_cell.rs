// Rule: a `ContextGuard` cannot be put into a `Cell` that lives outside the `with_context`
// closure, even though `Cell::set` needs only a shared borrow.
//
// Interior mutability changes nothing: the `Cell`'s content type is fixed outside the
// closure, where the brand `'ctx` does not exist.
//
// Without it: the guard taken out of the `Cell` afterwards would name a destroyed context.
// After destroying the current context, `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT`
// (docs/c/current_context.out); `cuStreamSynchronize` on a stream of a destroyed context
// killed the process inside libcuda (docs/c/destroyed_context.out).

use std::cell::Cell;

use cuda_brand::{ContextFlags, ContextGuard, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let slot: Cell<Option<ContextGuard<'_>>> = Cell::new(None);
    with_context(&device, ContextFlags::default(), |ctx| {
        slot.set(Some(ctx));
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    if let Some(ctx) = slot.get() {
        ctx.synchronize()?;
    }
    Ok(())
}
