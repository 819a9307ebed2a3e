// Rule: a partition's guard cannot leave the closure of `SmGroup::enter`: the partition
// (its green context) is destroyed when the closure returns.
//
// Without it: work queued with the kept guard would go to a destroyed green context
// (a dangling handle in the driver), or, once the device is split again, to SMs that now
// belong to another partition.
//
// Fix: do the partition's work inside its closure; return plain data from it.

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, _rest) = sms.split(16)?;
        let mut kept = None;
        first.enter(|a| {
            kept = Some(a); // the guard leaves its partition: does not compile
            Ok::<_, Error>(())
        })?;
        Ok(())
    })
}
