// Rule: a cuFFT plan runs only on streams of its own context: the plan, the scope's
// stream and both buffers of a transform share one brand `'ctx`.
//
// Without it: `cufftSetStream` would give context A's plan a stream of context B: the
// plan's kernels and work area are A's, the stream B's (CUDA_ERROR_INVALID_HANDLE, or
// work ordered with the wrong queue).
//
// Fix: make a plan in each context and use that one there.
//
// Reading the error: two errors, as for every mix of two contexts. The first marks the
// mistake: `plan`, context a's plan, "declared here, outside of the closure body", on
// context b's stream. The second marks a correct line, `b.from_slice(..)`, where b's buffer
// got b's brand (the guide, chapter 9, E0521).

use cuda_brand::cufft::{Complex32, Direction, FftPlan};
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let plan = FftPlan::<Complex32, Complex32>::new(a, &[8], 1)?;
        with_context(&device, ContextFlags::default(), |b| {
            let input = b.from_slice(&[Complex32::new(1.0, 0.0); 8])?;
            let mut output = b.zeroed::<Complex32>(8)?;
            // wrong: context a's plan on context b's stream
            b.new_stream()?.scope(|s| plan.exec(s, &mut output, &input, Direction::Forward))
        })
    })
}
