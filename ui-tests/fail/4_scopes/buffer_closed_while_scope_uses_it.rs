// Rule: `close()` (free now, and return the driver's error) takes the buffer by value, so
// like `drop` it cannot free memory that a scope's queued work still uses: the scope keeps
// the buffer borrowed until it has synchronized.
//
// Without it: the free races the queued work (docs/c/free_while_running.out: a
// stream-ordered free returns in 0.1 ms, the next allocation gets the same address, and
// the queued work silently writes into it). Fix: close the buffer after the scope.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut x = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| {
            s.fill(&mut x, 7)?;
            x.close() // wrong: the fill may not have run yet
        })
    })
}
