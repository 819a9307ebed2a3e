// Rule: a type in GPU memory has no padding, tuples included: no tuple is `DeviceCopy`.
//
// `(u16, u64)` is 16 bytes for 10 bytes of fields: 6 bytes of padding, whatever the host's
// memory held there, which a copy would carry to the GPU (and which a program reading the
// buffer's bytes as values would read uninitialised). Rust has no trait for "no padding",
// so no impl for tuples could refuse only the padded ones where `cargo check` sees it; and
// Rust chooses a tuple's field order, which no kernel can follow. So the crate implements
// `DeviceCopy` for no tuple, with or without padding.
//
// Fix: a `#[derive(Clone, Copy, DeviceCopy)]` `#[repr(C)]` struct whose padding is a field
// (`struct Entry { value: u64, tag: u16, _pad: [u8; 6] }`), or an array for fields of one
// type (`(u32, u32)` becomes `[u32; 2]`).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _entries = ctx.from_slice(&[(1u16, 2u64); 16])?;
        Ok(())
    })
}
