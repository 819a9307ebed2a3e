// Rule: every buffer of a collective belongs to the communicator's context: a buffer of
// device 0 cannot be reduced by device 1's rank.
//
// Without it: device 1's NCCL kernel would read and write device 0's memory (through a
// peer mapping, if there is one; else an illegal address, a sticky error that ends the
// process's use of the GPU).
//
// Fix: allocate the rank's buffers in its own context, and move data between devices with
// the collectives themselves (or `copy_peer`).
//
// Reading the error: two errors, as for every mix of two contexts. The first marks the
// mistake: `on0`, device 0's buffer, "declared here, outside of the closure body", in
// device 1's all-reduce. The second marks a correct line, `clique.communicator(c1)`, where
// `comm1` got device 1's brand (the guide, chapter 9, E0521).

use cuda_brand::nccl::{Clique, ReduceOp};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    let clique = Clique::new(&[d0, d1])?;
    with_primary_context(&d0, |c0| {
        let on0 = c0.from_slice(&[1.0f32; 4])?;
        with_primary_context(&d1, |c1| {
            let comm1 = clique.communicator(c1)?;
            let mut on1 = c1.zeroed::<f32>(4)?;
            // wrong: `on0` is device 0's memory
            c1.new_stream()?.scope(|s| comm1.all_reduce(s, &mut on1, &on0, ReduceOp::Sum))
        })
    })
}
