//! The order of synchronous operations (issue 28, `docs/design/ordering.md`): a synchronous
//! write of device memory alone (`zeroed`, `fill`, `copy_from_device`, 2D and 3D copies
//! between device buffers) may still run on the thread's sync stream when it returns, and
//! every later scope operation, synchronous operation of another thread or context and free
//! is ordered after it on the GPU; uploads (`from_slice`, `copy_from_host`) are complete.
//! Each test makes the write as large as it can be slow and reads the memory right after on
//! a non-blocking stream (or another context, thread, partition or GPU), many times, and
//! asserts every value: a missing order shows as stale values. Uploads of up to 256 KiB go
//! through the sync stream's bounce ring and are ordered like the writes above.

use std::sync::mpsc;

use crate::common;
use crate::common::ordering::{assert_all, keep_busy, read_in_scope};

use cuda_brand::__order as order;
use cuda_brand::prelude::*;
use cuda_brand::{
    DeviceBuffer2D, DeviceBuffer3D, ErrorCode, PartitionGuard, SharedContext, copy_peer,
    with_partitions,
};

/// Sizes in `u32`s: a few bytes, a page, a megabyte, 64 MiB (a fill of that takes tens of
/// microseconds on an H100: long enough for an unordered read to overtake it).
const SIZES: [usize; 4] = [1, 1024, 1 << 18, 16 << 20];
const ROUNDS: usize = 20;

fn a_synchronous_fill_is_seen_by_the_next_scope_at_every_size() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        for n in SIZES {
            let mut buf = ctx.zeroed::<u32>(n)?;
            for round in 0..ROUNDS as u32 {
                // a scope writes first (complete at its end), then a synchronous fill
                // overwrites it: the next scope must see the fill
                stream.scope(|s| s.fill(&mut buf, 0xabab_abab))?;
                buf.fill(round)?;
                assert_all(&read_in_scope(&stream, &buf), round, "fill");
            }
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn a_zeroed_or_uploaded_buffer_is_seen_by_the_next_scope_at_every_size() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        for n in SIZES {
            let pattern: Vec<u32> = (0..n as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            for round in 0..ROUNDS {
                // dirty a pool block, free it, and take a zeroed one (likely the same
                // block)
                let mut dirty = ctx.zeroed::<u32>(n)?;
                stream.scope(|s| s.fill(&mut dirty, 0xffff_ffff))?;
                drop(dirty);
                let zeroed = ctx.zeroed::<u32>(n)?;
                assert_all(&read_in_scope(&stream, &zeroed), 0, "zeroed");
                let uploaded = ctx.from_slice(&pattern)?;
                assert_eq!(
                    read_in_scope(&stream, &uploaded),
                    pattern,
                    "from_slice, round {round}"
                );
                let mut copied = ctx.zeroed::<u32>(n)?;
                copied.copy_from_device(&uploaded)?;
                assert_eq!(read_in_scope(&stream, &copied), pattern, "copy_from_device");
                let mut again = ctx.zeroed::<u32>(n)?;
                again.copy_from_host(&pattern)?;
                assert_eq!(read_in_scope(&stream, &again), pattern, "copy_from_host");
            }
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn a_synchronous_write_inside_an_open_scope_is_seen_by_its_later_operations() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let n = 16 << 20;
        let mut buf = ctx.zeroed::<u32>(n)?;
        for round in 0..ROUNDS as u32 {
            let mut host = vec![0u32; n];
            stream.scope(|s| {
                // the scope opened before the write: a wait at the opening would miss it
                buf.fill(round + 1)?;
                s.copy_to_host(&mut host, &buf)
            })?;
            assert_all(&host, round + 1, "fill inside an open scope");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn two_streams_of_one_scope_see_a_synchronous_write_made_before_it() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        let n = 16 << 20;
        let mut buf = ctx.zeroed::<u32>(n)?;
        for round in 0..ROUNDS as u32 {
            buf.fill(round)?;
            let (mut first, mut second) = (vec![0u32; n / 2], vec![0u32; n / 2]);
            let (lo, hi) = buf.split_at(n / 2);
            a.scope_pair(&b, |sa, sb| {
                sa.copy_to_host(&mut first, lo)?;
                sb.copy_to_host(&mut second, hi)
            })?;
            assert_all(&first, round, "stream a");
            assert_all(&second, round, "stream b");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// Hands `ROUNDS` buffers of `n` elements over a channel between two threads of one
/// context: the writer fills each with `value(round)` synchronously (the record is made
/// before the send: the hand-off), and `reader`, on the other thread, gets the receiving
/// end.
fn hand_over(
    n: usize,
    value: fn(u32) -> u32,
    reader: impl for<'ctx> FnOnce(
        ContextGuard<'ctx>,
        mpsc::Receiver<(u32, DeviceBuffer<'ctx, u32>)>,
    ) -> Result<(), Error>
    + Send,
) {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared: SharedContext<'_> = ctx.share();
        std::thread::scope(|t| {
            let (tx, rx) = mpsc::sync_channel(2);
            let writer = t.spawn(move || {
                shared.enter(|g| {
                    for round in 0..ROUNDS as u32 {
                        let mut buf = g.zeroed::<u32>(n)?;
                        buf.fill(value(round))?;
                        tx.send((round, buf)).expect("the reader is there");
                    }
                    Ok::<_, Error>(())
                })
            });
            let reader = t.spawn(move || shared.enter(|g| reader(g, rx)));
            writer.join().unwrap().unwrap();
            reader.join().unwrap().unwrap();
        });
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn a_buffer_written_on_one_thread_is_seen_by_another_threads_scope() {
    hand_over(
        8 << 20,
        |round| round * 3 + 1,
        |g, rx| {
            let stream = g.new_stream()?;
            for (round, buf) in rx {
                assert_all(&read_in_scope(&stream, &buf), round * 3 + 1, "handed over");
            }
            Ok(())
        },
    );
}

/// A fill made on one thread's sync stream, handed over, then copied on the device and read
/// back by the other thread's synchronous operations (its own sync stream): the other sync
/// stream waits for the first sync stream's record before the copy.
fn a_buffer_written_on_one_thread_is_seen_by_another_threads_synchronous_copy() {
    hand_over(
        16 << 20,
        |round| round * 5 + 2,
        |g, rx| {
            let mut copy = g.zeroed::<u32>(16 << 20)?;
            for (round, buf) in rx {
                copy.copy_from_device(&buf)?;
                assert_all(
                    &copy.to_vec()?,
                    round * 5 + 2,
                    "copied on another sync stream",
                );
            }
            Ok(())
        },
    );
}

fn a_pool_slice_written_in_another_context_is_seen_by_its_own_contexts_scope() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |a| {
        let stream_a = a.new_stream()?;
        let n = 16 << 20;
        let mut buf = a.zeroed::<u32>(n)?;
        with_context(&device, ContextFlags::default(), |_b| {
            for round in 0..ROUNDS as u32 {
                // pool memory belongs to no context: the fill runs on the legacy stream of
                // b, the current one; a's stream must still wait for it
                buf.fill(round + 7)?;
                assert_all(
                    &read_in_scope(&stream_a, &buf),
                    round + 7,
                    "written in b, read in a",
                );
                // and a synchronous read made in b sees a write made in a (a `from_slice`)
                let fresh = DeviceBuffer::from_slice(a, &vec![round; 1 << 20])?;
                assert_all(&fresh.to_vec()?, round, "written in a, read in b");
            }
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// `ContextGuard::synchronize` of one context waits for the crate's synchronous writes
/// still pending in another (the synchronous layer's wait for every pending record, which
/// the context layer calls through the hooks that layer registers): each round queues slow
/// fills and then a fill of `buf` on the thread's sync stream in `a`, and after `b`
/// synchronizes, no write of `buf` is incomplete. `cuCtxSynchronize` of `b` alone leaves
/// `a`'s sync stream running.
fn synchronize_waits_for_a_pending_write_of_another_context() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |a| {
        let shared = a.share();
        let mut slow = a.zeroed::<u32>(1 << 28)?;
        let mut buf = a.zeroed::<u32>(1 << 20)?;
        // SAFETY (of the test): only the address is taken, while nothing is pending.
        let at = unsafe { buf.as_device_ptr() };
        let bytes = buf.size_in_bytes() as u64;
        with_context(&device, ContextFlags::default(), |b| {
            let mut pending_rounds = 0;
            for round in 0..ROUNDS as u32 {
                shared.enter(|_| {
                    keep_busy(&mut slow, 8)?;
                    buf.fill(round + 3)
                })?;
                if order::incomplete_writes_of(at, bytes)? > 0 {
                    pending_rounds += 1;
                }
                b.synchronize()?;
                assert_eq!(
                    order::incomplete_writes_of(at, bytes)?,
                    0,
                    "round {round}: a write of a's buffer still running after b synchronized"
                );
            }
            assert!(
                pending_rounds > 0,
                "no fill was still pending when b synchronized: the test showed nothing"
            );
            Ok::<_, Error>(())
        })?;
        assert_all(&buf.to_vec()?, ROUNDS as u32 + 2, "the last fill");
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn synchronous_2d_and_3d_copies_are_seen_by_the_next_scope() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let (w, h) = (4096usize, 1024usize);
        let host: Vec<u32> = (0..(w * h) as u32).collect();
        let mut flat = DeviceBuffer2D::<u32>::zeroed(ctx, w, h)?;
        let (x, y, z) = (256usize, 64usize, 64usize);
        let volume: Vec<u32> = (0..(x * y * z) as u32).rev().collect();
        let mut cube = DeviceBuffer3D::<u32>::zeroed(ctx, x, y, z)?;
        let (zeros, zeros_3d) = (vec![0u32; w * h], vec![0u32; x * y * z]);
        for _ in 0..ROUNDS {
            // a scope writes first (complete at its end), then the synchronous copy
            stream.scope(|s| s.copy_2d_from_host(&mut flat, &zeros, w))?;
            flat.copy_from_host(&host, w)?;
            let mut back = vec![0u32; w * h];
            stream.scope(|s| s.copy_2d_to_host(&mut back, w, &flat))?;
            assert_eq!(back, host, "2D copy");
            stream.scope(|s| s.copy_3d_from_host(&mut cube, &zeros_3d, x, y))?;
            cube.copy_from_host(&volume, x, y)?;
            let mut back = vec![0u32; x * y * z];
            stream.scope(|s| s.copy_3d_to_host(&mut back, x, y, &cube))?;
            assert_eq!(back, volume, "3D copy");
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn a_partitions_green_stream_sees_a_synchronous_write_of_the_partition() {
    let device = common::gpu();
    let outcome = with_partitions(&device, |sms| {
        let count = sms.min_partition().max(8);
        let (part, _rest) = sms.split(count)?;
        part.enter(|p: PartitionGuard<'_>| {
            let stream = p.new_stream()?;
            let n = 16 << 20;
            let mut buf = p.zeroed::<u32>(n)?;
            for round in 0..ROUNDS as u32 {
                buf.fill(round ^ 0x5a5a)?;
                let mut host = vec![0u32; n];
                stream.scope(|s| s.copy_to_host(&mut host, &buf))?;
                assert_all(&host, round ^ 0x5a5a, "partition");
            }
            Ok::<_, Error>(())
        })
    });
    match outcome {
        Err(e) if e.code() == ErrorCode::DriverTooOld => {
            common::skip(format!("no green contexts ({e})"))
        }
        other => other.unwrap(),
    }
}

fn a_peer_gpu_sees_a_synchronous_write_on_the_other_gpu() {
    let n = Device::count().expect("a device count");
    assert!(n >= 2, "needs two GPUs, this machine has {n}");
    let (d0, d1) = (Device::get(0).unwrap(), Device::get(1).unwrap());
    with_context(&d0, ContextFlags::default(), |a| {
        with_context(&d1, ContextFlags::default(), |b| {
            let stream_b = b.new_stream()?;
            let len = 16 << 20;
            for round in 0..ROUNDS as u32 {
                let src = DeviceBuffer::from_slice(a, &vec![round + 11; len])?;
                // a synchronous peer copy right after the write
                let mut dst = DeviceBuffer::<u32>::zeroed(b, len)?;
                copy_peer(&mut dst, b, &src, a)?;
                assert_all(&read_in_scope(&stream_b, &dst), round + 11, "copy_peer");
                // and a scope of the other GPU reading it
                let mut again = DeviceBuffer::<u32>::zeroed(b, len)?;
                stream_b.scope(|s| s.copy_from_peer(&mut again, &src, a))?;
                assert_all(&again.to_vec()?, round + 11, "copy_from_peer");
            }
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// A small random program per thread, four threads on one context (two streams each),
/// mixing synchronous fills and copies with scope fills and reads of the same buffers, and
/// checking every read against a model: the attack the issue asks for before calling the
/// change done. Deterministic (a linear congruential generator per thread).
fn mixed_synchronous_and_scope_work_on_four_threads_matches_a_model() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        std::thread::scope(|t| {
            let workers: Vec<_> = (0..4u64)
                .map(|seed| {
                    t.spawn(move || {
                        shared.enter(|g| {
                            let n = 1 << 20;
                            let (a, b) = (g.new_stream()?, g.new_stream()?);
                            let mut bufs = [
                                g.zeroed::<u32>(n)?,
                                g.zeroed::<u32>(n)?,
                                g.zeroed::<u32>(n)?,
                            ];
                            let mut model = [0u32; 3];
                            let mut x =
                                seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                            let mut next = |m: u64| {
                                x = x
                                    .wrapping_mul(6_364_136_223_846_793_005)
                                    .wrapping_add(1_442_695_040_888_963_407);
                                ((x >> 33) % m) as usize
                            };
                            for step in 0..300u32 {
                                let (i, j) = (next(3), next(3));
                                let value = step.wrapping_mul(2_654_435_761) ^ seed as u32;
                                match next(5) {
                                    0 => {
                                        bufs[i].fill(value)?;
                                        model[i] = value;
                                    }
                                    1 if i != j => {
                                        let (dst, src) = pair(&mut bufs, i, j);
                                        dst.copy_from_device(src)?;
                                        model[i] = model[j];
                                    }
                                    2 => {
                                        let stream = if next(2) == 0 { &a } else { &b };
                                        stream.scope(|s| s.fill(&mut bufs[i], value))?;
                                        model[i] = value;
                                    }
                                    3 => {
                                        let (mut lo, mut hi) =
                                            (vec![0u32; n / 2], vec![0u32; n / 2]);
                                        let (first, second) = bufs[i].split_at(n / 2);
                                        a.scope_pair(&b, |sa, sb| {
                                            sa.copy_to_host(&mut lo, first)?;
                                            sb.copy_to_host(&mut hi, second)
                                        })?;
                                        assert_all(&lo, model[i], "mixed: stream a");
                                        assert_all(&hi, model[i], "mixed: stream b");
                                    }
                                    _ => {
                                        // a synchronous fill inside an open scope, read by
                                        // it
                                        let mut host = vec![0u32; n];
                                        let buf = &mut bufs[i];
                                        a.scope(|s| {
                                            buf.fill(value)?;
                                            s.copy_to_host(&mut host, &*buf)
                                        })?;
                                        model[i] = value;
                                        assert_all(&host, value, "mixed: inside a scope");
                                    }
                                }
                            }
                            for (k, buf) in bufs.iter().enumerate() {
                                assert_all(&buf.to_vec()?, model[k], "mixed: the end");
                            }
                            Ok::<_, Error>(())
                        })
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap().unwrap();
            }
        });
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// Two distinct elements of `bufs`, the first mutable.
fn pair<'a, 'ctx>(
    bufs: &'a mut [DeviceBuffer<'ctx, u32>; 3],
    i: usize,
    j: usize,
) -> (&'a mut DeviceBuffer<'ctx, u32>, &'a DeviceBuffer<'ctx, u32>) {
    assert_ne!(i, j);
    if i < j {
        let (lo, hi) = bufs.split_at_mut(j);
        (&mut lo[i], &hi[0])
    } else {
        let (lo, hi) = bufs.split_at_mut(i);
        (&mut hi[0], &lo[j])
    }
}

/// A context another library made current (here the primary context, retained and pushed
/// with raw calls, as cudarc's `bind_to_thread` does) gets no event of the legacy order: a
/// write into pool memory made while it is current is waited for on the host, so nothing
/// of it is left in the book once the library destroys the context (a later scope would
/// otherwise wait on a destroyed event).
fn a_context_another_library_made_current_leaves_no_event_behind() {
    let device = common::gpu();
    let driver = common::driver();
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let n = 16 << 20;
        let mut buf = ctx.zeroed::<u32>(n)?;
        for round in 0..ROUNDS as u32 {
            let mut primary = std::ptr::null_mut();
            // SAFETY (of the test): retains and pushes the primary context, undone below.
            unsafe {
                assert_eq!(
                    (driver.cuDevicePrimaryCtxRetain)(&mut primary, device.as_raw()),
                    0
                );
                assert_eq!((driver.cuCtxPushCurrent_v2)(primary), 0);
            }
            // pool memory: the fill runs in the current context, the library's
            let filled = buf.fill(round + 3);
            let mut popped = std::ptr::null_mut();
            // SAFETY: undoes the push and the retain (the primary context is destroyed,
            // nobody else holds it).
            unsafe {
                assert_eq!((driver.cuCtxPopCurrent_v2)(&mut popped), 0);
                assert_eq!((driver.cuDevicePrimaryCtxRelease_v2)(device.as_raw()), 0);
            }
            filled?;
            assert_all(
                &read_in_scope(&stream, &buf),
                round + 3,
                "written in a foreign context",
            );
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

const PTX: &str = include_str!("../kernels/kernels.ptx");

/// A module global written synchronously (`global_mut().copy_from_host`: 4 bytes, through
/// the sync stream's bounce ring, queued behind a second of fills so that it is still
/// pending) is read by a kernel whose arguments name no memory at all (`bump(int)`): memory
/// the crate cannot place orders every later user, so the launch waits for the upload.
fn a_module_global_written_synchronously_is_seen_by_a_launch_that_names_no_buffer() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut module = Module::from_ptx(ctx, PTX)?;
        let mut slow = ctx.zeroed::<u32>(1 << 28)?;
        let stream = ctx.new_stream()?;
        for round in 0..ROUNDS as i32 {
            for i in 0..8 {
                slow.fill(i)?; // queued on this thread's sync stream, returns at once
            }
            module
                .global_mut::<i32>("counter")?
                .copy_from_host(&[round * 10])?;
            {
                // SAFETY: bump(int) writes only its module's globals `counter` and `table`.
                let mut bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
                stream.scope(|s| s.launch(&mut bump, LaunchConfig::linear(1, 32), (3i32,)))?;
            }
            let counter = module.global::<i32>("counter")?.to_vec()?;
            assert_eq!(
                counter,
                [round * 10 + 3],
                "round {round}: the launch ran first"
            );
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// Threads of one context do not queue behind each other's unrelated synchronous work:
/// one thread queues about a second of fills of its own 1 GiB buffer on its sync stream
/// (they return at once), then another thread, whose sync stream exists already, uploads,
/// fills and reads back buffers of its own, synchronously and in scopes. Its work is
/// ordered after nothing of the first (its memory is not the first's), so it finishes long
/// before the fills do. Runs alone: another test's write of memory the crate cannot place
/// (a pitched buffer, a module global) would rightly make this thread wait.
fn unrelated_synchronous_work_of_another_thread_is_not_waited_for() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let mut slow = ctx.zeroed::<u32>(1 << 28)?;
        let (ready_tx, ready_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel();
        let (started, queued, other) = std::thread::scope(|t| {
            let other = t.spawn(move || {
                shared.enter(|g| {
                    let stream = g.new_stream()?;
                    // the sync stream and its bounce ring are made before the fills
                    let warm = g.from_slice(&[0u32; 1024])?;
                    assert_eq!(warm.to_vec()?, [0; 1024]);
                    ready_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    let begun = std::time::Instant::now();
                    for round in 0..ROUNDS as u32 {
                        let mut a = g.from_slice(&[round; 1024])?;
                        a.fill(round + 1)?;
                        assert_all(&read_in_scope(&stream, &a), round + 1, "the other thread's");
                        assert_eq!(a.to_vec()?, [round + 1; 1024]);
                    }
                    Ok::<_, Error>(begun.elapsed())
                })
            });
            ready_rx.recv().unwrap();
            let started = std::time::Instant::now();
            for i in 0..3000 {
                slow.fill(i)?;
            }
            let queued = started.elapsed();
            go_tx.send(()).unwrap();
            Ok::<_, Error>((started, queued, other.join().unwrap()?))
        })?;
        ctx.synchronize()?;
        let fills = started.elapsed();
        eprintln!("fills {fills:?} (queued in {queued:?}), the other thread's work {other:?}");
        // queueing blocks once the driver's queue is full (3000 fills took 654 ms to queue
        // of their 993 ms on an H100): the other thread began when the last were queued
        assert!(
            fills - queued > std::time::Duration::from_millis(100),
            "the premise: the fills ({fills:?}) outlast their queueing ({queued:?})"
        );
        assert!(
            other * 4 < fills - queued,
            "the other thread took {other:?}, the fills {fills:?} (queued in {queued:?}): it \
             waited for them"
        );
        assert_all(&slow.to_vec()?, 2999, "the last fill");
        Ok::<_, Error>(())
    })
    .unwrap();
}

gpu_tests!(
    a_synchronous_fill_is_seen_by_the_next_scope_at_every_size,
    a_module_global_written_synchronously_is_seen_by_a_launch_that_names_no_buffer,
    a_zeroed_or_uploaded_buffer_is_seen_by_the_next_scope_at_every_size,
    a_synchronous_write_inside_an_open_scope_is_seen_by_its_later_operations,
    two_streams_of_one_scope_see_a_synchronous_write_made_before_it,
    a_buffer_written_on_one_thread_is_seen_by_another_threads_scope,
    a_buffer_written_on_one_thread_is_seen_by_another_threads_synchronous_copy,
    a_pool_slice_written_in_another_context_is_seen_by_its_own_contexts_scope,
    synchronize_waits_for_a_pending_write_of_another_context,
    synchronous_2d_and_3d_copies_are_seen_by_the_next_scope,
    mixed_synchronous_and_scope_work_on_four_threads_matches_a_model,
    a_context_another_library_made_current_leaves_no_event_behind,
    ; two_gpus: [a_peer_gpu_sees_a_synchronous_write_on_the_other_gpu]
);

/// Tests that run alone: a device is partitioned by one closure at a time.
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    Vec::from([
        Test {
            name: "a_partitions_green_stream_sees_a_synchronous_write_of_the_partition",
            needs: Needs::Gpu,
            body: a_partitions_green_stream_sees_a_synchronous_write_of_the_partition,
        },
        Test {
            name: "unrelated_synchronous_work_of_another_thread_is_not_waited_for",
            needs: Needs::Gpu,
            body: unrelated_synchronous_work_of_another_thread_is_not_waited_for,
        },
    ])
}
