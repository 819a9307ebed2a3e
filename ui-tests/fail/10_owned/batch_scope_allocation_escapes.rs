// Owning layer, awaited batches: a scope allocation of a batch cannot be stashed in
// something `'static` the closure captured. Without that, the view would outlive the
// allocation, which the batch frees when its work is done.
// Fix: use scope allocations only inside the batch closure.
use cuda_brand::owned::OwnedContext;
use cuda_brand::prelude::*;
use cuda_brand::scope::DeviceMut;
use std::sync::{Arc, Mutex};

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let stream =
        home.enter(|ctx| Ok::<_, cuda_brand::Error>(Arc::new(home.unbind(ctx, ctx.new_stream()?)?)))?;
    let keep: Arc<Mutex<Option<DeviceMut<'static, 'static, u32>>>> = Arc::default();
    let k = Arc::clone(&keep);
    let pending = stream.submit((), move |s, ()| {
        let d = s.alloc_zeroed::<u32>(16)?;
        *k.lock().unwrap() = Some(d);
        Ok(())
    });
    let _ = pending.wait();
    Ok(())
}
