// Rule: a `SharedContext` cannot be returned from the `with_context` closure.
//
// `SharedContext<'ctx>` is `Send` and `Sync`, but it carries the same brand `'ctx` as the
// guard it came from, and the closure's result type (chosen outside) cannot mention it.
//
// Without it: `shared.enter(...)` after the closure would push a context that
// `with_context` already destroyed onto the thread's stack and hand out a guard for it.
// `cuStreamSynchronize` on a stream of a destroyed context killed the process inside
// libcuda; a copy into memory of a destroyed context returns `CUDA_ERROR_INVALID_VALUE`
// (both in docs/c/destroyed_context.out).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let shared = with_context(&device, ContextFlags::default(), |ctx| {
        Ok::<_, cuda_brand::Error>(ctx.share())
    })?;
    // the context is destroyed here
    shared.enter(|ctx| ctx.synchronize())
}
