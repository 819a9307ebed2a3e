// Allowed: a group inside two scopes (two streams) opened before it, recording an
// operation on each; the scopes synchronize after the group has queued both. Runs with one
// GPU and NCCL (a one-rank clique); returns early without either.

use cuda_brand::nccl::{Clique, ReduceOp, group};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let Ok(device) = Device::get(0) else {
        return Ok(());
    };
    if cuda_brand::nccl::version().is_err() {
        return Ok(());
    }
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        let mut x = ctx.from_slice(&[1.0f32, 2.0])?;
        let src = ctx.from_slice(&[3i64, 4, 5])?;
        let mut y = ctx.zeroed::<i64>(3)?;
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        a.scope(|sa| {
            b.scope(|sb| {
                group(|g| {
                    g.on(sa).all_reduce_in_place(&comm, &mut x, ReduceOp::Max)?;
                    g.on(sb).all_reduce(&comm, &mut y, &src, ReduceOp::Sum)
                })
            })
        })?;
        assert_eq!(x.to_vec()?, [1.0, 2.0]);
        assert_eq!(y.to_vec()?, [3, 4, 5]);
        Ok(())
    })
}
