// Rule: a collective borrows its communicator until the scope has synchronized the
// stream: the communicator cannot be dropped (destroyed, or handed back to its clique for
// another context to claim) while its work is queued.
//
// Without it: `ncclCommDestroy` would free the rank's NCCL resources (its connection
// buffers, the work queue its kernel reads) while the kernel still runs on them.
//
// Fix: let the communicator live past the scope.

use cuda_brand::nccl::{Clique, ReduceOp};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        let mut x = ctx.from_slice(&[1.0f32; 4])?;
        ctx.new_stream()?.scope(|s| {
            comm.all_reduce_in_place(s, &mut x, ReduceOp::Sum)?;
            // wrong: the all-reduce may still be running
            drop(comm);
            Ok(())
        })
    })
}
