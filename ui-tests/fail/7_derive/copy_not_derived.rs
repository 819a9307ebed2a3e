// Rule: a `DeviceCopy` type is `Copy`; `#[derive(DeviceCopy)]` does not derive it for you.
//
// The crate copies device values to and from the host bytewise (`to_vec`, `copy_to_host`),
// which is only right for `Copy` types: a type with a `Drop` or owned memory would be
// duplicated without its owner knowing.
//
// Fix: derive `Clone` and `Copy` as well: `#[derive(Clone, Copy, DeviceCopy)]`.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, DeviceCopy)]
#[repr(C)]
struct Vec2 {
    x: f32,
    y: f32,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _points = ctx.zeroed::<Vec2>(16)?;
        Ok(())
    })
}
