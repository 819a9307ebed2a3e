// Rule: entering a part of a split consumes it: no two partitions are made from the same
// SMs.
//
// Without it: two green contexts over one set of SMs are not isolated from each other: a
// kernel filling one delays the other's as if there were no partitions at all. The driver
// allows it (a green context reserves nothing).
//
// Fix: split the SMs into as many parts as partitions (`Sms::split_groups`), and enter
// each part once.

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, _rest) = sms.split(16)?;
        first.enter(|_a| Ok::<_, Error>(()))?;
        first.enter(|_b| Ok::<_, Error>(())) // the same SMs again: does not compile
    })
}
