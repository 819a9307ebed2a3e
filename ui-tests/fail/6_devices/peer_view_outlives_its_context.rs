// Rule: a peer view cannot outlive either context: it carries the viewing context's brand
// and borrows the viewed buffer.
//
// Without it: the view would name memory of a destroyed context (or a freed buffer). The
// driver answers a copy into memory of a destroyed context with CUDA_ERROR_INVALID_VALUE
// (docs/c/destroyed_context.out), or, once the address is reused by a new allocation,
// copies the new allocation's data with CUDA_SUCCESS.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    with_context(&d0, ContextFlags::default(), |c0| {
        let on0 = DeviceBuffer::from_slice(c0, &[1u32, 2, 3])?;
        let escaped = with_context(&d1, ContextFlags::default(), |c1| {
            let access = c1.enable_peer_access(c0)?;
            Ok::<_, cuda_brand::Error>(access.view(&on0)?)
        })?;
        // device 1's context is destroyed here
        println!("{:?}", escaped.to_vec()?);
        Ok(())
    })
}
