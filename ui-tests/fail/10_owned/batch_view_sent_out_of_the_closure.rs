// Rule: the views a batch's closure gets (`DeviceMut`, `DeviceRef`, `HostMut`,
// `ScopedKernel`) cannot leave the closure, not even through a channel: each carries the
// batch's scope brand `'scope`, chosen by `submit` for the closure alone.
//
// `submit`'s closure is `for<'scope, 'ctx> FnOnce(&'scope StreamScope<..>,
// B::Views<'scope, 'ctx>)`: nothing outside can name `'scope`, so nothing outside can hold
// a view. The batch itself comes back, with the result, once the GPU is done.
//
// Without it: a view is a device pointer and a length; kept, it could be written after
// the future handed the buffer back (two writers: the kept view and the buffer's next
// batch), or after the buffer was freed and its address given to the next allocation
// (docs/c/free_while_running.out).
//
// Fix: queue everything the work does inside the closure; keep the owned buffer (the
// future gives it back: `let (result, buf) = pending.await;`) and put it in the next batch.

use std::sync::Arc;
use std::sync::mpsc;

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let (stream, buf) = home.enter(|ctx| {
        let stream = home.unbind(ctx, ctx.new_stream()?)?;
        let buf = home.unbind(ctx, ctx.zeroed::<f32>(1024)?)?;
        Ok::<_, cuda_brand::Error>((Arc::new(stream), buf))
    })?;
    let (tx, rx) = mpsc::channel();
    let pending = stream.submit(buf, move |s, d| {
        s.fill(d, 1.0)?;
        tx.send(d).expect("the receiver is alive");
        Ok(())
    });
    let (result, _buf) = pending.wait();
    result?;
    let _view = rx.recv().expect("a view was sent");
    Ok(())
}
