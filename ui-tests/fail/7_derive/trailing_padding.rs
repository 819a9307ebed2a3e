// Rule: a `#[derive(DeviceCopy)]` struct has no padding after its last field either.
//
// The struct's size is rounded up to a multiple of its alignment (8, for the `u64`): 16
// bytes, of which the last 4 belong to no field. In an array or a buffer every element
// carries those 4 bytes to the GPU as the host left them, leaking host memory into device
// memory.
//
// Fix: end the struct with a field that fills the gap (`_pad: [u8; 4]` or a `u32` you
// use), set to zero.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Event {
    time_ns: u64,
    kind: u32,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _events = ctx.from_slice(&[Event { time_ns: 5, kind: 1 }; 16])?;
        Ok(())
    })
}
