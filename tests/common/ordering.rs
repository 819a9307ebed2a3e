//! Helpers of the tests of the order of synchronous operations (`tests/ordering.rs`,
//! `tests/ordering_attacks.rs`, `tests/ordering_spans_attacks.rs`, `tests/ordering_raw.rs`).

use cuda_brand::prelude::*;

/// Reads `n` `u32`s at `ptr` with a raw, synchronous `cuMemcpyDtoH` in `ctx` (pushed for
/// the call): work of another library, on the legacy stream of `ctx`, which the crate's
/// non-blocking streams do not order.
pub fn raw_read(ctx: cuda_brand::sys::CUcontext, ptr: u64, n: usize) -> Vec<u32> {
    let driver = super::driver();
    let mut host = vec![0xdead_beef_u32; n];
    let mut popped = std::ptr::null_mut();
    // SAFETY (of the test): `ctx` is alive (its guard is in scope at every caller); `ptr`
    // holds `n` `u32`s that the caller keeps allocated; `host` has room for them; the push
    // is undone.
    unsafe {
        assert_eq!((driver.cuCtxPushCurrent_v2)(ctx), 0);
        let rc = (driver.cuMemcpyDtoH_v2)(host.as_mut_ptr().cast(), ptr, n * 4);
        assert_eq!((driver.cuCtxPopCurrent_v2)(&mut popped), 0);
        assert_eq!(rc, 0, "cuMemcpyDtoH_v2");
    }
    host
}

/// Queues `fills` fills of `slow` on the calling thread's sync stream (of `slow`'s context,
/// or of the current one for pool memory): they return at once (device memory alone), and
/// whatever this thread queues on that sync stream next runs only after them.
pub fn keep_busy(slow: &mut DeviceSlice<'_, u32>, fills: usize) -> Result<(), Error> {
    for i in 0..fills {
        slow.fill(i as u32)?;
    }
    Ok(())
}

/// Reads `buf` on `stream` in a scope of its own, as a kernel or a library would.
pub fn read_in_scope<'ctx>(stream: &Stream<'ctx>, buf: &DeviceSlice<'ctx, u32>) -> Vec<u32> {
    let mut host = vec![0xdead_beef_u32; buf.len()];
    stream
        .scope(|s| s.copy_to_host(&mut host, buf))
        .expect("a scope reading the buffer");
    host
}

/// Panics naming the first element of `values` that is not `want`: a read that ran before
/// the write it should have followed.
#[track_caller]
pub fn assert_all(values: &[u32], want: u32, what: &str) {
    if let Some(i) = values.iter().position(|&v| v != want) {
        panic!(
            "{what}: element {i} of {} is {:#x}, not {want:#x}: a read ran before the write it follows",
            values.len(),
            values[i]
        );
    }
}

/// The keys of [`lent_copy_graph`]'s two lent buffers.
pub type LentKeys<'ctx> = (
    cuda_brand::graph::DeviceKey<'ctx, u32>,
    cuda_brand::graph::DeviceKey<'ctx, u32>,
);

/// A captured graph that copies `input` into `output`, both lent to it (written between
/// replays through the graph's keys), and the keys of the two.
pub fn lent_copy_graph<'g, 'ctx>(
    ctx: ContextGuard<'ctx>,
    input: &'g mut DeviceSlice<'ctx, u32>,
    output: &'g mut DeviceSlice<'ctx, u32>,
) -> Result<(cuda_brand::graph::Graph<'g, 'ctx>, LentKeys<'ctx>), Error> {
    ctx.capture(|g| {
        let (src, input_key) = g.lend_mut(input);
        let (dst, output_key) = g.lend_mut(output);
        g.copy_from_device(dst, src.into_ref())?;
        Ok::<_, Error>((input_key, output_key))
    })
}
