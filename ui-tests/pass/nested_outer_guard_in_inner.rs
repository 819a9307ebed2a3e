// Allowed: in nested contexts, the outer guard (and what was made from it) may be used
// inside the inner closure. The outer brand lives longer than the inner closure, so
// borrowing it there is fine; the outer context is pushed around each call that needs it
// current, and the inner one is current again afterwards.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context, with_primary_context};

fn nested(device: &Device) -> cuda_brand::Result<u32> {
    with_context(device, ContextFlags::default(), |outer| {
        let mut in_outer = DeviceBuffer::<u32>::zeroed(outer, 4)?;
        with_context(device, ContextFlags::default(), |inner| {
            outer.synchronize()?;
            in_outer.copy_from_host(&[1, 2, 3, 4])?;
            let _in_inner = DeviceBuffer::<u32>::zeroed(inner, 4)?;
            with_primary_context(device, |primary| {
                outer.synchronize()?;
                inner.synchronize()?;
                primary.api_version()
            })
        })?;
        Ok(in_outer.to_vec()?.iter().sum())
    })
}

fn main() {
    let Ok(device) = Device::get(0) else { return };
    match nested(&device) {
        Ok(sum) => println!("sum {sum}"),
        Err(e) => println!("error: {e}"),
    }
}
