// Rule: the closure of `Owned<Stream>::submit` cannot use a branded buffer of an enclosing
// `OwnedContext::enter`: the future outlives that closure, and the batch's scope has a
// brand of its own.
//
// `submit`'s closure is `'static` and higher-ranked over its scope's brand; the buffer
// carries the enclosing closure's brand `'ctx`, which is neither `'static` nor the
// scope's. Only the batch's parts (owned handles, host vectors, kernels) reach the work.
//
// Without it: `enter`'s closure returns, and frees the buffer, while the queued fill may
// still write it; the next allocation gets the freed address, and work still queued on
// it writes the new owner's memory (docs/c/free_while_running.out).
//
// Fix: make the buffer owned (`home.unbind(ctx, buf)?`) and put it in the batch:
// `stream.submit(owned, |s, d| s.fill(d, 1.0))`.

use std::sync::Arc;

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let stream = Arc::new(home.enter(|ctx| {
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, ctx.new_stream()?)?)
    })?);
    let pending = home.enter(|ctx| {
        let mut buf = ctx.zeroed::<f32>(1024)?;
        Ok::<_, cuda_brand::Error>(stream.submit((), |s, ()| s.fill(&mut buf, 1.0)))
    })?;
    let (result, ()) = pending.wait();
    result
}
