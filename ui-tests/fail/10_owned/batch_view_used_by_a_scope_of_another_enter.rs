// Rule: a batch's view cannot be used by another scope, not even one of the same context
// entered again inside the batch's closure: the batch's scope has a brand of its own.
//
// `submit` hands its closure a scope and views branded `'ctx` for that closure alone
// (higher-ranked); `OwnedContext::enter` gives its guard (and so its streams' scopes)
// another fresh brand. Two brands never unify (rule 2), so the view stays on the batch's
// stream.
//
// Without it: the other scope's stream and the batch's stream are not ordered: a write on
// one and the batch's work on the other race, and the other scope's end would not wait for
// the batch's copy (the crate orders streams only within one scope: chapter 8, "Order
// between the streams of one scope").
//
// Fix: queue the work on the batch's own scope, `s`; for work on another stream, give that
// stream a batch of its own after this one is done (`let (result, buf) = pending.await;`).

use std::sync::Arc;

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let (stream, other, buf) = home.enter(|ctx| {
        let stream = home.unbind(ctx, ctx.new_stream()?)?;
        let other = home.unbind(ctx, ctx.new_stream()?)?;
        let buf = home.unbind(ctx, ctx.zeroed::<f32>(1024)?)?;
        Ok::<_, cuda_brand::Error>((Arc::new(stream), other, buf))
    })?;
    let pending = stream.submit(buf, move |s, d| {
        s.fill(d, 1.0)?;
        // `Owned::enter`: the other stream's context entered again, the stream bound
        other.enter(|_ctx, other| other.scope(|o| o.fill(d, 2.0)))
    });
    let (result, _buf) = pending.wait();
    result
}
