// Rule: every copy takes the destination first, then the source (as `memcpy`), and a
// source takes only shared views: `&buffer`, `&buffer[range]` or a `DeviceRef`. A
// destination takes only exclusive ones: `&mut buffer`, `&mut buffer[range]` or a
// `DeviceMut`.
//
// `copy_from_device`'s source is `impl IntoDeviceRef<'scope, 'ctx, T>`, which `&mut
// DeviceBuffer` does not implement, so a call that names both buffers `&mut` (here with
// the source first, as NCCL's C API orders them) does not compile: the buffer meant to be
// read would otherwise be overwritten.
//
// Without it: the copy runs the wrong way and the data to keep is lost; the driver cannot
// tell, since both ranges are valid device memory of the right length.
//
// Fix: `s.copy_from_device(&mut out, &input)`: the destination `&mut`, the source `&`.

use cuda_brand::{ContextFlags, Device, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut input = ctx.from_slice(&[1u32, 2, 3, 4])?;
        let mut out = ctx.zeroed::<u32>(4)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // wrong: the source first, and both borrowed `&mut`
        stream.scope(|s| s.copy_from_device(&mut input, &mut out))
    })
}
