// Rule: a `DeviceMut` bound in one stream's scope cannot be used by the operations of
// another scope opened inside it (on a second stream).
//
// `DeviceMut<'scope, 'ctx, T>` carries its scope's lifetime, invariant and higher-ranked
// like a context's brand: the inner scope's operations take `DeviceMut<'inner, 'ctx, T>`,
// and the two lifetimes never unify. To share memory between two streams, open both with
// `Stream::scope_pair`, which gives both scopes one lifetime and orders the two streams.
//
// Without it: the driver reports nothing. The inner stream's fill is not ordered after the
// outer stream's queued fill and copy of the same memory: two non-blocking streams run
// independently, and a copy into page-locked memory returns long before the data has moved
// (docs/c/facts/two_streams.out, docs/c/async_host_memory.out): `host` may get the 1s, the
// 2s or a mix. The same invariance keeps a nested scope's scratch memory, freed when its
// scope ends, out of the outer scope: `scope_scratch_of_nested_scope_used_by_outer_scope.rs`.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let outer = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let inner = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        let mut host = PinnedBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        outer.scope(|so| {
            let d = so.bind_mut(&mut on_device);
            so.fill(d, 1)?;
            so.copy_to_host(&mut host, d.into_ref())?;
            inner.scope(|si| si.fill(d, 2))
        })
    })
}
