// Rule: an owned handle cannot be moved (here into another thread) while a view bound
// from it is alive.
//
// The handle itself is `'static` and `Send`, so it may go to any thread; but `bind_mut`
// borrows it for as long as the view lives, and a borrowed value cannot be moved.
//
// Without it: the other thread would own (and could write, or free) the buffer that this
// thread still writes through the view: two writers of one buffer, or a write into memory
// whose address the next allocation gets (docs/c/free_while_running.out).
//
// Fix: finish with the view first (end the closure, or let the view's last use come
// before the move), then send the handle; the other thread binds it again in its own
// `enter`.

use cuda_brand::Device;
use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let mut buf: OwnedDeviceBuffer<u32> = home.enter(|ctx| {
        let buf = ctx.zeroed::<u32>(64)?;
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, buf)?)
    })?;
    home.enter(|ctx| {
        let view = buf.bind_mut(ctx)?;
        let reader = std::thread::spawn(move || {
            buf.context().enter(|ctx| buf.bind(ctx)?.to_vec())
        });
        view.fill(7)?;
        println!("{:?}", reader.join().expect("the reader panicked")?);
        Ok::<_, cuda_brand::Error>(())
    })
}
