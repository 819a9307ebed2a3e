// Rule: a communicator queues work only on streams of its own context: the scope's
// stream, the communicator and every buffer of an operation share one brand `'ctx`.
//
// Without it: NCCL would launch device 0's rank on a stream of device 1. The kernel's
// function and the stream belong to different contexts (the driver answers
// CUDA_ERROR_INVALID_HANDLE, docs/c/cross_context_stream.out), or, where it runs, the
// rank's work is ordered with the wrong device's queue.
//
// Fix: claim device 1's rank inside device 1's context (`clique.communicator(c1)`) and use
// that one there.

use cuda_brand::nccl::{Clique, ReduceOp};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    let clique = Clique::new(&[d0, d1])?;
    with_primary_context(&d0, |c0| {
        let comm0 = clique.communicator(c0)?;
        with_primary_context(&d1, |c1| {
            let mut x = c1.from_slice(&[1.0f32; 4])?;
            // wrong: device 0's communicator on device 1's stream
            c1.new_stream()?.scope(|s| comm0.all_reduce_in_place(s, &mut x, ReduceOp::Sum))
        })
    })
}
