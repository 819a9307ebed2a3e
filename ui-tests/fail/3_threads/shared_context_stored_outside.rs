// Rule: a `SharedContext` cannot be stored in a variable declared outside the
// `with_context` closure.
//
// Being `Send + Sync` does not loosen the brand: the variable's type is fixed outside the
// closure, where `'ctx` does not exist.
//
// Without it: the saved handle would outlive its context, and `enter` would make a
// destroyed context current. `cuStreamSynchronize` on a stream of a destroyed context
// killed the process (docs/c/destroyed_context.out); after destroying the current context,
// `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out).

use cuda_brand::{ContextFlags, Device, SharedContext, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let mut saved: Option<SharedContext<'_>> = None;
    with_context(&device, ContextFlags::default(), |ctx| {
        saved = Some(ctx.share());
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    match saved {
        Some(shared) => shared.enter(|ctx| ctx.synchronize()),
        None => Ok(()),
    }
}
