// Rule: `copy_peer` takes the destination with its own context's guard, then the source
// with its own: the guards cannot be swapped (each buffer's brand must match its guard).
//
// Without it: cuMemcpyPeer(dst, dstContext, src, srcContext, n) takes the two contexts as
// plain handles; passing them the wrong way round names memory of one context as
// belonging to the other, which the driver trusts (with unified addressing the pointer
// usually wins, so the mistake goes unnoticed until a context is destroyed or the memory
// is not mapped where the driver assumed).

use cuda_brand::{ContextFlags, Device, DeviceBuffer, copy_peer, with_context};

fn main() -> cuda_brand::Result<()> {
    let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    with_context(&d0, ContextFlags::default(), |c0| {
        let on0 = DeviceBuffer::from_slice(c0, &[1u32, 2, 3])?;
        with_context(&d1, ContextFlags::default(), |c1| {
            let mut on1 = DeviceBuffer::<u32>::zeroed(c1, 3)?;
            // wrong: the destination is on device 1, so its guard is c1
            copy_peer(&mut on1, c0, &on0, c1)
        })
    })
}
