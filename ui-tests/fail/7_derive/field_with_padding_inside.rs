// Rule: no field of a `#[derive(DeviceCopy)]` struct has padding inside it: a field's type
// is a number, an array of such, or another derived struct, whose absence of padding the
// compiler checked.
//
// `Entry` implements `DeviceCopy` by hand: the trait's contract asks it to have no padding,
// but nothing checks the promise, and here it is wrong: 4 + 1 bytes of fields in 8 bytes,
// 3 bytes of padding at its end. Inside `Histogram` they would be padding inside a field,
// which the checks between fields cannot see, and would carry host memory to the GPU like
// any other padding. So the derive accepts no field whose type implements `DeviceCopy` by
// hand, right or wrong.
//
// Fix: derive `DeviceCopy` on the field's type too (which would refuse `Entry` until its
// padding is a field: `_pad: [u8; 3]`), or two fields.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy)]
#[repr(C)]
struct Entry {
    value: u32,
    tag: u8,
}

// SAFETY: (wrong: `Entry` has 3 bytes of padding; the case is about the derive's refusal)
unsafe impl DeviceCopy for Entry {}

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Histogram {
    total: u64,
    first: Entry,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _histograms = ctx.zeroed::<Histogram>(16)?;
        Ok(())
    })
}
