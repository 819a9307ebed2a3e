// Rule: every field of a `#[derive(DeviceCopy)]` struct is `DeviceCopy`; a struct nested
// in another needs the derive too.
//
// `Vec3` here is `Copy` and `#[repr(C)]`, but nothing says that every bit pattern of it is
// a value and that it owns nothing: that is what `DeviceCopy` promises, and the outer
// derive relies on it for each field. Without the rule, a field of any `Copy` type (a
// `&'static str`, a `NonZeroU32` inside a struct of someone else's crate) could be
// overwritten by a kernel with bytes that are no valid value: undefined behaviour when the
// host reads it back.
//
// Fix: derive `DeviceCopy` on `Vec3` as well (`#[derive(Clone, Copy, DeviceCopy)]`).

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy)]
#[repr(C)]
struct Vec3 {
    x: f32,
    y: f32,
    z: f32,
}

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Particle {
    pos: Vec3,
    mass: f32,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let p = Particle { pos: Vec3 { x: 0.0, y: 0.0, z: 0.0 }, mass: 1.0 };
        let _particles = ctx.from_slice(&[p; 16])?;
        Ok(())
    })
}
