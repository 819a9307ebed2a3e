// Rule: host memory that a queued copy reads cannot be freed before the copy is done.
//
// `StreamScope::copy_from_host` borrows its source `&'scope [T]` for the whole scope, and
// the scope synchronizes its stream before it returns; dropping the pinned buffer inside
// the scope would move it while that borrow is alive. (rustc reports it twice: the closure
// captures `pinned` by value for the `drop`, so the borrow also outlives the captured
// variable.)
//
// Without it: a copy from page-locked memory is truly asynchronous (0.02 ms to return:
// docs/c/async_host_memory.out), so the free comes while the copy engine must still read the
// memory. Measured for this case (H100, driver 580.159.04): `cuMemFreeHost` then returns
// CUDA_SUCCESS after 20 ms, because it silently waits for the queued work. That wait is no
// documented promise, and host memory the crate does not allocate (a `Vec` that other code
// registered with `cuMemHostRegister`) is freed by Rust's allocator, which waits for
// nothing: the borrow is what keeps the memory alive, not the driver.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let pinned = PinnedBuffer::from_slice(ctx, &[1.0f32; 1 << 20])?;
        let mut on_device = DeviceBuffer::<f32>::zeroed(ctx, 1 << 20)?;
        stream.scope(|s| {
            s.copy_from_host(&mut on_device, &pinned)?;
            drop(pinned); // the copy engine may still be reading it
            Ok(())
        })
    })
}
