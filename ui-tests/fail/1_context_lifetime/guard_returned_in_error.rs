// Rule: a `ContextGuard` cannot leave the closure through the error type either.
//
// `with_context` returns the closure's `Result<R, E>`, and both `R` and `E` are chosen
// outside the closure, so neither can mention the brand `'ctx`. An error type with a
// lifetime parameter gets the lifetime of the caller, not the closure's brand.
//
// Without it: `Err` would carry a guard of a context that `with_context` destroyed on the
// way out. `cuStreamSynchronize` on a stream of a destroyed context killed the process
// inside libcuda (docs/c/destroyed_context.out); after destroying the current context,
// `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out).

use cuda_brand::{ContextFlags, ContextGuard, Device, with_context};

#[derive(Debug)]
enum Failure<'ctx> {
    Cuda(cuda_brand::Error),
    NoPriorities(ContextGuard<'ctx>),
}

impl From<cuda_brand::Error> for Failure<'_> {
    fn from(e: cuda_brand::Error) -> Self {
        Failure::Cuda(e)
    }
}

fn main() {
    let Ok(device) = Device::get(0) else { return };
    let result = with_context(&device, ContextFlags::default(), |ctx| {
        if ctx.stream_priority_range()?.greatest == 0 {
            return Err(Failure::NoPriorities(ctx));
        }
        Ok(())
    });
    // the context is destroyed here
    match result {
        Err(Failure::NoPriorities(ctx)) => println!("{:?}", ctx.synchronize()),
        Err(Failure::Cuda(e)) => println!("{e}"),
        Ok(()) => {}
    }
}
