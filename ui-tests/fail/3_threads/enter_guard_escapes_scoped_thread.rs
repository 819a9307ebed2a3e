// Rule: the guard that `SharedContext::enter` hands a scoped worker cannot be sent back to
// the spawning thread through `join()`: like every `ContextGuard`, it is not `Send`.
//
// `Scope::spawn` needs the worker's result to be `Send`. Send plain data back, or the
// `SharedContext` itself.
//
// Without it: the spawning thread would hold a guard that `enter` made for the worker's
// current-context stack and has already popped there. Code relying on the guard's context
// being current on its thread (raw driver calls through `ctx.as_raw()`) would run in
// another context or in none. With no context current, `cuMemAlloc` returns
// `CUDA_ERROR_INVALID_CONTEXT` (docs/c/thread_no_context.out); rustacuda 0.1.3 lets safe
// code copy into context A's buffer while B is current (bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let from_worker = std::thread::scope(|s| {
            let worker = s.spawn(move || shared.enter(|ctx| Ok::<_, cuda_brand::Error>(ctx)));
            worker.join().expect("worker panicked")
        })?;
        from_worker.synchronize()
    })
}
