// Rule: a `MemoryPool` belongs to its context (it is branded `'ctx`): it cannot leave the
// closure, so every buffer and scope allocation it serves is gone before the context is.
//
// Without it: a pool handle kept past its context would let code allocate from a device
// pool through a context that no longer exists (`cuMemAllocFromPoolAsync` needs a live
// stream of the pool's device; the context's streams are destroyed with it).
//
// Fix: create the pool inside the closure that uses it, or keep the context open.

use cuda_brand::{with_context, ContextFlags, Device, MemoryPool};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let pool = with_context(&device, ContextFlags::default(), |ctx| MemoryPool::new(ctx))?;
    drop(pool);
    Ok(())
}
