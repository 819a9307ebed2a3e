// Rule: no field of a `#[derive(DeviceCopy)]` struct has padding inside it: a field's type
// is a number, an array, a tuple whose fields fill it, or another derived struct.
//
// The tuple `(u8, u32)` is `DeviceCopy` (every bit pattern of its fields is a value), but
// it is 8 bytes for 5 bytes of fields: 3 bytes of padding inside the field, which the
// checks between fields cannot see, carry host memory to the GPU like any other padding.
// A field whose type implements `DeviceCopy` by hand is refused the same way: its impl
// does not promise the absence of padding.
//
// Fix: a derived struct for the pair (`#[repr(C)] struct Entry { value: u32, tag: u8,
// _pad: [u8; 3] }`), or two fields.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Histogram {
    total: u64,
    first: (u8, u32),
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _histograms = ctx.zeroed::<Histogram>(16)?;
        Ok(())
    })
}
