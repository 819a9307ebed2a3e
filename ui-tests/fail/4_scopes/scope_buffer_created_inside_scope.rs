// Rule: every buffer a scope's operation touches must live for the whole scope, so a
// `DeviceBuffer` created inside the scope's closure cannot be used by its operations.
//
// `StreamScope::copy_from_host` takes `impl Into<DeviceMut<'scope, 'ctx, T>>`, a borrow for
// `'scope`, and `'scope` outlasts the closure's body: a local of the body is dropped
// (`cuMemFree`) before the scope synchronizes. For scratch memory, use
// `StreamScope::alloc_zeroed`, freed in stream order when the scope ends.
//
// Without it: the buffer would be freed while the copy into it is still queued (a copy from
// pinned memory returns in 0.02 ms: docs/c/async_host_memory.out). Measured for this case
// (H100, driver 580.159.04): `cuMemFree` with a copy into the memory queued behind 13 ms of
// work returns CUDA_SUCCESS after 14 ms, silently waiting for the device: a stall where the
// code meant to overlap, and a copy whose result nobody can read.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let host = PinnedBuffer::from_slice(ctx, &[7u32; 1 << 20])?;
        stream.scope(|s| {
            let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
            s.copy_from_host(&mut on_device, &host)?;
            Ok(())
        }) // `on_device` was freed before this synchronization
    })
}
