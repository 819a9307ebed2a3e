// Rule: a cuFFT plan cannot outlive its context: `FftPlan<'ctx, I, O>` carries the brand
// of the context it was made in, and nothing branded leaves the `with_context` closure.
//
// Without it: the plan would be run (or destroyed, in its `Drop`: `cufftDestroy`) after
// its context has been destroyed: the plan's work area and kernels belong to that context.
//
// Fix: make and use the plan inside the closure (it can serve any number of scopes
// there), and return plain results.

use cuda_brand::cufft::{Complex32, FftPlan};
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    // wrong: the plan escapes its context's closure
    let plan = with_context(&device, ContextFlags::default(), |ctx| {
        FftPlan::<Complex32, Complex32>::new(ctx, &[8], 1)
    })?;
    println!("{}", plan.input_len());
    Ok(())
}
