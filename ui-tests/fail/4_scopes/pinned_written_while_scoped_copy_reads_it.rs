// Rule: the host cannot write memory that a queued copy still reads.
//
// `StreamScope::copy_from_host` borrows its source `&'scope [T]` (here the pinned buffer,
// through `Deref`) for the whole scope, so the buffer cannot be borrowed mutably again
// until the scope has synchronized its stream.
//
// Without it: a copy from page-locked memory is truly asynchronous. Measured (64 MiB
// queued behind ~20 ms of device work): `cuMemcpyHtoDAsync` from pinned memory returned
// after 0.02 ms, and the host's overwrite right after reached the device in part
// (docs/c/async_host_memory.out); a registered Vec: docs/c/facts/registered_host_memory.out.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut pinned = PinnedBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        stream.scope(|s| {
            s.copy_from_host(&mut on_device, &pinned)?;
            pinned[0] = 1; // the copy engine may not have read element 0 yet
            Ok(())
        })
    })
}
