// Rule: `#[derive(DeviceCopy)]` refuses unions.
//
// Which bytes of a union hold data depends on the field last written: `Bits { half: 1 }`
// writes 2 of its 4 bytes, and copying the union copies the other 2 anyway, as the host
// left them. The derive cannot see which field a program writes, so it cannot promise that no
// host memory goes along, nor that every field of every union is plain data.
//
// Fix: use a struct (a `u32` you reinterpret with `f32::from_bits`, for instance), or, if
// every field is plain data of the union's full size, write
// `unsafe impl DeviceCopy for Bits {}` yourself, after checking the trait's rules.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
union Bits {
    word: u32,
    half: u16,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _bits = ctx.from_slice(&[Bits { word: 1 }; 4])?;
        Ok(())
    })
}
