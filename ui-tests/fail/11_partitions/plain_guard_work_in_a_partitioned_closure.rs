// Rule: inside `with_partitions` there is no plain guard: a partition's guard is a
// `ContextGuard<'p, Unphased, Partitioned>` (its part is `Partitioned`, not `Whole`), which code
// written for a plain guard, `ContextGuard<'ctx>`, does not take.
//
// Without it: the helper would create a stream with `cuStreamCreate` and queue its work on
// every SM of the device, beside the partitions: the green contexts reserve nothing, so
// that work would delay the latency-critical partition as if there were no partitions.
//
// Fix: make the helper generic over the guard where it only needs what partitions offer
// (`fn warm_up<'ctx>(ctx: impl Allocates<'ctx>)`, then `ctx.into_guard().stream()`), so that
// with a partition's guard its streams are the partition's; or do the work before
// `with_partitions`.

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

/// Written for a plain context: its stream runs on any SM.
fn warm_up(ctx: ContextGuard<'_>) -> cuda_brand::Result<()> {
    let stream = ctx.new_stream()?;
    stream.synchronize()
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, _rest) = sms.split(16)?;
        first.enter(|a| warm_up(a)) // a partition's guard is not a plain guard
    })
}
