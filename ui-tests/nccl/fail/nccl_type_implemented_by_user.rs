// Rule: `NcclType` is sealed: only the crate maps element types to NCCL's data types.
//
// Without it: a user type could claim a data type of another size (a 16-byte struct as
// `ncclFloat32`), and NCCL would move a quarter of its bytes, or, the other way round,
// write past the end of the buffers.
//
// Fix: send the struct's bytes as `u8`, or its fields as separate buffers.

use cuda_brand::DeviceCopy;
use cuda_brand::nccl::NcclType;

#[derive(Clone, Copy)]
#[repr(C)]
struct Pair {
    a: f64,
    b: f64,
}

// SAFETY: two `f64`s: every bit pattern is a value, and it owns nothing.
unsafe impl DeviceCopy for Pair {}

// wrong: NcclType is sealed
impl NcclType for Pair {}

fn main() {}
