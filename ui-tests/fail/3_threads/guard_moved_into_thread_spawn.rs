// Rule: a `ContextGuard` cannot be moved into `std::thread::spawn`.
//
// Two reasons, each enough: the guard is not `Send` (it belongs to the thread that opened
// the context; `ctx.share()` makes the `Send` handle), and `spawn` needs `'static` data
// while the brand `'ctx` is not `'static`. The compiler reports the first.
//
// Without it: the spawned thread is not joined by `with_context`, so it can run after the
// context is destroyed and use a dangling handle. `cuStreamSynchronize` on a stream of a
// destroyed context killed the process inside libcuda (docs/c/destroyed_context.out);
// rustacuda 0.1.3 in safe code: `Stream::synchronize` after its `Context` is dropped
// (bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let worker = with_context(&device, ContextFlags::default(), |ctx| {
        let worker = std::thread::spawn(move || ctx.synchronize());
        Ok::<_, cuda_brand::Error>(worker)
    })?;
    worker.join().expect("worker panicked")
}
