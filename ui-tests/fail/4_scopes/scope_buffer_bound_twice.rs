// Rule: a buffer is bound for writing at most once per scope: `StreamScope::bind_mut`
// borrows it mutably for the whole scope, like any `&mut`.
//
// `bind_mut` takes `&'scope mut DeviceSlice<'ctx, T>`, and a second `&mut` of the same
// buffer while the first lives is the borrow checker's "second mutable borrow". One binding
// is enough: `DeviceMut` is `Copy`, so every operation of the scope can use it, and they
// run in order on the scope's stream.
//
// Without it: the driver would see nothing wrong (the two handles hold one address). The
// rule is what makes the first binding mean something: the `&mut` held for `'scope` is the
// proof that nobody else, the host included, touches the buffer while queued work writes
// it. A copy into page-locked memory returned after 0.02 ms, before its first or last
// element had arrived (docs/c/async_host_memory.out): queued work is still running long
// after the call that queued it.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1024)?;
        stream.scope(|s| {
            let first = s.bind_mut(&mut on_device);
            let second = s.bind_mut(&mut on_device);
            s.fill(first, 1)?;
            s.fill(second, 2)?;
            Ok(())
        })
    })
}
