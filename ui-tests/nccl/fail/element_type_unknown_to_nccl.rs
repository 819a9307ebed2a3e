// Rule: collectives take elements of NCCL's data types only (the sealed `NcclType`: `i8`,
// `u8`, `i32`, `u32`, `i64`, `u64`, `f32`, `f64`).
//
// Without it: NCCL's count is in elements of the `ncclDataType_t` given; a type whose size
// differs from the data type's would make NCCL read and write more or fewer bytes than the
// buffers hold.
//
// Fix: widen `u16` to `u32`, or send plain data as bytes (`u8`).

use cuda_brand::nccl::{Clique, ReduceOp};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        // wrong: NCCL has no 16-bit integer type
        let mut x = ctx.from_slice(&[1u16; 4])?;
        ctx.new_stream()?.scope(|s| comm.all_reduce_in_place(s, &mut x, ReduceOp::Sum))
    })
}
