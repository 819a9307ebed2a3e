// Rule: a stream's scope only copies device memory of the stream's own context.
//
// `copy_to_host` takes its source as `DeviceRef<'scope, 'ctx, T>`, with the `'ctx` of the
// stream, and a buffer of context A carries A's brand, which never unifies with B's: the
// brand is invariant, and each `with_context` closure gets a fresh one. rustc reports the
// mismatch from both sides: B's brand would have to leave B's closure (first error), and
// A's brand would have to outlive everything, `'static` (second error).
//
// Without it: the driver queues and runs the copy of A's memory on B's stream without
// complaint: `cuMemcpyDtoHAsync` and the stream's synchronization both return CUDA_SUCCESS
// (measured for this case on an H100, driver 580.159.04), so a buffer of the wrong context
// goes unnoticed (a copy into A's buffer queued on B's stream also succeeds and lands:
// docs/c/cross_context_stream.out). What cudarc 0.19.10 does with the same mix-up,
// `memcpy_htod` on B's stream into A's buffer, then B's `synchronize`:
// bench/examples/peer_crates.out.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx_a| {
        let buf_a = DeviceBuffer::from_slice(ctx_a, &[1u32, 2, 3, 4])?;
        with_context(&device, ContextFlags::default(), |ctx_b| {
            let stream_b = Stream::new(ctx_b, StreamFlags::NonBlocking)?;
            let mut host = [0u32; 4];
            stream_b.scope(|s| s.copy_to_host(&mut host, &buf_a))
        })
    })
}
