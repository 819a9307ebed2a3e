// Rule: a transform borrows its cuFFT plan until the scope has synchronized the stream:
// the plan cannot be dropped while a transform it queued may still run.
//
// Without it: `cufftDestroy` would free the plan's work area while the queued transform
// still uses it.
//
// Fix: let the plan live past the scope.
//
// Reading the error: two errors. The first, E0597 "`plan` does not live long enough", marks
// the correct transform line, which borrows `plan` for the whole scope (`'1`); the second,
// E0505, marks the mistake, the `drop(plan)` inside the scope.

use cuda_brand::cufft::{Complex32, Direction, FftPlan};
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let plan = FftPlan::<Complex32, Complex32>::new(ctx, &[8], 1)?;
        let input = ctx.from_slice(&[Complex32::new(1.0, 0.0); 8])?;
        let mut output = ctx.zeroed::<Complex32>(8)?;
        ctx.new_stream()?.scope(|s| {
            plan.exec(s, &mut output, &input, Direction::Forward)?;
            // wrong: the transform may still be running
            drop(plan);
            Ok(())
        })
    })
}
