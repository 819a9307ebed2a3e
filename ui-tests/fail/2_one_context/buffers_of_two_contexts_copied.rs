// Rule: a buffer of one context cannot be copied into a buffer of another context: both
// sides of `copy_from_device` must have the same brand.
//
// `DeviceSlice<'ctx, T>` is invariant in `'ctx` like the guard, so `&DeviceSlice<'a, T>`
// never coerces to `&DeviceSlice<'b, T>`.
//
// Without it: memory of two contexts would be mixed in one operation, which the driver
// does not reliably catch: a kernel of B writing A's memory on the same device succeeds
// silently (docs/c/cross_context_kernel.out); rustacuda 0.1.3 lets safe code copy from and
// into A's buffer while B is current (bench/examples/peer_crates.out).

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let mut in_a = DeviceBuffer::<u32>::zeroed(a, 4)?;
        with_context(&device, ContextFlags::default(), |b| {
            let in_b = DeviceBuffer::from_slice(b, &[1u32, 2, 3, 4])?;
            in_a.copy_from_device(&in_b)
        })?;
        println!("{:?}", in_a.to_vec()?);
        Ok(())
    })
}
