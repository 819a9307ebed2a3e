// Rule: guards of two contexts cannot be put in one `Vec` (or array, or any collection):
// its elements have one type, so one brand.
//
// The brand `'ctx` is invariant, so it cannot be shortened to a lifetime common to both
// contexts: `ContextGuard<'outer>` and `ContextGuard<'inner>` have no common type.
//
// Without it: a collection of "guards of the context" could mix two contexts, and code
// that iterates it would use one context's values with the other. A launch of A's
// function on B's stream is `CUDA_ERROR_INVALID_HANDLE` (docs/c/cross_context_stream.out);
// a kernel of B writing A's memory succeeds silently (docs/c/cross_context_kernel.out).

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |outer| {
        with_context(&device, ContextFlags::default(), |inner| {
            let guards = vec![outer, inner];
            for ctx in guards {
                ctx.synchronize()?;
            }
            Ok(())
        })
    })
}
