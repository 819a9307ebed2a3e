// Rule: a `DeviceMut` bound in a multi-stream scope (`Stream::scope_pair`, `scope_all`)
// may be used on any of *that* scope's streams, but not by a single-stream scope
// (`Stream::scope`) opened inside it on another stream.
//
// The streams of one `scope_pair` share one scope lifetime, and the crate orders them
// wherever they touch the same bound memory (its order book sees every operation of the
// scope). A scope nested inside has its own higher-ranked, invariant lifetime, like a
// context's brand: its operations take `DeviceMut<'inner, 'ctx, T>`, which never unifies
// with the outer scope's `DeviceMut<'outer, 'ctx, T>`. rustc reports this as the nested
// closure's scope "escaping" into `d`, which was declared outside it.
//
// Without it: the nested scope's stream `c` is none of the outer scope's streams, so the
// order book never sees its copy: nothing orders it after `a`'s fill, and the copy into
// page-locked memory runs whenever `c` gets to it, reading the 0s, the 7s or a mix
// (two non-blocking streams run independently: docs/c/facts/two_streams.out). No call
// reports anything.
//
// Fix: make `c` one of the scope's streams, `Stream::scope_all(&[&a, &b, &c], |s| ...)`,
// and use `d` on `s[2]`; or use `d` on `sb`.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, PinnedBuffer, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let a = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let b = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let c = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        let mut host = PinnedBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        let mut checksum = vec![0u32; 1];
        a.scope_pair(&b, |sa, sb| {
            let d = sa.bind_mut(&mut on_device);
            sa.fill(d, 7)?;
            sb.copy_to_host(&mut checksum, d.slice(..1).into_ref())?; // ordered after the fill
            c.scope(|sc| sc.copy_to_host(&mut host, d.into_ref()))
        })
    })
}
