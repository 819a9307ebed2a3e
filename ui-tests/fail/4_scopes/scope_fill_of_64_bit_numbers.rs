// Rule: a scope fills device memory only with 8-, 16- and 32-bit numbers (`f32` among
// them): the element types that implement the sealed trait `Memset`.
//
// `StreamScope::fill` queues `cuMemsetD8Async`, `D16Async` or `D32Async`, which repeat a
// 1-, 2- or 4-byte pattern a given number of times; the crate passes the element count,
// so the pattern must be exactly one element wide. The driver has no 8-byte fill.
//
// Without it: an 8-byte element filled with a 4-byte pattern would get the low half of the
// value twice, and a count of elements taken as a count of 4-byte words would fill only
// half the buffer; the driver reports nothing, it sees an address and a count.
//
// Fix: copy a host slice of the value instead:
// `s.copy_from_host(&mut big, &vec![u64::MAX; big.len()])`.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut big = DeviceBuffer::<u64>::zeroed(ctx, 1024)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| s.fill(&mut big, u64::MAX))
    })
}
