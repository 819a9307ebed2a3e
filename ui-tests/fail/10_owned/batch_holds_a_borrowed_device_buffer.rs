// Rule: an awaited batch cannot hold a borrowed device buffer, `&DeviceBuffer<'ctx, T>`:
// a batch owns what its work touches. To let several batches read one buffer, share its
// owned handle: `Arc<OwnedDeviceBuffer<T>>`.
//
// A batch is `'static` and owned; a reference (and a branded buffer) is neither. A future
// can be forgotten, which ends the borrow without waiting for the GPU.
//
// Without it: forgetting the future would end the borrow while the work still reads the
// buffer, and its owner could free it; the next allocation gets the freed address, and
// work still queued on it uses the new owner's memory (docs/c/free_while_running.out).
//
// Fix: `let weights = Arc::new(home.unbind(ctx, weights)?);` once, then
// `stream.submit(Arc::clone(&weights), ...)`: the closure gets a `DeviceRef` of it.

use std::sync::Arc;

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let stream = Arc::new(home.enter(|ctx| {
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, ctx.new_stream()?)?)
    })?);
    home.enter(|ctx| {
        let weights = ctx.from_slice(&[0.5f32; 1024])?;
        let pending = stream.submit(&weights, |s, w| {
            let out = s.alloc_zeroed::<f32>(1024)?;
            s.copy_from_device(out, w)
        });
        drop(pending);
        Ok::<_, cuda_brand::Error>(())
    })
}
