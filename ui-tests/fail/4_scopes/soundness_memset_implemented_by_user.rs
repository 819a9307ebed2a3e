// Rule: `Memset`, the element types `fill` accepts, is sealed: the 8-, 16- and 32-bit
// numbers and `f32`. A type of your own cannot be filled, even a plain-data one.
//
// `Memset` has a hidden supertrait (`memory::sealed::Sealed`, in a private module of the
// crate) that turns a value into the driver's fill pattern: `cuMemsetD8`, `D16` or `D32`,
// whose width must be the element's size, because `fill` passes the *element count* and
// the driver writes count times the pattern's width. rustc names the hidden supertrait and
// notes that `Memset` is a "sealed trait".
//
// Without it: a pattern narrower than the element fills only the first bytes of the
// buffer, silently; one wider than the element writes past the buffer's end, into
// whatever allocation follows (no error: the driver sees only an address and a count).
//
// Fix: fill with a number the crate knows, or write any value with a copy:
// `s.copy_from_host(d, &vec![Rgba { r: 255, g: 0, b: 0, a: 255 }; n])`.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, DeviceCopy, Memset, Stream, StreamFlags, with_context,
};

/// One pixel.
#[repr(C)]
#[derive(Clone, Copy)]
struct Rgba {
    r: u8,
    g: u8,
    b: u8,
    a: u8,
}

// SAFETY: four bytes, every bit pattern a valid pixel, no padding, owns nothing.
unsafe impl DeviceCopy for Rgba {}

// wrong: a user type may not choose its own fill pattern
impl Memset for Rgba {}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut image = DeviceBuffer::<Rgba>::zeroed(ctx, 1920 * 1080)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| s.fill(&mut image, Rgba { r: 255, g: 0, b: 0, a: 255 }))
    })
}
