// Rule: a library belongs to no context, but a function taken from it does: the one whose
// guard `Library::function`/`Library::kernel` was given. It carries that context's brand,
// so it launches only on that context's streams, with that context's buffers.
//
// Without it: a CUfunction from cuKernelGetFunction is the kernel's copy in the context
// that was current; launched on a stream of another context, cuLaunchKernel returns
// CUDA_ERROR_INVALID_HANDLE at run time (as for modules: docs/c/cross_context_stream.out).
//
// Fix: take the kernel for each context that launches it: `library.kernel(b, "scale")`.
//
// Reading the error: two errors, as for every mix of two contexts. The first marks the
// mistake: `scale`, a kernel of context a, "declared here, outside of the closure body",
// launched on b's stream. The second marks a correct line, `b.from_slice(..)`, where
// `on_b` got b's brand (the guide, chapter 9, E0521).

use cuda_brand::{ContextFlags, Device, LaunchConfig, Library, Out, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let library = Library::from_ptx(include_str!("../../../kernels/kernels.ptx"))?;
    with_context(&device, ContextFlags::default(), |a| {
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { library.kernel::<(Out<f32>, f32)>(a, "scale") }?;
        with_context(&device, ContextFlags::default(), |b| {
            let mut on_b = b.from_slice(&[1.0f32, 2.0])?;
            // wrong: `scale` was taken for context a
            b.new_stream()?.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut on_b, 2.0f32)))
        })
    })
}
