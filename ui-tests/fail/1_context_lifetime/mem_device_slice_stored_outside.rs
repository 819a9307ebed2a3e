// Rule: a `&DeviceSlice` (a view of device memory) cannot leave its context's
// `with_context` closure, not even stored in a variable declared outside it.
//
// The view carries the brand `'ctx` (`&DeviceSlice<'ctx, T>`), and `'ctx` exists only
// inside the closure: an outer variable's type cannot name it.
//
// Without it: the view would be a device address of a destroyed context. The driver on a
// destroyed context's memory: `cuMemcpyHtoD` into memory of a destroyed context returns
// CUDA_ERROR_INVALID_VALUE (docs/c/destroyed_context.out); rustacuda 0.1.3 with a buffer
// kept after its `Context`: `copy_to`/`copy_from` (bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, DeviceBuffer, DeviceSlice, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let mut first_half: Option<&DeviceSlice<u32>> = None;
    with_context(&device, ContextFlags::default(), |ctx| {
        // leaked, so that only the brand, not the buffer's drop, ends the view's life
        let buf = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3, 4])?;
        let buf: &DeviceBuffer<u32> = Box::leak(Box::new(buf));
        first_half = Some(&buf[..2]);
        Ok::<_, cuda_brand::Error>(())
    })?;
    // the context is destroyed here
    if let Some(view) = first_half {
        assert_eq!(view.to_vec()?, [1, 2]);
    }
    Ok(())
}
