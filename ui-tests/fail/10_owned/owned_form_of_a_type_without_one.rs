// Rule: `Owned<B>` exists only for the crate's branded types that have an owned form
// (device, pinned and managed buffers, memory pools, streams, events, modules); a
// kernel's is `OwnedKernel<P>`, which keeps its module loaded.
//
// `Owned<B>` moves a value between brands by a cast, which is sound only for a type whose
// brand is a lifetime parameter and nothing else; the crate lists those types itself
// (`Rebrand` is sealed). A borrowed kernel (`Kernel<'m, 'ctx, P>` borrows its module) is
// not one: its owned form must own the module too.
//
// Without it: an "owned" kernel would keep the module's function handle but not the
// module; once the module was unloaded, a launch would use a dangling function handle
// (`CUDA_ERROR_INVALID_HANDLE` at best: docs/c/cross_context_stream.out).
//
// Fix: `OwnedKernel::<P>::new(&Arc::new(owned_module), "name")` (`unsafe`, as
// `Module::kernel` is), or store the module, `OwnedModule`.

use cuda_brand::owned::Owned;
use cuda_brand::{Kernel, Out};

/// A server's kernels, kept between requests.
struct Kernels {
    scale: Owned<Kernel<'static, 'static, (Out<f32>, f32)>>,
}

fn main() {
    let kernels: Option<Kernels> = None;
    assert!(kernels.is_none());
}
