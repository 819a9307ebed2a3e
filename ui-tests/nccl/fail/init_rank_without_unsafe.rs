// Rule: joining a communicator that spans processes (`Communicator::init_rank`) is
// `unsafe`: the crate cannot see the other ranks, and the caller promises that they issue
// the same operations, in the same order, with the same counts.
//
// Without it: a rank whose count is larger than this rank's can make NCCL write past the
// end of this rank's buffer, and a rank that skips an operation hangs every other rank.
//
// Fix: `unsafe { Communicator::init_rank(ctx, &id, ranks, rank) }`, with a `// SAFETY:`
// comment saying why the ranks agree (for example: every rank runs this program).

use cuda_brand::nccl::{Communicator, UniqueId};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let id = UniqueId::new()?;
    with_primary_context(&device, |ctx| {
        // wrong: no `unsafe`
        let comm = Communicator::init_rank(ctx, &id, 1, 0)?;
        println!("rank {}", comm.rank());
        Ok(())
    })
}
