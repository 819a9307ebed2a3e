// Rule: a `ContextGuard` cannot be erased into a `Box<dyn Any>` (to smuggle it out of the
// closure and downcast it back).
//
// `Any` is only implemented for `'static` types, because a downcast cannot recover a
// lifetime; the brand `'ctx` is not `'static`.
//
// Without it: the box could leave the closure (its type mentions no brand) and be
// downcast to `ContextGuard<'static>` after the context is destroyed. `cuStreamSynchronize`
// on a stream of a destroyed context killed the process inside libcuda
// (docs/c/destroyed_context.out); rustacuda 0.1.3 in safe code: `Stream::synchronize`
// after its `Context` is dropped (bench/examples/peer_crates.out).

use std::any::Any;

use cuda_brand::{ContextFlags, ContextGuard, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let erased = with_context(&device, ContextFlags::default(), |ctx| {
        let erased: Box<dyn Any> = Box::new(ctx);
        Ok::<_, cuda_brand::Error>(erased)
    })?;
    // the context is destroyed here
    match erased.downcast::<ContextGuard<'static>>() {
        Ok(ctx) => ctx.synchronize(),
        Err(_) => Ok(()),
    }
}
