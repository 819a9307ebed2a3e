// Safety profile: `#[derive(DeviceCopy)]` (feature `derive`) is allowed under
// `#![deny(unsafe_code)]` without an `allow` of the program's own: the derive checks the
// struct (repr, plain-data fields, no padding) and marks its generated `unsafe impl` with
// `#[allow(unsafe_code)]`. (A hand-written `unsafe impl DeviceCopy` is refused:
// `ui-tests/safety-profile/hand_written_device_copy.rs`.) Returns early without a GPU.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
struct Pair {
    a: f32,
    b: f32,
}

/// Derived structs nest.
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
struct Segment {
    from: Pair,
    to: Pair,
}

fn main() -> cuda_brand::Result<()> {
    let Ok(device) = Device::get(0) else {
        return Ok(()); // no GPU here: compiling is the test
    };
    with_context(&device, ContextFlags::default(), |ctx| {
        let pairs = ctx.from_slice(&[Pair { a: 1.0, b: 2.0 }; 4])?;
        assert_eq!(pairs.to_vec()?, [Pair { a: 1.0, b: 2.0 }; 4]);
        let segment = Segment { from: Pair { a: 0.0, b: 1.0 }, to: Pair { a: 2.0, b: 3.0 } };
        let segments = ctx.from_slice(&[segment; 2])?;
        assert_eq!(segments.to_vec()?, [segment; 2]);
        Ok(())
    })
}
