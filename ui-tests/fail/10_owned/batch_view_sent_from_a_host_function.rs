// Owning layer, awaited batches: a view cannot be handed to a host function (views are not
// `Send`), so it cannot be sent out through a channel either. Without that, the receiver
// would hold device memory of the batch after the batch was handed back and freed.
// Fix: give the host function a host view (`host_fn_on`) of a `Vec` part of the batch.
use cuda_brand::owned::OwnedContext;
use cuda_brand::prelude::*;
use cuda_brand::scope::DeviceMut;
use std::sync::Arc;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let (stream, buf) = home.enter(|ctx| {
        Ok::<_, cuda_brand::Error>((
            Arc::new(home.unbind(ctx, ctx.new_stream()?)?),
            home.unbind(ctx, ctx.zeroed::<u32>(16)?)?,
        ))
    })?;
    let (tx, rx) = std::sync::mpsc::channel::<DeviceMut<'static, 'static, u32>>();
    let pending = stream.submit(buf, move |s, d| s.host_fn(move || tx.send(d).unwrap()));
    let _kept = rx.recv().unwrap();
    let _ = pending.wait();
    Ok(())
}
