// Rule: a `SharedContext` cannot be moved into `std::thread::spawn`; only scoped threads
// (`std::thread::scope` inside the closure) can use it.
//
// `SharedContext` is `Send`, so this is not about threads: `spawn` needs a `'static`
// closure, and the brand `'ctx` is not `'static`. A plain thread may outlive the
// `with_context` call; a scoped thread is joined before the closure returns.
//
// Without it: nothing stops the thread from calling `enter` after `with_context` has
// destroyed the context. `cuStreamSynchronize` on a stream of a destroyed context killed
// the process inside libcuda (docs/c/destroyed_context.out); rustacuda 0.1.3 in safe code:
// `Stream::synchronize` after its `Context` is dropped (bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let worker = std::thread::spawn(move || shared.enter(|ctx| ctx.synchronize()));
        worker.join().expect("worker panicked")
    })
}
