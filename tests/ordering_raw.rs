//! Raw escapes after a pending synchronous write (issue 47, `docs/design/ordering.md`): each
//! path that hands memory or a handle to code the crate cannot see (`as_device_ptr`,
//! `into_raw_parts`, `as_raw`, the end of `with_raw_context`) waits for the pending writes
//! of that memory itself, so that raw driver calls made right after it, standing for
//! another library, see the values written.
//!
//! As in `ordering_attacks`, each round first makes the calling thread's sync stream slow
//! ([`keep_busy`]: fills of a 1 GiB buffer, which return at once), so that the write queued
//! behind them is still pending for milliseconds when it returns. The raw work runs on the
//! context's legacy stream (a synchronous `cuMemcpyDtoH`) or on a non-blocking stream,
//! neither of which waits for the crate's sync streams: were the escape not to wait, it
//! would see the round before's value. Handles and addresses not under test are taken
//! once, before any write: every raw escape waits for what is pending when it is taken.

use crate::common;
use crate::common::ordering::{assert_all, keep_busy, lent_copy_graph, raw_read};

use cuda_brand::prelude::*;
use cuda_brand::{DeviceBuffer2D, DeviceBuffer3D, with_raw_context};

/// 64 MiB of `u32`s.
const N: usize = 16 << 20;
const ROUNDS: usize = 10;
/// 1 GiB of `u32`s: one fill of it takes about 0.3 ms on an H100.
const SLOW_LEN: usize = 1 << 28;

const PTX: &str = include_str!("../kernels/kernels.ptx");

/// `DeviceSlice::as_device_ptr` waits for the pending fill of its memory: a raw read on the
/// legacy stream right after sees it, of the whole buffer and of a part of it.
fn a_device_address_is_taken_after_the_pending_fill_of_its_memory() {
    common::in_context(|ctx| {
        let raw = common::handle(ctx);
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut buf = ctx.zeroed::<u32>(N)?;
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            buf.fill(round + 1)?;
            let part = &buf[N / 2..];
            // SAFETY (of the test): read below while nothing writes it; `buf` outlives it.
            let (at, len) = match round % 2 {
                0 => (unsafe { buf.as_device_ptr() }, N),
                _ => (unsafe { part.as_device_ptr() }, part.len()),
            };
            assert_all(&raw_read(raw, at, len), round + 1, "after as_device_ptr");
        }
        Ok(())
    });
}

/// A scope's view (`DeviceMut`, `DeviceRef`) of a buffer filled synchronously just before
/// the scope bound it: the scope's operations that name the view wait for the fill, and
/// the view's address, which names nothing, waits for it too.
fn a_scope_views_address_is_taken_after_a_fill_made_before_it_was_bound() {
    common::in_context(|ctx| {
        let raw = common::handle(ctx);
        let stream = ctx.new_stream()?;
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut buf = ctx.zeroed::<u32>(N)?;
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            buf.fill(round + 20)?;
            stream.scope(|s| {
                let view = s.bind_mut(&mut buf);
                // SAFETY (of the test): read below; the scope queues nothing on the view.
                let at = match round % 2 {
                    0 => unsafe { view.as_device_ptr() },
                    _ => unsafe { view.into_ref().as_device_ptr() },
                };
                assert_all(&raw_read(raw, at, N), round + 20, "a scope view's address");
                Ok(())
            })?;
        }
        Ok(())
    });
}

/// `DeviceBuffer2D::as_device_ptr` and `DeviceBuffer3D::as_device_ptr` wait for a pending
/// device-to-device copy into the buffer: every row of a raw read right after holds it.
fn pitched_addresses_are_taken_after_their_pending_copies() {
    common::in_context(|ctx| {
        let raw = common::handle(ctx);
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let (w, h) = (1024usize, 4096usize);
        let (mut src, mut dst) = (
            DeviceBuffer2D::<u32>::zeroed(ctx, w, h)?,
            DeviceBuffer2D::<u32>::zeroed(ctx, w, h)?,
        );
        let (x, y, z) = (256usize, 64usize, 256usize);
        let (mut src3, mut dst3) = (
            DeviceBuffer3D::<u32>::zeroed(ctx, x, y, z)?,
            DeviceBuffer3D::<u32>::zeroed(ctx, x, y, z)?,
        );
        for round in 0..ROUNDS as u32 {
            let v = round + 30;
            src.copy_from_host(&vec![v; w * h], w)?; // complete when it returns
            keep_busy(&mut slow, 32)?;
            dst.copy_from_device(&src)?; // device memory alone: pending
            // SAFETY (of the test): read below while nothing writes it.
            let at = unsafe { dst.as_device_ptr() };
            let row = dst.pitch_bytes() / 4;
            let rows = raw_read(raw, at, row * h);
            for r in rows.chunks(row) {
                assert_all(&r[..w], v, "a 2D buffer's rows after as_device_ptr");
            }
            src3.copy_from_host(&vec![v + 1; x * y * z], x, y)?;
            keep_busy(&mut slow, 32)?;
            dst3.copy_from_device(&src3)?;
            // SAFETY (of the test): as above.
            let at = unsafe { dst3.as_device_ptr() };
            let row = dst3.pitch_bytes() / 4;
            let rows = raw_read(raw, at, row * y * z);
            for r in rows.chunks(row) {
                assert_all(&r[..x], v + 1, "a 3D buffer's rows after as_device_ptr");
            }
        }
        Ok(())
    });
}

/// The wait of `as_device_ptr` is for the writes of its own memory: the address of a buffer
/// with nothing pending is handed out while another buffer's fill is still queued.
fn a_device_address_does_not_wait_for_another_buffers_pending_fill() {
    common::in_context(|ctx| {
        let raw = common::handle(ctx);
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let (mut a, b) = (ctx.zeroed::<u32>(N)?, ctx.zeroed::<u32>(N)?);
        // SAFETY (of the test): only the address is taken, and read once `a` is written.
        let at_a = unsafe { a.as_device_ptr() };
        ctx.synchronize()?; // nothing pending: `b`'s memset is complete, and forgotten
        // A round shows the rule when `a`'s fill is still pending after `b`'s address was
        // taken. Where the GPU keeps up with the fills (under compute-sanitizer, whose
        // instrumented calls slow the host), a round may find the fill done on its own;
        // an address that waited for `a` would find it done in every round.
        let mut shown = 0;
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            a.fill(round + 40)?;
            // SAFETY (of the test): only the address is taken.
            let _ = unsafe { b.as_device_ptr() };
            if cuda_brand::__order::incomplete_writes_of(at_a, (N * 4) as u64)? > 0 {
                shown += 1;
            }
            // SAFETY (of the test): read below while nothing writes it.
            let written = unsafe { a.as_device_ptr() };
            assert_all(
                &raw_read(raw, written, N),
                round + 40,
                "after a's own address",
            );
        }
        assert!(
            shown > 0,
            "in none of {ROUNDS} rounds was the fill of `a` still pending after the address \
             of `b` was taken: the address waited for it"
        );
        Ok(())
    });
}

/// `Stream::as_raw` orders the stream after every pending synchronous write: a raw memset
/// queued on the handle lands after the pending fill of the same memory, not before it
/// (the address taken before the rounds, so that only the stream's order is tested).
fn a_raw_stream_is_ordered_after_a_pending_fill() {
    let driver = common::driver();
    common::in_context(|ctx| {
        let stream = ctx.new_stream()?; // non-blocking
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut buf = ctx.zeroed::<u32>(N)?;
        // SAFETY (of the test): written only by the raw memsets below, each waited for
        // before the crate touches the buffer again.
        let at = unsafe { buf.as_device_ptr() };
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            buf.fill(round + 50)?;
            // SAFETY (of the test): the stream outlives the raw work, which is waited for.
            let raw_stream = unsafe { stream.as_raw() };
            // SAFETY (of the test): `buf` holds `N` words, alive until the wait returns.
            unsafe {
                let rc = (driver.cuMemsetD32Async)(at, 0xf000 | round, N, raw_stream);
                assert_eq!(rc, 0, "cuMemsetD32Async");
                assert_eq!((driver.cuStreamSynchronize)(raw_stream), 0);
            }
            assert_all(
                &buf.to_vec()?,
                0xf000 | round,
                "a raw memset on the raw stream, after the pending fill",
            );
        }
        Ok(())
    });
}

/// `ContextGuard::as_raw` and `SharedContext::as_raw` wait for every pending synchronous
/// write: raw work through the context's handle (a read on its legacy stream) sees it.
fn raw_context_handles_are_taken_after_every_pending_fill() {
    common::in_context(|ctx| {
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut buf = ctx.zeroed::<u32>(N)?;
        // SAFETY (of the test): read below while nothing writes it; `buf` outlives it.
        let at = unsafe { buf.as_device_ptr() };
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            buf.fill(round + 60)?;
            // SAFETY (of the test): the handle is used by `raw_read` alone, pushed and
            // popped while the context is alive.
            let raw = match round % 2 {
                0 => unsafe { ctx.as_raw() },
                _ => unsafe { ctx.share().as_raw() },
            };
            assert_all(
                &raw_read(raw, at, N),
                round + 60,
                "after a raw context handle",
            );
        }
        Ok(())
    });
}

/// Memory of another library's (`cuMemAlloc`), adopted inside `with_raw_context`, filled,
/// and leaked back to its owner (`mem::forget`): when `with_raw_context` returns, the
/// owner's raw read sees the fill. The thread's sync stream was made before the scope (by
/// the slow fills), so the scope's teardown does not end it; the wait is for the writes
/// pending when the closure returns.
fn with_raw_context_returns_after_the_pending_fill_of_adopted_memory() {
    let driver = common::driver();
    common::in_context(|ctx| {
        let raw = common::handle(ctx);
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut theirs = 0;
        // SAFETY (of the test): the context is current; the out-pointer is a live local.
        assert_eq!(unsafe { (driver.cuMemAlloc_v2)(&mut theirs, N * 4) }, 0);
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            let adopt_and_fill = |inner: ContextGuard<'_>| {
                // SAFETY (of the test): the test's own `cuMemAlloc` memory of this context,
                // used by nothing else meanwhile; leaked below, not freed.
                let mut adopted = unsafe { DeviceBuffer::<u32>::from_raw_parts(inner, theirs, N) }?;
                adopted.fill(round + 70)?;
                std::mem::forget(adopted); // handed back to its owner
                Ok::<_, Error>(())
            };
            // SAFETY (of the test): `raw` is alive and outlives the closure.
            unsafe { with_raw_context(raw, adopt_and_fill) }?;
            assert_all(
                &raw_read(raw, theirs, N),
                round + 70,
                "after with_raw_context",
            );
        }
        // SAFETY (of the test): allocated above; the last read has returned.
        assert_eq!(unsafe { (driver.cuMemFree_v2)(theirs) }, 0);
        Ok(())
    });
}

/// `Module::as_raw` and `Function::as_raw` wait for a pending synchronous write of a module
/// global: a raw read of the global right after sees it (its address taken before).
fn raw_module_and_function_handles_are_taken_after_a_pending_global_write() {
    common::in_context(|ctx| {
        let raw = common::handle(ctx);
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let mut module = Module::from_ptx(ctx, PTX)?;
        // SAFETY (of the test): read below while nothing writes it; the module outlives it.
        let at = unsafe { module.global::<u32>("table")?.as_device_ptr() };
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            module.global_mut::<u32>("table")?.fill(round + 80)?;
            // SAFETY (of the test): the handles are not used.
            if round % 2 == 0 {
                let _ = unsafe { module.as_raw() };
            } else {
                let _ = unsafe { module.function("empty")?.as_raw() };
            }
            assert_all(
                &raw_read(raw, at, 16),
                round + 80,
                "a global after a raw handle",
            );
        }
        Ok(())
    });
}

/// `ExecGraph::as_raw` waits for every pending synchronous write: the graph launched
/// through the driver on a raw non-blocking stream copies the value its lent input was
/// just filled with, not the round before's.
fn a_raw_exec_graph_is_launched_after_a_pending_fill_of_its_lent_input() {
    let driver = common::driver();
    common::in_context(|ctx| {
        let mut slow = ctx.zeroed::<u32>(SLOW_LEN)?;
        let (mut input, mut output) = (ctx.zeroed::<u32>(N)?, ctx.zeroed::<u32>(N)?);
        let (graph, (input_key, output_key)) = lent_copy_graph(ctx, &mut input, &mut output)?;
        let mut exec = graph.instantiate()?;
        let mut theirs = std::ptr::null_mut();
        // SAFETY (of the test): the context is current; the out-pointer is a live local;
        // 1: `CU_STREAM_NON_BLOCKING`.
        assert_eq!(unsafe { (driver.cuStreamCreate)(&mut theirs, 1) }, 0);
        for round in 0..ROUNDS as u32 {
            keep_busy(&mut slow, 32)?;
            exec.device_mut(input_key).fill(round + 90)?;
            // SAFETY (of the test): launched where `ExecGraph::launch` would be, and
            // waited for before the graph's memory is touched again.
            unsafe {
                let raw_exec = exec.as_raw();
                assert_eq!((driver.cuGraphLaunch)(raw_exec, theirs), 0, "cuGraphLaunch");
                assert_eq!((driver.cuStreamSynchronize)(theirs), 0);
            }
            assert_all(
                &exec.device(output_key).to_vec()?,
                round + 90,
                "a raw launch of the graph",
            );
        }
        // SAFETY (of the test): made above, idle.
        assert_eq!(unsafe { (driver.cuStreamDestroy_v2)(theirs) }, 0);
        Ok(())
    });
}

gpu_tests!(
    a_device_address_is_taken_after_the_pending_fill_of_its_memory,
    a_scope_views_address_is_taken_after_a_fill_made_before_it_was_bound,
    pitched_addresses_are_taken_after_their_pending_copies,
    a_device_address_does_not_wait_for_another_buffers_pending_fill,
    a_raw_stream_is_ordered_after_a_pending_fill,
    raw_context_handles_are_taken_after_every_pending_fill,
    with_raw_context_returns_after_the_pending_fill_of_adopted_memory,
    raw_module_and_function_handles_are_taken_after_a_pending_global_write,
    a_raw_exec_graph_is_launched_after_a_pending_fill_of_its_lent_input,
);
