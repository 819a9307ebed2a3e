// Allowed: within its closure the guard is `Copy`: pass it by value to as many helper
// functions as needed, generic over the brand, and keep using it afterwards. Values made
// from it in a helper come back with the same brand.

use cuda_brand::{
    ContextFlags, ContextGuard, Device, DeviceBuffer, Stream, StreamFlags, with_context,
};

fn describe(ctx: ContextGuard<'_>) -> cuda_brand::Result<String> {
    Ok(format!("API {} {:?}", ctx.api_version()?, ctx.flags()?))
}

fn make_stream<'ctx>(ctx: ContextGuard<'ctx>) -> cuda_brand::Result<Stream<'ctx>> {
    Stream::new(ctx, StreamFlags::NonBlocking)
}

fn upload<'ctx>(
    ctx: ContextGuard<'ctx>,
    data: &[u32],
) -> cuda_brand::Result<DeviceBuffer<'ctx, u32>> {
    DeviceBuffer::from_slice(ctx, data)
}

fn main() {
    let Ok(device) = Device::get(0) else { return };
    let result = with_context(&device, ContextFlags::default(), |ctx| {
        let text = describe(ctx)?;
        let stream = make_stream(ctx)?;
        let buffer = upload(ctx, &[1, 2, 3])?;
        stream.synchronize()?;
        ctx.synchronize()?;
        Ok::<_, cuda_brand::Error>(format!("{text}: {:?}", buffer.to_vec()?))
    });
    match result {
        Ok(text) => println!("{text}"),
        Err(e) => println!("error: {e}"),
    }
}
