// Rule: a `MemoryPool` serves only its own context: a scope of another context cannot
// allocate from it (the pool's brand `'a` is not the scope's `'b`).
//
// Without it: memory from a pool of context A would be handed to the streams of context B
// as if it were B's: on another device it is not even reachable without peer access, and
// the crate's order book and brands would no longer say which context's work uses it.
//
// Fix: create a pool in the context that allocates, or copy between contexts with
// `copy_peer` / `StreamScope::copy_from_peer`.

use cuda_brand::{with_context, ContextFlags, Device, MemoryPool, Stream, StreamFlags};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let pool_a = MemoryPool::new(a)?;
        with_context(&device, ContextFlags::default(), |b| {
            let stream_b = Stream::new(b, StreamFlags::NonBlocking)?;
            stream_b.scope(|s| s.alloc_zeroed_in::<u32>(&pool_a, 1024).map(drop))
        })
    })
}
