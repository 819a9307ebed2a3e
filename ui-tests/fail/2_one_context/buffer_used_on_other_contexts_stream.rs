// Rule: a stream of one context cannot copy into a buffer of another context: a stream
// scope binds only buffers of its stream's brand.
//
// `StreamScope::bind_mut` takes a `DeviceSlice<'ctx, T>` with the stream's `'ctx`, and the
// brand is invariant, so context A's buffer does not fit B's stream.
//
// Without it: the driver queues and runs a copy into A's buffer on B's stream, every call
// returning CUDA_SUCCESS, and a launch of A's function on B's stream is
// `CUDA_ERROR_INVALID_HANDLE` (docs/c/cross_context_stream.out). cudarc 0.19.10 with this
// misuse: bench/examples/peer_crates.out.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let mut in_a = DeviceBuffer::<u32>::zeroed(a, 4)?;
        with_context(&device, ContextFlags::default(), |b| {
            let stream_of_b = Stream::new(b, StreamFlags::NonBlocking)?;
            let host = [1u32, 2, 3, 4];
            stream_of_b.scope(|s| {
                let dst = s.bind_mut(&mut in_a);
                s.copy_from_host(dst, &host)
            })
        })?;
        println!("{:?}", in_a.to_vec()?);
        Ok(())
    })
}
