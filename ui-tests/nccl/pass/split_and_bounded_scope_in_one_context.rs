// The allowed form of `split_communicator_used_on_stream_of_other_context`: a launcher's
// communicator, its split and a bounded scope, all in one context. Runs as a world of one
// (no launcher variables), and returns early without a GPU or NCCL.

use std::time::Duration;

use cuda_brand::nccl::{Communicator, ReduceOp, World};
use cuda_brand::{Device, with_primary_context};

fn main() {
    let Ok(device) = Device::get(0) else { return };
    if cuda_brand::nccl::version().is_err() {
        return;
    }
    let world = World::from_vars(|_| None).unwrap();
    with_primary_context(&device, |ctx| {
        let comm = Communicator::from_world(ctx, &world, Duration::from_secs(30))?;
        let half = comm.split(Some(0), 0)?.unwrap();
        let mut x = ctx.from_slice(&[1.0f32; 4])?;
        let stream = ctx.new_stream()?;
        half.scope_within(&stream, Duration::from_secs(30), |s| {
            half.all_reduce_in_place(s, &mut x, ReduceOp::Sum)
        })?;
        assert_eq!(x.to_vec()?, [1.0; 4]);
        half.finalize()?;
        comm.finalize()
    })
    .unwrap();
}
