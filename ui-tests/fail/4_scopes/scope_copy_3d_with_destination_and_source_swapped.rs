// Rule: a 3D copy takes the destination first, then the source, as every copy; the
// source is all of a buffer (`&volume`) or a box of it (`volume.region(r)`), shared only,
// the destination `&mut volume` or `volume.region_mut(r)`.
//
// `copy_3d_from_device`'s source is `impl Into<Part3D<'scope, 'ctx, T>>`, which `&mut
// DeviceBuffer3D` does not implement, so a call that names both volumes `&mut` with the
// source first does not compile.
//
// Without it: the copy overwrites the volume meant to be read; both are valid buffers of
// one shape, so nothing at run time can tell.
//
// Fix: `s.copy_3d_from_device(&mut out, &input)`.

use cuda_brand::{ContextFlags, Device, DeviceBuffer3D, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut input = DeviceBuffer3D::<f32>::zeroed(ctx, 8, 8, 2)?;
        let mut out = DeviceBuffer3D::<f32>::zeroed(ctx, 8, 8, 2)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // wrong: the source first, and both borrowed `&mut`
        stream.scope(|s| s.copy_3d_from_device(&mut input, &mut out))
    })
}
