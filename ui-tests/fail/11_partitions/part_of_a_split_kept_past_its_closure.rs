// Rule: the parts of a split cannot leave the closure of `with_partitions`.
//
// Without it: a part kept for later could be entered after `with_partitions` has given the
// device back, while another `with_partitions` has split the device again: two partitions
// over the same SMs, and neither is isolated from the other.
//
// Fix: enter every part inside the closure of `with_partitions`.

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let part = with_partitions(&device, |sms| {
        let (first, _rest) = sms.split(16)?;
        Ok::<_, Error>(first) // the part leaves its split: does not compile
    })?;
    part.enter(|_a| Ok::<_, Error>(()))
}
