// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `DeviceRef::as_device_ptr` is an
// `unsafe fn`, so the lint refuses it.
//
// Why: a device address is a number: it outlives no borrow, so code holding it can pass it
// to a kernel or a driver call after the memory is freed, or while a scope writes it.
//
// Fix: pass the view itself to the crate's copies and launches, which borrow it for as long
// as the work runs.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut buf = ctx.zeroed::<f32>(16)?;
        ctx.new_stream()?.scope(|s| {
            let view = s.bind_mut(&mut buf).into_ref();
            // SAFETY: (the case is about the lint, not the promise)
            let address = unsafe { view.as_device_ptr() };
            println!("{address:#x}");
            Ok(())
        })?;
        Ok(())
    })
}
