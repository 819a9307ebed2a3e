// Owning layer, awaited batches: a batch's views cannot leave its closure (here into a
// `thread_local`). Without that, the view would outlive the batch, which the `Pending`
// hands back (and the user frees) once its work is done.
// Fix: use views only inside the batch closure.
use cuda_brand::owned::OwnedContext;
use cuda_brand::prelude::*;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static KEEP: RefCell<Option<Box<dyn std::any::Any>>> = const { RefCell::new(None) };
}

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let (stream, buf) = home.enter(|ctx| {
        Ok::<_, cuda_brand::Error>((
            Arc::new(home.unbind(ctx, ctx.new_stream()?)?),
            home.unbind(ctx, ctx.zeroed::<u32>(16)?)?,
        ))
    })?;
    let pending = stream.submit(buf, |_s, d| {
        KEEP.with(|k| *k.borrow_mut() = Some(Box::new(d)));
        Ok(())
    });
    let _ = pending.wait();
    Ok(())
}
