// Rule: a stream scope's handle cannot be stored in a variable declared outside the
// `Stream::scope` closure.
//
// The handle's type names the scope's lifetime `'scope`, which exists only inside the
// closure (it is higher-ranked and invariant, like a context's brand).
//
// Without it: work queued through the stored handle would run after the scope's final
// synchronization, with nothing keeping the memory it touches alive or unaliased until it
// is done. A copy into page-locked memory returned after 0.02 ms, before its first or
// last element had arrived (docs/c/async_host_memory.out).

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let on_device = DeviceBuffer::from_slice(ctx, &[7u32; 1 << 20])?;
        let mut host = PinnedBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        let mut kept = None;
        stream.scope(|s| {
            kept = Some(s);
            Ok::<_, cuda_brand::Error>(())
        })?;
        if let Some(s) = kept {
            s.copy_to_host(&mut host, &on_device)?;
        }
        // nothing has waited for the copy
        assert_eq!(host[0], 7);
        Ok(())
    })
}
