// Rule: a `ContextGuard` cannot be stored in a `Vec` that lives outside the `with_context`
// closure.
//
// The `Vec` is declared outside, so its element type is fixed outside, where the brand
// `'ctx` of the closure does not exist: pushing the guard would let it outlive the closure.
//
// Without it: the guards in the `Vec` would name contexts that `with_context` has already
// destroyed. The driver does not catch that reliably: `cuStreamSynchronize` on a stream of
// a destroyed context killed the process inside libcuda (docs/c/destroyed_context.out),
// and rustacuda 0.1.3 allows it in safe code (`Stream::synchronize` after its `Context` is
// dropped: bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, ContextGuard, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let mut guards: Vec<ContextGuard<'_>> = Vec::new();
    with_context(&device, ContextFlags::default(), |ctx| {
        guards.push(ctx);
        Ok::<_, cuda_brand::Error>(())
    })?;
    // every context is destroyed here
    for ctx in guards {
        ctx.synchronize()?;
    }
    Ok(())
}
