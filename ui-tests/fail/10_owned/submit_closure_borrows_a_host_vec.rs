// Rule: the closure of `Owned<Stream>::submit` cannot borrow from its surroundings: here a
// `Vec` of the caller that the work would copy into. Everything the work touches is in
// the batch.
//
// `submit` returns a future, and a future can be forgotten (`mem::forget`) or dropped
// while the GPU is busy, ending every borrow it held; so its closure must be `'static`,
// and its scope, higher-ranked, hands out views of the batch only.
//
// Without it: forgetting the future would end the borrow of `host` while the queued copy
// still writes it, and the caller would read or free the vector meanwhile; in C, a
// buffer overwritten right after an asynchronous copy was queued gave the device a mix of
// new and old data (docs/c/async_host_memory.out). cutile-rs #242 is this bug in a GPU
// crate.
//
// Fix: put the vector in the batch and take it back from the result:
// `stream.submit((buf, host), |s, (d, h)| s.copy_to_host_view(h, d))`, then
// `let (result, (buf, host)) = pending.await;`.

use std::sync::Arc;

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let (stream, buf) = home.enter(|ctx| {
        let stream = home.unbind(ctx, ctx.new_stream()?)?;
        let buf = home.unbind(ctx, ctx.zeroed::<f32>(1024)?)?;
        Ok::<_, cuda_brand::Error>((Arc::new(stream), buf))
    })?;
    let mut host = vec![0.0f32; 1024];
    let pending = stream.submit(buf, |s, d| s.copy_to_host(&mut host, d.into_ref()));
    let (result, _buf) = pending.wait();
    result
}
