// Rule: `OwnedContext::unbind(ctx, value)` takes the guard the value was made with: the
// value's brand and the guard's must be one, so a value of context A cannot be given with
// a guard of context B.
//
// `unbind<'ctx, V: Unbind<'ctx>>(&self, ctx: ContextGuard<'ctx>, value: V)`: only
// `DeviceBuffer<'ctx, T>` (and the other branded types at the same `'ctx`) fit, and two
// contexts' brands never unify (rule 2). The run-time check that `ctx` is `self`'s
// context (one compare) then makes the value's context `self`'s.
//
// Without it: the owned handle would remember context B while its memory is A's; binding
// it in B would give a buffer of A with B's brand, and a kernel of B writing A's memory
// succeeds silently (docs/c/cross_context_kernel.out).
//
// Fix: unbind a value with its own context's handle and guard: `home_a.unbind(a, buf)`.

use cuda_brand::owned::OwnedContext;
use cuda_brand::{ContextFlags, Device};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let home_a = OwnedContext::new(&device, ContextFlags::default())?;
    let home_b = OwnedContext::new(&device, ContextFlags::default())?;
    let owned = home_a.enter(|a| {
        let buf = a.from_slice(&[1u32, 2, 3])?;
        home_b.enter(|b| home_b.unbind(b, buf))
    })?;
    drop(owned);
    Ok(())
}
