// Rule: a `SharedContext` can only go to a scoped thread of a `std::thread::scope` opened
// inside the `with_context` closure, not to one whose scope was opened outside it.
//
// `Scope::spawn` needs the closure to outlive the scope. A scope opened outside joins its
// threads only after `with_context` has returned, and the brand `'ctx` does not live that
// long.
//
// Without it: the worker could still be inside `enter` while `with_context` synchronizes,
// pops and destroys the context, or call `enter` after the destroy. `cuStreamSynchronize`
// on a stream of a destroyed context killed the process inside libcuda
// (docs/c/destroyed_context.out).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    std::thread::scope(|s| {
        with_context(&device, ContextFlags::default(), |ctx| {
            let shared = ctx.share();
            s.spawn(move || shared.enter(|ctx| ctx.synchronize()));
            Ok::<_, cuda_brand::Error>(())
        })
        // the context is destroyed here; the scope joins the worker only after this
    })
}
