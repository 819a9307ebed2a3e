// Rule: the host cannot write memory that a queued copy still reads; 3D copies too.
//
// `StreamScope::copy_3d_from_host` borrows its host volume `&'scope [T]` (here the pinned
// buffer, through `Deref`) for the whole scope, like the 1D and 2D copies, so the buffer
// cannot be borrowed mutably again until the scope has synchronized its stream.
//
// Without it: a copy from page-locked memory is truly asynchronous. Measured (64 MiB
// queued behind ~20 ms of device work): `cuMemcpyHtoDAsync` from pinned memory returned
// after 0.02 ms, and the host's overwrite right after reached the device in part
// (docs/c/async_host_memory.out); `cuMemcpy3DAsync` queues the same way.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer3D, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut pinned = PinnedBuffer::<f32>::zeroed(ctx, 64 * 64 * 8)?;
        let mut volume = DeviceBuffer3D::<f32>::zeroed(ctx, 64, 64, 8)?;
        stream.scope(|s| {
            s.copy_3d_from_host(&mut volume, &pinned, 64, 64)?;
            pinned[0] = 1.0; // the copy engine may not have read element 0 yet
            Ok(())
        })
    })
}
