// Rule: `#[derive(DeviceCopy)]` refuses generic structs.
//
// Whether a generic struct has padding depends on its parameters: `Pair<u32>` has none,
// `Pair2<u8, u32>` would have 3 bytes. A derive sees the struct once, not every use of it,
// so it cannot check each `Pair<T>` for padding at compile time; and the contract asks for
// the check for every `T`.
//
// Fix: derive on a struct with concrete field types, one per element type you need
// (`struct PairU32 { a: u32, b: u32 }`).

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Pair<T> {
    a: T,
    b: T,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _pairs = ctx.zeroed::<Pair<u32>>(16)?;
        Ok(())
    })
}
