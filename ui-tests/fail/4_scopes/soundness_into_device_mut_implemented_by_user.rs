// Rule: `IntoDeviceMut`, the memory a scope's operation may write, is sealed: `&mut
// buffer`, `&mut buffer[range]` and a `DeviceMut` of the scope. A type of your own cannot
// become a write handle.
//
// `IntoDeviceMut` has a hidden supertrait (`scope::sealed::IntoMut`, in a private module
// of the crate) that makes the `DeviceMut` an operation writes through. The crate's impls
// take the address and the length from a buffer borrowed exclusively for the whole scope,
// so nothing else (the host, another stream) touches that memory until the scope has
// synchronized. rustc names the hidden supertrait and notes that `IntoDeviceMut` is a
// "sealed trait".
//
// Without it: any address and length would become a handle for `fill`, `copy_from_host`,
// `copy` or a kernel's `Out` argument, with no borrow behind it: `Anywhere` below has the
// queued fill write 4 KiB at an address nothing owns (an illegal address if unmapped, other
// allocations' data, silently, if mapped), while the buffer it was taken from may be read
// or freed by the host.
//
// Fix: write through the crate's borrows: `s.fill(&mut buffer[range], 0)`, or
// `let d = s.bind_mut(&mut buffer);` to write it in several operations of the scope.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, IntoDeviceMut, Stream, StreamFlags, with_context,
};

/// A device address and an element count, put together by hand.
struct Anywhere {
    ptr: u64,
    len: usize,
}

// wrong: a user type may not become a write handle
impl<'s, 'c> IntoDeviceMut<'s, 'c, u32> for Anywhere {}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let buffer = DeviceBuffer::<u32>::zeroed(ctx, 1024)?;
        let target = Anywhere { ptr: unsafe { buffer.as_device_ptr() } + (1 << 20), len: 1024 }; // SAFETY: see `fill`
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| s.fill(target, 0xffff_ffff))
    })
}
