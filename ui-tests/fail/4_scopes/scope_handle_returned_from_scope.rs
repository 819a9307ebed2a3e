// Rule: a stream scope's handle cannot leave the `Stream::scope` closure.
//
// The closure must work for any `'scope` (`for<'scope> FnOnce(&'scope StreamScope<'scope,
// ..>)`), and its result type is chosen outside, so it cannot be `&'scope StreamScope`.
//
// Without it: work queued through the handle after `scope` returned would run after the
// scope's synchronization, while the borrows that were to keep its memory alive have ended.
// A copy from page-locked memory returns in 0.02 ms while the data moves later
// (docs/c/async_host_memory.out): nothing would wait for it before `host` is dropped at
// the end of the closure.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let host = PinnedBuffer::from_slice(ctx, &[1u32; 1 << 20])?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        let s = stream.scope(|s| Ok::<_, cuda_brand::Error>(s))?;
        // the scope has synchronized and ended: nothing waits for this copy
        s.copy_from_host(&mut on_device, &host)?;
        Ok(())
    })
}
