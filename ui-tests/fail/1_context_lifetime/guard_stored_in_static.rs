// Rule: a `ContextGuard` cannot be stored in a `static`, not even a `static mut` written
// in `unsafe` code.
//
// A `static` holds `'static` data, and the brand `'ctx` of the closure is not `'static`.
// (A safe `static` cannot even be declared for the guard: `Mutex<Option<ContextGuard>>` is
// not `Sync` because the guard is not `Send`. This case uses `static mut` so that the
// brand is the only thing in the way.)
//
// Without it: the guard would outlive its context and be used after `with_context`
// destroyed it. `cuStreamSynchronize` on a stream of a destroyed context killed the
// process inside libcuda (docs/c/destroyed_context.out); after destroying the current
// context, `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out).

use cuda_brand::{ContextFlags, ContextGuard, Device, with_context};

static mut SLOT: Option<ContextGuard<'static>> = None;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        // SAFETY: single-threaded; nothing else reads or writes SLOT meanwhile.
        unsafe { SLOT = Some(ctx) };
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    // SAFETY: as above.
    let saved = unsafe { SLOT };
    match saved {
        Some(ctx) => ctx.synchronize(),
        None => Ok(()),
    }
}
