// Rule: a `ContextGuard` cannot be stored in a `thread_local!`.
//
// A thread-local needs no `Sync`, so the guard's missing `Send` is no obstacle here; but
// a thread-local lives as long as its thread, so it holds `'static` data, and the brand
// `'ctx` of the closure is not `'static`.
//
// Without it: the guard would stay in the thread-local after `with_context` destroyed its
// context. `cuStreamSynchronize` on a stream of a destroyed context killed the process
// inside libcuda (docs/c/destroyed_context.out); after destroying the current context,
// `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out).

use std::cell::Cell;

use cuda_brand::{ContextFlags, ContextGuard, Device, with_context};

thread_local! {
    static SLOT: Cell<Option<ContextGuard<'static>>> = const { Cell::new(None) };
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        SLOT.set(Some(ctx));
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    match SLOT.get() {
        Some(ctx) => ctx.synchronize(),
        None => Ok(()),
    }
}
