// Rule: the guard of `OwnedContext::enter` cannot leave its closure, as `with_context`'s
// cannot: the owned context is `'static`, its guard is not.
//
// `enter` makes the context current on this thread for the closure only, and restores
// what was current before when it returns; its guard proves "current here, now", so it
// has a fresh brand that the closure's result cannot mention.
//
// Without it: the guard would be used after `enter` restored the previous context (work
// meant for this context would go to whatever is current), or on another thread, or after
// the last handle tore the context down: after destroying the current context,
// `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out).
//
// Fix: keep the `OwnedContext` (it is `'static`, `Send + Sync` and `Clone`) and enter it
// again wherever a guard is needed.

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let ctx = home.enter(|ctx| Ok::<_, cuda_brand::Error>(ctx))?;
    let buf = ctx.zeroed::<f32>(1024)?;
    drop(buf);
    Ok(())
}
