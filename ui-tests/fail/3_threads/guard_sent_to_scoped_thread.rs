// Rule: a `ContextGuard` is not `Send`, so it cannot go to another thread, not even a
// `std::thread::scope` worker that is joined inside the closure. Share the context with
// `ctx.share()` and `shared.enter(|ctx| ...)` in the worker instead.
//
// The driver keeps the current context per thread: the guard's context is current on the
// thread that opened it, not on the worker. `enter` makes it current there and restores
// the worker's previous context afterwards.
//
// Without it: code on the worker that relies on the guard's context being current (raw
// driver calls through `ctx.as_raw()`, a library built on the runtime API) would run in
// whatever context is current on that thread, or in none. On a thread with no context
// current, `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/thread_no_context.out);
// and rustacuda 0.1.3 lets safe code copy into context A's buffer while B is current
// (bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        std::thread::scope(|s| {
            let worker = s.spawn(move || ctx.synchronize());
            worker.join().expect("worker panicked")
        })
    })
}
