// Rule: a communicator split from another (`comm.split(colour, key)`) carries its
// parent's brand `'ctx`: it queues work only on streams of the parent's context, like the
// parent, and cannot leave that context's closure.
//
// Without it: the sub-communicator is NCCL's handle on device 0 (NCCL splits on the
// parent's device); used on device 1's stream, NCCL would launch device 0's kernels there
// (CUDA_ERROR_INVALID_HANDLE, docs/c/cross_context_stream.out), or order the rank's work
// with the wrong device's queue.
//
// Fix: split inside the context the sub-communicator is used in, and use it with that
// context's streams and buffers.

use std::time::Duration;

use cuda_brand::nccl::{Communicator, ReduceOp, World};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let world = World::from_env()?;
    let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    with_primary_context(&d0, |c0| {
        let comm = Communicator::from_world(c0, &world, Duration::from_secs(30))?;
        let half = comm.split(Some(0), 0)?.unwrap();
        with_primary_context(&d1, |c1| {
            let mut x = c1.from_slice(&[1.0f32; 4])?;
            // wrong: device 0's sub-communicator on device 1's stream
            c1.new_stream()?.scope(|s| half.all_reduce_in_place(s, &mut x, ReduceOp::Sum))
        })
    })
}
