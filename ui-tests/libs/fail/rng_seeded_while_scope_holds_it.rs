// Rule: a generator is seeded (and its offset set) through `&mut self`, so never while a
// scope holds it: the scope borrows the generator until it has synchronized.
//
// Without it: a new seed would change the generator's state while a generation queued
// with it may still be running on the GPU, or between two generations the program
// believes are one sequence.
//
// Fix: seed before the scope, or after it returns.

use cuda_brand::curand::Rng;
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut rng = Rng::new(ctx, 1)?;
        let mut out = ctx.zeroed::<f32>(8)?;
        ctx.new_stream()?.scope(|s| {
            rng.uniform(s, &mut out)?;
            // wrong: the scope still holds `rng`
            rng.set_seed(2)
        })
    })
}
