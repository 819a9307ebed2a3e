// Rule: a 3D copy's destination and source are two different volumes. The destination is
// `volume.region_mut(r)` (or `&mut volume`), which borrows the whole volume exclusively for
// the scope, so the same volume cannot also be the source (`volume.region(r2)`), even for a
// box that does not overlap the destination's.
//
// `copy_3d_from_device` checks each box against its own volume and the two extents
// against each other, but not the two boxes against each other: it relies on this borrow
// (a `Part3DMut` holds `&mut DeviceBuffer3D`, a `Part3D` holds `&DeviceBuffer3D`), which
// makes the two sides two distinct allocations.
//
// Without it: `cuMemcpy3DAsync` on two overlapping boxes of one allocation, of which
// cuda.h says "If overlapping source and destination objects are specified, undefined
// behavior will result": rows old and new mixed in the volume, reported by no call.
//
// Fix: copy through a second volume (`s.copy_3d_from_device(tmp.region_mut(r), volume.region(r2))`,
// then back), or a kernel written for an in-place shift.

use cuda_brand::{ContextFlags, Device, DeviceBuffer3D, Region3D, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut volume = DeviceBuffer3D::<f32>::zeroed(ctx, 8, 8, 4)?;
        let lower = Region3D::new([0, 0, 0], [8, 8, 2]);
        let upper = Region3D::new([0, 0, 1], [8, 8, 2]);
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // wrong: both sides are boxes of `volume`
        stream.scope(|s| s.copy_3d_from_device(volume.region_mut(upper), volume.region(lower)))
    })
}
