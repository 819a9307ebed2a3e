// Rule: a `#[derive(DeviceCopy)]` struct has no reference field.
//
// A reference is an address in the host's memory, which a kernel has no business
// following, and a kernel may write any bytes over it: a null or dangling `&'static str`
// that safe host code then reads is undefined behaviour.
//
// Fix: keep the data in a buffer of its own, and store an index into it (a `u32`).

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Label {
    name: &'static str,
    score: f32,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _labels = ctx.from_slice(&[Label { name: "a", score: 1.0 }; 4])?;
        Ok(())
    })
}
