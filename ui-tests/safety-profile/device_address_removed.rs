// Safety profile: device addresses do not leave the crate: `as_device_ptr` (of
// `DeviceSlice`, `DeviceBuffer`, the scope views and `DeviceBuffer2D`) is private, and
// `DeviceBuffer::into_raw_parts` is removed.
//
// A device address outlives nothing: code holding it can pass it to a kernel or a copy
// after the buffer is freed, or while a scope writes it, and no brand or borrow stops it.
// `into_raw_parts` also leaks the allocation to whoever frees it, or nobody.
//
// Fix: pass the buffer or a view (`&buf`, `&mut buf[..n]`, a scope's `bind_mut`) to the
// crate's copies and launches; they borrow it for as long as the work runs.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let buf = DeviceBuffer::<f32>::zeroed(ctx, 16)?;
        let address = buf.as_device_ptr();
        let (leaked, len) = buf.into_raw_parts();
        println!("{address:#x} {leaked:#x} {len}");
        Ok(())
    })
}
