// Rule: a `PinnedBuffer` cannot leave its context's `with_context` closure.
//
// Page-locked memory is allocated by a context (`cuMemHostAlloc`), so the buffer carries
// the brand `'ctx`; the closure's result type is chosen outside the closure and cannot be
// `PinnedBuffer<'ctx, T>`.
//
// Without it: `with_context` destroys the context when the closure returns, and the
// page-locked memory goes with it. Reading it on the host after `cuCtxDestroy` is a
// segmentation fault (exit 139), and `cuMemFreeHost` of it, which the buffer's `Drop` would
// call, returns CUDA_ERROR_INVALID_VALUE (measured for this case on an H100, driver
// 580.159.04). rustacuda 0.1.3 lets safe code keep device memory past its context, and
// its `DeviceBuffer` panics in `Drop` when the free fails (its source; what happens:
// bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, PinnedBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let pinned = with_context(&device, ContextFlags::default(), |ctx| {
        PinnedBuffer::from_slice(ctx, &[1u32, 2, 3, 4])
    })?;
    // the context is destroyed here
    assert_eq!(pinned[0], 1);
    Ok(())
}
