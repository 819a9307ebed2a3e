// Rule: guards of two contexts have different brands and never unify: a function that
// takes two guards of one brand cannot be given one of each.
//
// The brand `'ctx` is invariant, so `ContextGuard<'outer>` and `ContextGuard<'inner>` are
// different types unless the two lifetimes are the same one, and two `with_context` calls
// never mint the same one. Every value made from a guard (stream, buffer, event) inherits
// its brand, so "same brand" in a signature means "same context".
//
// Without it: code that assumes one context would mix two. A launch of A's function on
// B's stream is `CUDA_ERROR_INVALID_HANDLE` at run time (docs/c/cross_context_stream.out);
// a kernel of B writing A's memory succeeds silently (docs/c/cross_context_kernel.out);
// cudarc 0.19.10 with such a launch: bench/examples/peer_crates.out.

use cuda_brand::{ContextFlags, ContextGuard, Device, with_context};

/// Both guards must be of one context.
fn same<'a>(a: ContextGuard<'a>, b: ContextGuard<'a>) -> cuda_brand::Result<()> {
    a.synchronize()?;
    b.synchronize()
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |outer| {
        with_context(&device, ContextFlags::default(), |inner| same(outer, inner))
    })
}
