// Rule: device memory used by queued work cannot be freed.
//
// `StreamScope::copy_from_host` borrows its destination (`&'scope mut DeviceBuffer`) for
// the whole scope, and the scope synchronizes its stream before it returns, so dropping the
// buffer (`cuMemFree`) inside the scope would move it while that borrow is alive. (rustc
// reports it twice: the closure captures `on_device` by value for the `drop`, so the borrow
// also outlives the captured variable.)
//
// Without it: the copy is still queued when the drop runs (a copy from pinned memory
// returns in 0.02 ms: docs/c/async_host_memory.out). Measured for this case (H100, driver
// 580.159.04): `cuMemFree` of the destination, queued behind 13 ms of work, returns
// CUDA_SUCCESS after 14 ms: it silently waits for the device, a stall in the middle of
// asynchronous code, and the copy's result is freed unread. Memory freed in stream order
// does not wait at all, and then queued work reads another allocation's data (see
// `scope_scratch_of_nested_scope_used_by_outer_scope.rs`); `DeviceBuffer`'s `Drop` relies
// on this rule, not on the driver's wait.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let pinned = PinnedBuffer::from_slice(ctx, &[7u32; 1 << 20])?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        stream.scope(|s| {
            s.copy_from_host(&mut on_device, &pinned)?;
            drop(on_device); // the copy may not even have started
            Ok(())
        })
    })
}
