// Rule: a `#[derive(DeviceCopy)]` struct has no padding between its fields.
//
// `#[repr(C)]` starts `value` at a multiple of 4, so the 3 bytes after `tag` belong to no
// field. Copying the struct to the GPU copies them as they are: whatever the host's stack
// or heap held there (a key, another user's data) lands in device memory, where any kernel
// and any later copy back can read it. The driver copies bytes; it cannot tell padding from
// data.
//
// Fix: order the fields from the largest alignment to the smallest (`value` first, then
// `tag`, then `_pad: [u8; 3]` to fill the end), or fill the gap with an explicit
// `_pad: [u8; 3]` field after `tag`, set to zero.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Sample {
    tag: u8,
    value: f32,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _samples = ctx.from_slice(&[Sample { tag: 1, value: 0.5 }; 16])?;
        Ok(())
    })
}
