// Rule: a batch's view cannot be used by another batch's work, even on a stream of the
// same context: each batch's closure gets a scope of a brand of its own.
//
// `submit`'s closure is higher-ranked over its scope's `'scope` and `'ctx`, and `'static`:
// the inner batch's closure cannot capture the outer batch's view (it is not `'static`),
// and the two scopes' brands never unify (rule 2).
//
// Without it: the two batches' streams are not ordered, so their writes race; and the
// inner batch, not owning the buffer, could still write it after the outer future handed
// it back and it was freed, its address given to the next allocation
// (docs/c/free_while_running.out).
//
// Fix: put the buffer in the batch that uses it; to use it on another stream, submit the
// second batch with the buffer after the first is done:
// `let (result, buf) = pending.await; other.submit(buf, |o, d| o.fill(d, 2.0))`.

use std::sync::Arc;

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let (stream, other, buf) = home.enter(|ctx| {
        let stream = home.unbind(ctx, ctx.new_stream()?)?;
        let other = home.unbind(ctx, ctx.new_stream()?)?;
        let buf = home.unbind(ctx, ctx.zeroed::<f32>(1024)?)?;
        Ok::<_, cuda_brand::Error>((Arc::new(stream), Arc::new(other), buf))
    })?;
    let pending = stream.submit(buf, move |s, d| {
        s.fill(d, 1.0)?;
        let (result, ()) = other.submit((), move |o, ()| o.fill(d, 2.0)).wait();
        result
    });
    let (result, _buf) = pending.wait();
    result
}
