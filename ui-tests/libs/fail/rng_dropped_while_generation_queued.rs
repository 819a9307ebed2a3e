// Rule: a generation borrows its cuRAND generator until the scope has synchronized the
// stream: the generator cannot be dropped while a generation it queued may still run.
//
// Without it: `curandDestroyGenerator` would free the generator's state on the device
// while the queued kernel still reads and advances it.
//
// Fix: let the generator live past the scope.
//
// Reading the error: two errors. The first, E0597 "`rng` does not live long enough", marks
// the correct generation line, which borrows `rng` for the whole scope (`'1`); the second,
// E0505, marks the mistake, the `drop(rng)` inside the scope.

use cuda_brand::curand::Rng;
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let rng = Rng::new(ctx, 42)?;
        let mut out = ctx.zeroed::<f32>(8)?;
        ctx.new_stream()?.scope(|s| {
            rng.normal(s, &mut out, 0.0, 1.0)?;
            // wrong: the generation may still be running
            drop(rng);
            Ok(())
        })
    })
}
