// Rule: memory a scope allocates (`StreamScope::alloc_zeroed`) cannot be used by the
// operations of an enclosing scope on another stream.
//
// The allocation is a `DeviceMut<'inner, 'ctx, T>` of the inner scope; the outer scope's
// operations take `DeviceRef<'outer, 'ctx, T>`, and the two scope lifetimes never unify
// (both are higher-ranked and invariant, like a context's brand).
//
// Without it: the inner scope frees its allocations in the inner stream's order
// (`cuMemFreeAsync`) when it ends, while the outer stream's copy from that memory is still
// queued. Measured for this case (H100, driver 580.159.04), with the same driver calls: the
// next `cuMemAllocAsync` of the same size got the same address and was set to 9, and the
// outer stream's copy, which was meant to read the scratch memory's 5s, delivered 9s; every
// call returned CUDA_SUCCESS.

use cuda_brand::{ContextFlags, Device, PinnedBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let outer = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let inner = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut host = PinnedBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        outer.scope(|so| {
            inner.scope(|si| {
                let scratch = si.alloc_zeroed::<u32>(1 << 20)?;
                so.copy_to_host(&mut host, scratch.into_ref())
            }) // `scratch` is freed here, on the inner stream
        })
    })
}
