// Allowed: two streams of one context sharing a buffer inside `Stream::scope_pair`, with an
// event of the program's own: stream `a` fills the buffer and records `filled`; stream `b`
// waits for that record, then copies the buffer to the host.
//
// The two scopes share one lifetime, so `b`'s copy may use the `DeviceMut` that `a` bound;
// the crate's order book already makes `b` wait for `a`'s fill, the program's event is
// allowed on top of it. Both streams are synchronized when `scope_pair` returns.

use cuda_brand::{
    ContextFlags, DeviceBuffer, Event, EventFlags, Stream, StreamFlags, with_context,
};

fn main() {
    let Ok(device) = cuda_brand::Device::get(0) else {
        return;
    };
    with_context(&device, ContextFlags::default(), |ctx| {
        let a = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let b = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut filled = Event::without_timing(ctx, EventFlags::new())?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1 << 16)?;
        let mut host = vec![0u32; 1 << 16];
        a.scope_pair(&b, |sa, sb| {
            let d = sa.bind_mut(&mut on_device);
            sa.fill(d, 7)?;
            let fill_done = filled.record(sa)?;
            sb.wait_event(&fill_done)?; // b's copy starts after a's fill
            sb.copy_to_host(&mut host, d.into_ref())?;
            Ok::<_, cuda_brand::Error>(())
        })?;
        assert!(host.iter().all(|&x| x == 7));
        Ok::<_, cuda_brand::Error>(())
    })
    .expect("two streams ordered by an event");
}
