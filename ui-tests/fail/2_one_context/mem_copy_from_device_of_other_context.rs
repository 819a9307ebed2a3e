// Rule: device-to-device copies stay inside one context, views included:
// `copy_from_device` of a view of context B only takes a `&DeviceSlice<'ctx, T>` with B's
// brand.
//
// A view keeps its buffer's brand (`&buf_a[2..]` is a `&DeviceSlice<'a, u32>`); the brand
// is invariant and every `with_context` closure gets a fresh one, so
// `DeviceSlice<'a, u32>` is never a `DeviceSlice<'b, u32>`. rustc reports the
// mismatch from both sides: B's brand would have to leave B's closure (first error), and
// A's brand would have to be `'static` (second error).
//
// Without it: the driver does not check which context a device pointer belongs to.
// `cuMemcpyDtoD` from A's memory into B's, with B current, returns CUDA_SUCCESS and copies
// (measured for this case on an H100, driver 580.159.04; docs/c/cross_context_kernel.out
// has the same copy, and a kernel of B writing A's memory, both CUDA_SUCCESS); rustacuda
// 0.1.3 lets safe code copy A's buffer while B is current (bench/examples/peer_crates.out).
// A mix-up of two contexts' buffers is never reported at run time.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx_a| {
        let buf_a = DeviceBuffer::from_slice(ctx_a, &[1u32, 2, 3, 4])?;
        with_context(&device, ContextFlags::default(), |ctx_b| {
            let mut buf_b = DeviceBuffer::<u32>::zeroed(ctx_b, 4)?;
            buf_b[..2].copy_from_device(&buf_a[2..])?;
            Ok(())
        })
    })
}
