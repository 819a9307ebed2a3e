// Rule: a `#[derive(DeviceCopy)]` struct has no `bool` field (nor one inside an array or a
// tuple); `bool` is not `DeviceCopy` (`5_kernels/soundness_bool_in_gpu_memory`).
//
// A kernel may write any byte into the struct, and a `bool` that is neither 0 nor 1 is an
// invalid value: undefined behaviour in safe Rust once the host reads it (the compiler
// assumes a `bool` is 0 or 1). The driver copies bytes; it knows nothing of Rust's types.
//
// Fix: store a `u8` (1 for true, 0 for false) and compare it with 0.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Cell {
    density: f32,
    active: [bool; 4],
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let cell = Cell { density: 1.0, active: [true; 4] };
        let _cells = ctx.from_slice(&[cell; 16])?;
        Ok(())
    })
}
