// Rule: a group exists only inside its closure: neither the group nor a scope's handle in
// it (`g.on(s)`) can be kept to record operations after the group has queued its work.
//
// Without it: an operation recorded after `ncclGroupEnd` would never be queued, or would
// be queued in the next group with buffers that are no longer borrowed for it.
//
// Fix: record every operation inside the closure; open another group for more.

use cuda_brand::nccl::{Clique, ReduceOp, group};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        let mut x = ctx.from_slice(&[1.0f32; 4])?;
        ctx.new_stream()?.scope(|s| {
            let mut kept = None;
            group(|g| {
                // wrong: the handle leaves the group's closure
                kept = Some(g.on(s));
                Ok::<_, cuda_brand::Error>(())
            })?;
            kept.unwrap().all_reduce_in_place(&comm, &mut x, ReduceOp::Sum)
        })
    })
}
