// Safety profile: no raw handles. With `--features safety-profile` the `as_raw` methods
// (of `ContextGuard`, `SharedContext`, `Device`, `Stream`, `Event`, `Module`, `Function`,
// `MemoryPool`) and `as_device_ptr` (of device slices, scope views and 2D buffers) are
// private to the crate.
//
// A raw handle lets code outside the crate reach the driver behind the brand's back:
// destroy the stream while a branded `Stream` still uses it, or queue work on it that no
// scope waits for. Code built with the profile shows, by compiling, that it does neither.
//
// Fix: use the crate's methods (`stream.synchronize()`, `stream.scope(...)`); code that
// must talk to another CUDA library builds without the profile.

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.stream()?;
        let handle = stream.as_raw();
        println!("{handle:?}");
        Ok(())
    })
}
