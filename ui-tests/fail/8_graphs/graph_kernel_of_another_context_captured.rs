// Rule: work of another context cannot be captured: every operation of a capture takes
// only values branded with the capture's context (here the kernel is of context a, the
// capture of context b).
//
// Without it: the driver refuses a launch of A's function on B's stream
// (CUDA_ERROR_INVALID_HANDLE, docs/c/cross_context_stream.out), and a graph of B holding
// A's memory would outlive A's brand.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let module = a.module_from_ptx(include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        with_context(&device, ContextFlags::default(), |b| {
            let mut on_b = b.zeroed::<f32>(1024)?;
            let (_graph, ()) = b.capture(|g| {
                // wrong: `scale` belongs to context a
                g.launch(&scale, LaunchConfig::linear(4, 256), (&mut on_b, 2.0f32))
            })?;
            Ok(())
        })
    })
}
