// Rule: a communicator is made with a whole context's guard only: a partition's guard
// (`ContextGuard<'p, Unphased, Partitioned>`) is not `Unpartitioned`, so `Clique::communicator`,
// `Communicator::from_env`, `from_world` and `init_rank` do not take it.
//
// Without it: NCCL makes streams and launches kernels of its own, through the CUDA runtime,
// which knows nothing of green contexts: its proxy and setup work would run on any SM of the
// device, beside the partitions, which reserve nothing against it. (A communicator also needs
// the device's primary context, which a partition's green context is not.)
//
// Fix: run the collectives outside `with_partitions`, in `with_primary_context`.

use cuda_brand::nccl::Clique;
use cuda_brand::{Device, Error, with_partitions};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_partitions(&device, |sms| {
        let (first, _rest) = sms.split(16)?;
        first.enter(|p| {
            let _comm = clique.communicator(p)?; // a partition's guard: does not compile
            Ok::<_, Error>(())
        })
    })
}
