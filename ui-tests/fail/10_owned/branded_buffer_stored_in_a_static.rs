// Rule: entering an owned context does not make its values `'static`: a branded buffer
// made in `OwnedContext::enter` cannot be stored in a `static` (here a `OnceLock`).
//
// `enter` hands its closure a guard of a fresh brand `'ctx`, as `with_context` does, and
// every value made from it carries that brand; a `static` holds only `'static` data.
//
// Without it: the `static` would keep the buffer after the last handle of its context is
// dropped and the context destroyed; a copy into memory of a destroyed context returns
// `CUDA_ERROR_INVALID_VALUE` (docs/c/destroyed_context.out).
//
// Fix: keep the owned form, which keeps its context alive:
// `static WEIGHTS: OnceLock<OwnedDeviceBuffer<f32>>`, set to `home.unbind(ctx, weights)?`.

use std::sync::OnceLock;

use cuda_brand::owned::OwnedContext;
use cuda_brand::{Device, DeviceBuffer};

static WEIGHTS: OnceLock<DeviceBuffer<'static, f32>> = OnceLock::new();

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    home.enter(|ctx| {
        let weights = ctx.from_slice(&[0.5f32; 1024])?;
        let _ = WEIGHTS.set(weights);
        Ok::<_, cuda_brand::Error>(())
    })
}
