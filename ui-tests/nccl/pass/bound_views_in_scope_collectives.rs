// Allowed: one buffer bound to a scope (`bind_mut`) and used by several collectives of the
// scope, which run in order on its stream; an in-place and an out-of-place form on
// distinct parts. Runs with one GPU and NCCL; returns early without either.

use cuda_brand::nccl::{Clique, ReduceOp};
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
        let mut buf = ctx.from_slice(&[1u32, 2, 3, 4])?;
        let mut host = vec![0u32; 4];
        ctx.new_stream()?.scope(|s| {
            let d = s.bind_mut(&mut buf);
            comm.all_reduce_in_place(s, d.slice(..2), ReduceOp::Sum)?;
            comm.all_reduce(s, d.slice(2..), d.slice(..2).into_ref(), ReduceOp::Sum)?;
            s.copy_to_host(&mut host, d.into_ref())
        })?;
        assert_eq!(host, [1, 2, 1, 2]);
        Ok(())
    })
}
