// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): a hand-written `unsafe impl
// DeviceCopy` is `unsafe` code of the program's own, which the lint refuses.
//
// Why: the impl promises that every bit pattern is a valid value and that the type owns
// nothing, and no compiler checks the promise: a `bool` field or padding gets through.
//
// Fix: `#[derive(Clone, Copy, DeviceCopy)]`, which checks the struct and needs no `allow`.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Pair {
    a: f32,
    b: f32,
}

// SAFETY: (the case is about the lint, not the promise)
unsafe impl DeviceCopy for Pair {}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let pairs = ctx.from_slice(&[Pair { a: 1.0, b: 2.0 }; 4])?;
        assert_eq!(pairs.to_vec()?, [Pair { a: 1.0, b: 2.0 }; 4]);
        Ok(())
    })
}
