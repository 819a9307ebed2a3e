// Rule: a communicator is used by one thread at a time: `Communicator` is `Send` (it may
// move to the thread that drives its device) but not `Sync`.
//
// Without it: two threads could queue operations on one communicator at once; NCCL's
// communicators are not thread-safe (their task queues and sequence numbers would race,
// and the ranks' operations would no longer match).
//
// Fix: one communicator per thread (one rank per device), or move it to the thread that
// uses it.

use cuda_brand::nccl::Clique;
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        std::thread::scope(|t| {
            // wrong: `&comm` on two threads
            t.spawn(|| println!("{}", comm.rank()));
            t.spawn(|| println!("{}", comm.rank()));
        });
        Ok(())
    })
}
