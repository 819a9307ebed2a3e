// Allowed: the closure returns plain data, which carries no brand: a `String`, a number, a
// `Vec` read back from the device.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context, with_primary_context};

fn main() {
    let Ok(device) = Device::get(0) else { return };
    let name: cuda_brand::Result<String> =
        with_context(&device, ContextFlags::default(), |ctx| ctx.device()?.name());
    let version: cuda_brand::Result<u32> = with_primary_context(&device, |ctx| ctx.api_version());
    let contents: cuda_brand::Result<Vec<f32>> =
        with_context(&device, ContextFlags::default(), |ctx| {
            DeviceBuffer::from_slice(ctx, &[1.0f32, 2.0])?.to_vec()
        });
    match (name, version, contents) {
        (Ok(name), Ok(version), Ok(contents)) => println!("{name}, API {version}, {contents:?}"),
        (name, version, contents) => println!("{name:?} {version:?} {contents:?}"),
    }
}
