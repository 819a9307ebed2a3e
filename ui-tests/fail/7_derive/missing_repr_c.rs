// Rule: `#[derive(DeviceCopy)]` needs `#[repr(C)]` (or `#[repr(transparent)]`) on the
// struct.
//
// Without it Rust chooses the order of the fields and the padding between them (it may
// put `mass` first, or reorder them in a later compiler version), so a kernel reading the
// buffer as CUDA C's `struct Particle { float pos[3]; float mass; unsigned id; }` would read
// the fields at other offsets: wrong values, without any error. The derive also could not
// check the struct for padding.
//
// Fix: add `#[repr(C)]` above the struct.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
struct Particle {
    pos: [f32; 3],
    mass: f32,
    id: u32,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let p = Particle { pos: [0.0; 3], mass: 1.0, id: 7 };
        let _particles = ctx.from_slice(&[p; 16])?;
        Ok(())
    })
}
