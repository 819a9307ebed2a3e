// Rule: the element types of cuBLAS's GEMM are sealed (`f32`, `f64`, `F16`, `Bf16`): the
// type names the `cudaDataType` cuBLAS reads, and so how many bytes it reads per element.
//
// Without it: a user type of 2 bytes claiming `CUDA_R_32F` would make cuBLAS read and write
// twice the buffer's bytes, out of bounds on the GPU.
//
// Fix: use one of the four types; convert other data to them first.

use cuda_brand::DeviceCopy;
use cuda_brand::cublas::GemmType;

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
struct Tiny {
    bits: u16,
}

// wrong: `GemmType` is sealed
impl GemmType for Tiny {
    type Scalar = f32;
    const DATA_TYPE: std::ffi::c_int = 0;
}

fn main() {}
