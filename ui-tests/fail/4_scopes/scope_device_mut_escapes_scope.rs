// Rule: a `DeviceMut` (write access bound with `StreamScope::bind_mut`) cannot leave its
// scope.
//
// `DeviceMut<'scope, 'ctx, T>` names the scope's lifetime, which exists only inside the
// `Stream::scope` closure (higher-ranked and invariant), so the closure cannot return it.
//
// Without it: `DeviceMut` is a `Copy` handle to device memory whose borrow of the buffer
// ends with the scope. Outside, the buffer may be dropped while the handle still holds its
// address. Measured (H100, driver 580.159.04): the next allocation of the same size gets
// the same address, and a copy through the stale one returns CUDA_SUCCESS with the new
// allocation's data.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1024)?;
        let d = stream.scope(|s| {
            let d = s.bind_mut(&mut on_device);
            s.fill(d, 7)?;
            Ok::<_, cuda_brand::Error>(d)
        })?;
        println!("{:?}", d);
        Ok(())
    })
}
