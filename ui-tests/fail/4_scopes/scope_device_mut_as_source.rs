// Rule: a source takes only shared views. A `DeviceMut` (a bound buffer the scope may
// write) read by an operation is converted explicitly, `d.into_ref()`; `DeviceMut` is
// `Copy`, so `d` stays usable for later writes.
//
// `copy_from_device`'s source is `impl IntoDeviceRef<'scope, 'ctx, T>`, which `DeviceMut`
// does not implement. Two `DeviceMut`s have one type, so without the rule
// `s.copy_from_device(a, b)` and `s.copy_from_device(b, a)` would both compile, and a
// swapped call would copy the wrong way.
//
// Without it: the copy overwrites the buffer meant to be read; nothing at run time can
// tell (two valid ranges of one length).
//
// Fix: `s.copy_from_device(out, input.into_ref())`.

use cuda_brand::{ContextFlags, Device, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut a = ctx.from_slice(&[1u32, 2, 3, 4])?;
        let mut b = ctx.zeroed::<u32>(4)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| {
            let (input, out) = (s.bind_mut(&mut a), s.bind_mut(&mut b));
            s.fill(input, 7)?;
            // wrong: a `DeviceMut` as the source, without `input.into_ref()`
            s.copy_from_device(out, input)
        })
    })
}
