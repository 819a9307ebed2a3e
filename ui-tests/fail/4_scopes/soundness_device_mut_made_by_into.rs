// Rule: a reusable write handle (`DeviceMut`) is made only by a scope: `s.bind_mut(&mut
// buffer)`, or the scope's own allocations (`alloc_zeroed`, `alloc`). There is no
// `From<&mut DeviceBuffer>` (nor `From<&mut DeviceSlice>`), so `.into()` cannot make one.
//
// A `DeviceMut` is `Copy`: one exclusive borrow becomes a handle that many operations use,
// on every stream of a `scope_pair`/`scope_all` scope. That is sound because the scope
// that issued it keeps the buffer borrowed until all of them have run, and orders its
// streams around every operation that uses it. `bind_mut` takes `&'scope self`, so each
// handle is tied to the scope that issued it from the moment it exists; with no other
// way to make one, every write handle a multi-stream scope's streams share was issued by
// that scope. (Its lifetime would still have to unify with the scope's, so `.into()` alone
// opens no hole the compiler would miss today; the rule keeps that argument in one
// place, the scope, instead of in every conversion that could make a handle.)
//
// For a single operation no handle is needed: every operation takes `&mut buffer` or
// `&mut buffer[range]` directly.
//
// Fix: `let d = sa.bind_mut(&mut on_device);`.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, DeviceMut, Stream, StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let a = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let b = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        let mut host = vec![0u32; 1 << 20];
        a.scope_pair(&b, |sa, sb| {
            let d: DeviceMut<'_, '_, u32> = (&mut on_device).into();
            sa.fill(d, 7)?;
            sb.copy_to_host(&mut host, d.into_ref()) // b waits for a's fill
        })
    })
}
