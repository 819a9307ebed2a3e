// Rule: only plain data lives in GPU memory: types whose every bit pattern is a value
// (`DeviceCopy`: the numbers, arrays of them, and `#[repr(C)]` structs without padding a
// user marks with `#[derive(DeviceCopy)]` or `unsafe impl DeviceCopy`). `bool` is not.
//
// `DeviceBuffer<'ctx, T>` and every allocation (here `ContextGuard::from_slice`) require
// `T: DeviceCopy`. A kernel may write any bytes into its `Out` buffers, and the host reads
// them back as `T`.
//
// Without it: a kernel that writes 2 into a byte the host reads as `bool` makes an invalid
// value, undefined behaviour in safe Rust (the compiler assumes a `bool` is 0 or 1). The
// driver copies bytes; it knows nothing of Rust's types.
//
// Fix: store a `u8` per flag (`ctx.from_slice(&[1u8, 0, 1])`) and compare with 0.

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _flags = ctx.from_slice(&[true, false, true])?;
        Ok(())
    })
}
