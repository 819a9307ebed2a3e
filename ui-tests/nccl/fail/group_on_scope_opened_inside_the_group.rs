// Rule: a group's operations go on scopes opened outside the group's closure: the group
// queues them when its closure returns, and every scope they use must still be open then.
//
// Without it: the scope opened inside the group would end first: it would synchronize a
// stream on which nothing was queued yet, and release `x`, which the group's all-reduce
// then reads and writes after `ncclGroupEnd`, with `x` possibly freed.
//
// Fix: open the scope first and the group inside it: `stream.scope(|s| group(|g| ...))`.
//
// Reading the error: "`s` escapes the closure body here", at `g.on(s)`, though `s` is
// stored nowhere: the group `g`, "declared here, outside of the closure body", takes only
// scopes that outlive its closure, and `s` ends inside it. The mistake is the order of the
// two closures (the guide, chapter 9, E0521).

use cuda_brand::nccl::{Clique, ReduceOp, group};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        let mut x = ctx.from_slice(&[1.0f32; 4])?;
        let stream = ctx.new_stream()?;
        group(|g| {
            // wrong: this scope ends before the group queues its operations
            stream.scope(|s| g.on(s).all_reduce_in_place(&comm, &mut x, ReduceOp::Sum))
        })
    })
}
