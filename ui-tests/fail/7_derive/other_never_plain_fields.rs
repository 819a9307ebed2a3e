// Rule: a `#[derive(DeviceCopy)]` struct has no `char`, `NonZero*` or raw pointer field;
// each is named with what to store instead.
//
// A `char` must be a Unicode scalar value and a `NonZeroU32` must not be 0: a kernel may
// write any bytes, and an invalid value is undefined behaviour when the host reads it. A
// raw pointer is a host address that a kernel cannot follow (every bit pattern is a
// pointer, but none of them is useful on the GPU, and host code that dereferences what a
// kernel wrote there would need `unsafe` to do so).
//
// Fix: store a `u32` for the character (`char::from_u32` on the host), the plain integer
// for the `NonZeroU32`, and an index into another buffer for the pointer.

use std::num::NonZeroU32;

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Glyph {
    symbol: char,
    id: NonZeroU32,
    next: *const Glyph,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let glyph = Glyph { symbol: 'a', id: NonZeroU32::MIN, next: std::ptr::null() };
        let _glyphs = ctx.from_slice(&[glyph; 4])?;
        Ok(())
    })
}
