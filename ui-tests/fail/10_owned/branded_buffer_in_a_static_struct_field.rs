// Rule: a branded buffer cannot be a field of a struct meant to outlive the closure (a
// server's state with a `DeviceBuffer<'static, T>` field): the brand of `enter`'s guard is
// not `'static`.
//
// The field's type names `'static`; the buffer's brand is the closure's own `'ctx`, which
// is invariant, so it cannot become `'static` (nor any other lifetime).
//
// Without it: the state would keep the buffer after the last handle of its context is
// dropped and the context destroyed; a copy into memory of a destroyed context returns
// `CUDA_ERROR_INVALID_VALUE` (docs/c/destroyed_context.out).
//
// Fix: the field is an owned handle, `weights: OwnedDeviceBuffer<f32>`, made with
// `home.unbind(ctx, weights)?` and bound again (`state.weights.bind(ctx)?`) where it is
// used.

use cuda_brand::owned::OwnedContext;
use cuda_brand::{Device, DeviceBuffer};

/// What a server keeps between requests.
struct State {
    home: OwnedContext,
    weights: DeviceBuffer<'static, f32>,
}

fn load(home: &OwnedContext) -> cuda_brand::Result<State> {
    home.enter(|ctx| {
        let weights = ctx.from_slice(&[0.5f32; 1024])?;
        Ok(State {
            home: home.clone(),
            weights,
        })
    })
}

fn main() -> cuda_brand::Result<()> {
    let state = load(&OwnedContext::primary(&Device::get(0)?)?)?;
    state.home.enter(|_ctx| Ok::<_, cuda_brand::Error>(state.weights.len()))?;
    Ok(())
}
