// Allowed: the ordinary round trip through page-locked memory. Inside one scope: upload
// from a pinned buffer, download into another; after the scope (which synchronized the
// stream) the host reads the result.
//
// Both copies are truly asynchronous with pinned memory (they return in 0.02 ms:
// docs/c/async_host_memory.out), so the scope borrows both host buffers and the device
// buffer until its synchronization; after it, all three are free again.

use cuda_brand::{ContextFlags, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context};

fn main() {
    let Ok(device) = cuda_brand::Device::get(0) else {
        return;
    };
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let upload = PinnedBuffer::from_slice(ctx, &(0..4096u32).collect::<Vec<_>>())?;
        let mut download = PinnedBuffer::<u32>::zeroed(ctx, 4096)?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 4096)?;
        stream.scope(|s| {
            let d = s.bind_mut(&mut on_device);
            s.copy_from_host(d, &upload)?;
            s.copy_to_host(&mut download, d.into_ref())?;
            Ok::<_, cuda_brand::Error>(())
        })?;
        // synchronized: the host may read `download` and reuse `upload`
        assert_eq!(&download[..], &upload[..]);
        assert_eq!(on_device.to_vec()?, &upload[..]);
        Ok::<_, cuda_brand::Error>(())
    })
    .expect("round trip through pinned memory");
}
