// Rule: an awaited batch cannot hold a borrow: `&mut Vec<T>` is not a part of a batch;
// the `Vec<T>` itself is.
//
// `Batch` is implemented for owned values only (owned buffers, `Vec<T>`, `Arc`s of owned
// buffers and kernels, tuples of them), and a batch is `'static`: the future that holds
// it can be forgotten, which ends every borrow it held without waiting for the GPU.
//
// Without it: `mem::forget(pending)` would end the borrow of `host` while the queued copy
// still writes it; the caller could read, grow or free the vector meanwhile (in C, a
// buffer overwritten right after an asynchronous copy was queued gave the device a mix of
// new and old data: docs/c/async_host_memory.out).
//
// Fix: give the vector itself, `stream.submit((buf, host), ...)`, and take it back from
// the future's result: `let (result, (buf, host)) = pending.await;`.

use std::sync::Arc;

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let stream = Arc::new(home.enter(|ctx| {
        Ok::<_, cuda_brand::Error>(home.unbind(ctx, ctx.new_stream()?)?)
    })?);
    let mut host = vec![0.0f32; 1024];
    let pending = stream.submit(&mut host, |s, h| {
        let d = s.alloc_zeroed::<f32>(1024)?;
        s.copy_to_host_view(h, d.into_ref())
    });
    drop(pending);
    Ok(())
}
