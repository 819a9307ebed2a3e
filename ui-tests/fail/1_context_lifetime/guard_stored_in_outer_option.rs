// Rule: a `ContextGuard` cannot be assigned to an `Option` declared outside the
// `with_context` closure.
//
// The variable's type is fixed outside the closure, where the brand `'ctx` does not exist,
// so the guard cannot be stored in it.
//
// Without it: the saved guard would name a context that `with_context` destroyed when the
// closure returned. After destroying the current context, `cuMemAlloc` returns
// `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out); `cuStreamSynchronize` on a
// stream of a destroyed context killed the process (docs/c/destroyed_context.out).

use cuda_brand::{ContextFlags, ContextGuard, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let mut saved: Option<ContextGuard<'_>> = None;
    with_context(&device, ContextFlags::default(), |ctx| {
        saved = Some(ctx);
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    if let Some(ctx) = saved {
        let _buffer = DeviceBuffer::<f32>::zeroed(ctx, 1024)?;
    }
    Ok(())
}
