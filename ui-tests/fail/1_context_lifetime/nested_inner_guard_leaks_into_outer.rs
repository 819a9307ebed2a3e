// Rule: in nested contexts, the inner guard cannot leak into the outer closure (here by
// assignment to a variable of the outer closure).
//
// The inner closure must work for any brand `'inner`, and the outer variable's type is
// fixed in the outer closure, where `'inner` does not exist. (The other direction is
// allowed: the outer guard may be used inside the inner closure, see
// `ui-tests/pass/nested_outer_guard_in_inner.rs`.)
//
// Without it: the outer closure would keep using the inner context after the inner
// `with_context` destroyed it. After destroying the current context no context is current
// and `cuMemAlloc` returns `CUDA_ERROR_INVALID_CONTEXT` (docs/c/current_context.out);
// `cuStreamSynchronize` on a stream of a destroyed context killed the process inside
// libcuda (docs/c/destroyed_context.out).

use cuda_brand::{ContextFlags, Device, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |outer| {
        let mut leaked = None;
        with_context(&device, ContextFlags::default(), |inner| {
            leaked = Some(inner);
            Ok::<_, cuda_brand::Error>(())
        })?;
        // the inner context is destroyed here
        if let Some(inner) = leaked {
            Stream::new(inner, StreamFlags::Default)?.synchronize()?;
        }
        outer.synchronize()
    })
}
