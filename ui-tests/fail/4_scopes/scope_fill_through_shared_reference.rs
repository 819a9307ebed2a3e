// Rule: a scope's operation writes only device memory it borrows exclusively: `&mut
// buffer`, `&mut buffer[range]`, or a `DeviceMut` the scope bound (`s.bind_mut(&mut
// buffer)`) or allocated. A shared `&buffer` is for reading.
//
// The destination of `fill`, `copy_from_host` and `copy_from_device` is
// `impl IntoDeviceMut<'scope, 'ctx, T>`, which `&DeviceBuffer` does not implement. The
// exclusive borrow, held until the scope has synchronized, is what keeps the host (and any
// other scope) from reading the buffer while the queued fill writes it.
//
// Without it: the host could read the buffer through another `&` while the fill is still
// queued: a fill on a non-blocking stream returns at once, and the host's synchronous
// read would not wait for it (two non-blocking streams, or a stream and the host, run
// unordered: docs/c/facts/two_streams.out).
//
// Fix: `let mut on_device = ...;` and `s.fill(&mut on_device, 7)`.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let on_device = DeviceBuffer::<u32>::zeroed(ctx, 1024)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| s.fill(&on_device, 7))
    })
}
