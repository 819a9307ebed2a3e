// Rule: the device's SMs are split once per partitioned closure: the split consumes them.
//
// Without it: the parts of two splits of the same SMs overlap: a partition of the first
// and one of the second would share SMs, and neither would be isolated.
//
// Fix: split once, into as many parts as needed (`Sms::split_groups`).

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (_first, _rest) = sms.split(16)?;
        let (_again, _) = sms.split(16)?; // overlapping parts: does not compile
        Ok::<_, Error>(())
    })
}
