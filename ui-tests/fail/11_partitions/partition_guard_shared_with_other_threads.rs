// Rule: a partition's guard has no `share()` (its part, `Partitioned`, is not `Unpartitioned`):
// the shared form of a context hands out a plain guard on other threads, which would queue work
// outside the partition.
//
// Without it: `shared.enter(|ctx| ctx.new_stream())` on a worker thread would make a stream
// with `cuStreamCreate`, whose work the driver does not keep on the partition's SMs.
//
// Fix: give each worker thread a part of the split and let it enter the part itself
// (`SmGroup` is `Send`): its guard, and so its streams, are the partition's.

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, _rest) = sms.split(16)?;
        first.enter(|a| {
            let shared = a.share(); // no shared form of a partition: does not compile
            std::thread::scope(|s| {
                s.spawn(move || shared.enter(|ctx| ctx.synchronize()));
            });
            Ok::<_, Error>(())
        })
    })
}
