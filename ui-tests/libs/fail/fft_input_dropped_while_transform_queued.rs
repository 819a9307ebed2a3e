// Rule: a transform borrows its input until the scope has synchronized the stream: the
// input buffer cannot be dropped (freed) while the transform may still read it.
//
// Without it: `cuMemFree` would return the input's memory to the driver while cuFFT's
// kernel still reads it; the next allocation could reuse it, and the spectrum would be of
// whatever is written there.
//
// Fix: let the input live past the scope (drop it after `scope` returns).
//
// Reading the error: two errors. The first, E0597 "`input` does not live long enough",
// marks the correct transform line, which borrows `input` for the whole scope (`'1`); the
// second, E0505, marks the mistake, the `drop(input)` inside the scope.

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
            // wrong: the transform may still be reading `input`
            drop(input);
            Ok(())
        })
    })
}
