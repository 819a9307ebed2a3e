// Rule: a kernel of device B's context takes device A's buffer only through a peer view
// (`PeerAccess::view`), which exists only once peer access is enabled.
//
// Without it: a kernel dereferencing memory of another device with no peer mapping faults
// (an illegal address, a sticky error that poisons the process); between two contexts of
// one device, a kernel of B writing A's memory succeeds silently and writes
// (docs/c/cross_context_kernel.out); cudarc 0.19.10 with the same launch:
// bench/examples/peer_crates.out.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, LaunchConfig, Module, Out, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    with_context(&d0, ContextFlags::default(), |c0| {
        let mut on0 = DeviceBuffer::from_slice(c0, &[1.0f32, 2.0])?;
        with_context(&d1, ContextFlags::default(), |c1| {
            let module = Module::from_ptx(c1, include_str!("../../../kernels/kernels.ptx"))?;
            // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
            let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
            let stream = Stream::new(c1, StreamFlags::NonBlocking)?;
            // wrong: on0 is device 0's memory, with no peer view
            stream.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut on0, 2.0f32)))
        })
    })
}
