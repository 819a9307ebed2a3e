// Rule: views bound from handles of two contexts keep two brands: swapping their values
// (`mem::swap` of two `bind_mut` views) does not compile.
//
// `bind_mut` hands out `&mut DeviceBuffer<'ctx, T>` with the guard's brand, and a value
// may be replaced through it; that is sound because every value of the brand is of the
// handle's context. Two contexts' brands never unify (rule 2), so the swap, which needs
// one type for both, is refused.
//
// Without it: each handle would hold the other context's memory while keeping its own
// context alive: once A's last handle is gone, A is destroyed while `b` still holds A's
// buffer (a copy into memory of a destroyed context returns `CUDA_ERROR_INVALID_VALUE`:
// docs/c/destroyed_context.out), and a kernel of B given `b` writes A's memory, which
// succeeds silently (docs/c/cross_context_kernel.out).
//
// Fix: copy between contexts through the host (`a.bind(ca)?.to_vec()?`, then
// `copy_from_host` in the other), or with `copy_peer`, each buffer next to its own guard.

use cuda_brand::owned::OwnedContext;
use cuda_brand::{ContextFlags, Device};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let home_a = OwnedContext::new(&device, ContextFlags::default())?;
    let home_b = OwnedContext::new(&device, ContextFlags::default())?;
    let mut a = home_a.enter(|ctx| home_a.unbind(ctx, ctx.zeroed::<u32>(4)?))?;
    let mut b = home_b.enter(|ctx| home_b.unbind(ctx, ctx.zeroed::<u32>(4)?))?;
    home_a.enter(|ca| {
        home_b.enter(|cb| {
            std::mem::swap(a.bind_mut(ca)?, b.bind_mut(cb)?);
            Ok::<_, cuda_brand::Error>(())
        })
    })
}
