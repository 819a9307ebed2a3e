// Owning layer, awaited batches: `copy_to_vec` needs a `Vec` borrowed for the batch's
// `'scope`, which no local of the closure is. Without that, the copy would write the
// vector's spare capacity after the closure returned and freed it.
// Fix: make a `Vec<T>` part of the batch and use `copy_to_host_view`.
use cuda_brand::owned::OwnedContext;
use cuda_brand::prelude::*;
use std::sync::Arc;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let (stream, buf) = home.enter(|ctx| {
        Ok::<_, cuda_brand::Error>((
            Arc::new(home.unbind(ctx, ctx.new_stream()?)?),
            home.unbind(ctx, ctx.zeroed::<u32>(16)?)?,
        ))
    })?;
    let pending = stream.submit(buf, |s, d| {
        let mut v = Vec::new();
        s.copy_to_vec(&mut v, d.into_ref())
    });
    let _ = pending.wait();
    Ok(())
}
