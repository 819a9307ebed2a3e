// Rule: the host cannot read memory that a queued copy is still writing, even a plain
// `Vec`.
//
// `StreamScope::copy_to_host` borrows its destination `&'scope mut [T]` for the whole
// scope, so the `Vec` cannot be read until the scope has synchronized its stream.
//
// Without it: whether the copy is done when the call returns depends on memory the type
// cannot see. Measured (64 MiB queued behind ~20 ms of device work): into pageable memory
// `cuMemcpyDtoHAsync` returned after 22.12 ms with the data there, into pinned memory after
// 0.02 ms with neither end of it there (docs/c/async_host_memory.out); a plain Vec that any
// code registered with cuMemHostRegister is page-locked too
// (docs/c/facts/registered_host_memory.out): the host would read half-written data.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let on_device = DeviceBuffer::from_slice(ctx, &[7u32; 1 << 20])?;
        let mut host = vec![0u32; 1 << 20];
        stream.scope(|s| {
            s.copy_to_host(&mut host, &on_device)?;
            assert_eq!(host[0], 7); // the copy may not have written element 0 yet
            Ok(())
        })
    })
}
