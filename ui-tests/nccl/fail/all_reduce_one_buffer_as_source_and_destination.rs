// Rule: an out-of-place collective takes its source shared and its destination exclusive,
// so they cannot be one buffer; reading and writing one buffer is the `_in_place` form.
//
// Without it: NCCL compares the two pointers to decide between its in-place and
// out-of-place algorithms; the same buffer passed as both would be read while it is
// written by an algorithm that assumes they are apart.
//
// Fix: `comm.all_reduce_in_place(s, &mut x, ReduceOp::Sum)`.

use cuda_brand::nccl::{Clique, ReduceOp};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        let mut x = ctx.from_slice(&[1.0f32; 4])?;
        // wrong: `x` as the source and the destination
        ctx.new_stream()?.scope(|s| comm.all_reduce(s, &mut x, &x, ReduceOp::Sum))
    })
}
