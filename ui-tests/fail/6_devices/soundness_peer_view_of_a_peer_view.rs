// Rule: `PeerAccess::view` takes an owned `DeviceBuffer` of the peer context, not a view:
// a view returned by another `PeerAccess::view` cannot be viewed again.
//
// A `PeerAccess<'c0, 'c1>` proves one grant of the driver: contexts `'c0` may use memory
// allocated in `'c1`. `view` relabels a `'c1` buffer as memory of `'c0`. Were it to take
// any `&DeviceSlice<'c1, T>`, the `'c1`-labelled view of a `'c2` buffer (made with a
// `PeerAccess<'c1, 'c2>`) could be relabelled once more, as memory of `'c0`: two grants
// (c0 may access c1, c1 may access c2) combined into one the driver never gave (c0
// accessing c2). The error is a plain type mismatch: `&DeviceBuffer` expected, a
// `&DeviceSlice` (the first view) given.
//
// Without it: `add` runs in `c0` on device 0 and reads device 2's memory, which is not
// mapped for device 0 (peer access was never enabled from c0 to c2): a page fault on the
// GPU, an illegal address, a sticky error that ends the process's CUDA use
// (docs/c/sticky_error.out).
//
// Fix: ask the driver for the grant you need, `c0.enable_peer_access(c2)?`, and view the
// buffer itself: `c0_sees_c2.view(&on2)`. To view part of a buffer, sub-slice the view:
// `&c0_sees_c2.view(&on2)[..512]`.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, In, LaunchConfig, Module, Out, Stream, StreamFlags,
    with_context,
};

fn main() -> cuda_brand::Result<()> {
    let (d0, d1, d2) = (Device::get(0)?, Device::get(1)?, Device::get(2)?);
    with_context(&d0, ContextFlags::default(), |c0| {
        with_context(&d1, ContextFlags::default(), |c1| {
            with_context(&d2, ContextFlags::default(), |c2| {
                let on2 = DeviceBuffer::from_slice(c2, &[1.0f32; 1024])?;
                let c1_sees_c2 = c1.enable_peer_access(c2)?;
                let c0_sees_c1 = c0.enable_peer_access(c1)?;
                let in_c1 = c1_sees_c2.view(&on2)?;
                // wrong: `in_c1` is a view, not a buffer of c1
                let in_c0 = c0_sees_c1.view(in_c1)?;

                let module = Module::from_ptx(c0, include_str!("../../../kernels/kernels.ptx"))?;
                // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*,
                // size_t) reads a and b and writes c, each below the length it is given.
                let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
                let ones = DeviceBuffer::from_slice(c0, &[1.0f32; 1024])?;
                let mut sum = DeviceBuffer::<f32>::zeroed(c0, 1024)?;
                let stream = Stream::new(c0, StreamFlags::NonBlocking)?;
                stream.scope(|s| {
                    s.launch(&add, LaunchConfig::linear(4, 256), (in_c0, &ones, &mut sum))
                })
            })
        })
    })
}
