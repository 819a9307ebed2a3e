// Allowed: a closure that only uses `?` needs no type annotation when the `with_context`
// call is the enclosing function's result: the function's return type decides the error
// type `E`, this crate's `Error` or any type with `From<cuda_brand::Error>`.

use std::error::Error as StdError;

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context, with_primary_context};

fn crate_result(device: &Device) -> cuda_brand::Result<u32> {
    with_context(device, ContextFlags::default(), |ctx| {
        ctx.synchronize()?;
        let buffer = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3])?;
        Ok(buffer.to_vec()?.iter().sum())
    })
}

fn boxed_result(device: &Device) -> Result<u32, Box<dyn StdError + Send + Sync>> {
    with_primary_context(device, |ctx| {
        let version = ctx.api_version()?;
        if version == 0 {
            return Err("the driver reported API version 0".into());
        }
        Ok(version)
    })
}

#[derive(Debug)]
enum AppError {
    Cuda(cuda_brand::Error),
}

impl From<cuda_brand::Error> for AppError {
    fn from(e: cuda_brand::Error) -> Self {
        AppError::Cuda(e)
    }
}

fn own_error(device: &Device) -> Result<String, AppError> {
    with_context(device, ContextFlags::default(), |ctx| {
        Ok(ctx.device()?.name()?)
    })
}

fn main() {
    let Ok(device) = Device::get(0) else { return };
    println!("{:?}", crate_result(&device));
    println!("{:?}", boxed_result(&device));
    match own_error(&device) {
        Ok(name) => println!("{name}"),
        Err(AppError::Cuda(e)) => println!("error: {e}"),
    }
}
