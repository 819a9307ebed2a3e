// Safety profile: the `sys` module (the driver's handle types, re-exported from
// cuda-driver-sys) is private.
//
// Its types are what the raw handles are; without the handles they only serve to build
// them by other means. A program that names none of them shows that it passes no handle
// of its own to the driver through this crate.
//
// Fix: nothing to replace: the crate's types (`Stream`, `DeviceBuffer`, ...) are the
// handles.

use cuda_brand::sys::CUstream;

fn main() {
    let none: CUstream = std::ptr::null_mut();
    println!("{none:?}");
}
