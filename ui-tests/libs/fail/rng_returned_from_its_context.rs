// Rule: a cuRAND generator cannot outlive its context: `Rng<'ctx>` carries the brand of
// the context it was created in, and nothing branded leaves the `with_context` closure.
//
// Without it: the generator would be used (or destroyed, in its `Drop`:
// `curandDestroyGenerator`) after its context has been destroyed: its state lives in that
// context's device memory.
//
// Fix: create and use the generator inside the closure, and return plain results.

use cuda_brand::curand::Rng;
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    // wrong: the generator escapes its context's closure
    let rng = with_context(&device, ContextFlags::default(), |ctx| Rng::new(ctx, 42))?;
    println!("{:?}", rng.kind());
    Ok(())
}
