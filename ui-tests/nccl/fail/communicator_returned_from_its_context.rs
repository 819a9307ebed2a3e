// Rule: a communicator cannot outlive its context: `Communicator<'ctx>` carries the brand
// of the context it was claimed in, and nothing branded leaves the `with_primary_context`
// closure.
//
// Without it: the communicator would be used (or destroyed, in its `Drop`) after the
// context it runs in has been released: NCCL's resources of that rank (its device memory,
// its streams and events) belong to the context.
//
// Fix: use the communicator inside the closure, and return plain results.

use cuda_brand::nccl::Clique;
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    // wrong: the communicator escapes its context's closure
    let comm = with_primary_context(&device, |ctx| clique.communicator(ctx))?;
    println!("rank {}", comm.rank());
    Ok(())
}
