// Safety profile: the allocations that leave memory uninitialized are removed:
// `DeviceBuffer::uninitialized` and `uninitialized_in`, `StreamScope::alloc` and
// `alloc_in`.
//
// They are `unsafe` because the new memory holds whatever it held before, possibly another
// allocation's data, until written: no undefined behaviour for `DeviceCopy` types, but a
// read of stale data the compiler cannot rule out. Under the profile all new memory is
// zeroed or filled from the host.
//
// Fix: `DeviceBuffer::zeroed`, `from_slice`, `StreamScope::alloc_zeroed`.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        // SAFETY: written before it is read (the case is about the function being gone).
        let mut buf = unsafe { DeviceBuffer::<u32>::uninitialized(ctx, 16) }?;
        buf.fill(0)?;
        ctx.stream()?.scope(|s| {
            // SAFETY: as above.
            let scratch = unsafe { s.alloc::<u32>(16) }?;
            s.fill(scratch, 7)
        })
    })
}
