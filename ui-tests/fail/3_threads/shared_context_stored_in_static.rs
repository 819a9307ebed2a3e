// Rule: a `SharedContext` cannot be stored in a `static`, even a thread-safe one.
//
// `SharedContext` is `Send + Sync`, so `Mutex<Option<SharedContext<'static>>>` is a valid
// static; but a `static` holds `'static` data, and the brand `'ctx` of the closure is not
// `'static`.
//
// Without it: any thread could take the handle out of the static after `with_context`
// destroyed the context and `enter` it. `cuStreamSynchronize` on a stream of a destroyed
// context killed the process inside libcuda (docs/c/destroyed_context.out).

use std::sync::Mutex;

use cuda_brand::{ContextFlags, Device, SharedContext, with_context};

static SLOT: Mutex<Option<SharedContext<'static>>> = Mutex::new(None);

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        *SLOT.lock().expect("poisoned") = Some(ctx.share());
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    let saved = SLOT.lock().expect("poisoned").take();
    match saved {
        Some(shared) => shared.enter(|ctx| ctx.synchronize()),
        None => Ok(()),
    }
}
