//! SM partitions (green contexts, `with_partitions`) on a real GPU: the split's sizes as
//! asked and as the driver reports them, SMs that do not overlap (read back from `%smid`),
//! each partition computing with its own module, memory and stream, a short kernel that
//! runs while the other partition is saturated, and the errors for splits the device
//! cannot give and for contexts entered inside a partitioned closure; and the operations a
//! partition's guard takes besides allocation (a graph captured and replayed, a `Library`'s
//! kernel, NVRTC's module, one `Allocates` helper, phases in a partition), each checked to
//! run on the partition's SMs. Skips without a
//! device (or a driver without green contexts: CUDA 12.5 for their streams); fails instead
//! with `CUDA_BRAND_REQUIRE_GPU=1`.
//!
//! Every test runs alone: a device is partitioned by one closure at a time (a second
//! `with_partitions` is refused), and the saturation test measures time.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::common;

use cuda_brand::prelude::*;
use cuda_brand::{
    Allocates, DeviceAttribute, ErrorCode, Library, MemoryPool, PartitionGuard, with_partitions,
    with_phases,
};

const PTX: &str = include_str!("../kernels/kernels.ptx");

/// `smid_of_block(unsigned *out, size_t len)`: block `b` (< `len`) writes the SM it ran on
/// (`%smid`) to `out[b]`. Written by hand for this test (no nvcc here).
const SMID_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry smid_of_block(
	.param .u64 smid_of_block_param_0,
	.param .u64 smid_of_block_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<7>;

	ld.param.u64 	%rd1, [smid_of_block_param_0];
	ld.param.u64 	%rd2, [smid_of_block_param_1];
	mov.u32 	%r1, %ctaid.x;
	cvt.u64.u32 	%rd3, %r1;
	setp.ge.u64 	%p1, %rd3, %rd2;
	@%p1 bra 	$L__BB0_2;
	mov.u32 	%r2, %smid;
	cvta.to.global.u64 	%rd4, %rd1;
	shl.b64 	%rd5, %rd3, 2;
	add.s64 	%rd6, %rd4, %rd5;
	st.global.u32 	[%rd6], %r2;
$L__BB0_2:
	ret;
}
"#;

/// The device; the test is skipped (see [`common::gpu`]) where there is none, or where it
/// or its driver has no green contexts.
fn partitionable() -> Device {
    let device = common::gpu();
    match with_partitions(&device, |sms| Ok::<_, Error>(sms.count())) {
        Ok(_) => device,
        Err(e) if e.code() == ErrorCode::DriverTooOld => {
            common::skip(format!("no green contexts ({e})"))
        }
        Err(e) => panic!("with_partitions on device 0: {e}"),
    }
}

/// The distinct SMs that 4 * `sm_count` blocks of `smid_of_block` ran on, in partition `p`.
fn sms_used(p: PartitionGuard<'_>) -> Result<BTreeSet<u32>, Error> {
    let module = p.module_from_ptx(SMID_PTX)?;
    // SAFETY: smid_of_block(unsigned*, size_t) writes out[blockIdx.x] only below len.
    let smid = unsafe { module.kernel::<(Out<u32>,)>("smid_of_block") }?;
    let blocks = 4 * p.sm_count();
    let mut out = p.zeroed::<u32>(blocks as usize)?;
    let stream = p.new_stream()?;
    stream.scope(|s| s.launch(&smid, LaunchConfig::linear(blocks, 32), (&mut out,)))?;
    Ok(out.to_vec()?.into_iter().collect())
}

fn a_split_gives_two_partitions_of_the_sizes_asked_on_disjoint_sms() {
    let device = partitionable();
    with_partitions(&device, |sms| {
        let (total, min, align) = (sms.count(), sms.min_partition(), sms.alignment());
        eprintln!("{total} SMs, partitions of at least {min}, multiples of {align}");
        assert_eq!(
            total as i32,
            device.attribute(DeviceAttribute::MultiprocessorCount)?,
            "the SM resource has every SM"
        );
        let ask = 2 * min.max(align);
        let (b, a) = sms.split(ask)?;
        assert_eq!(
            b.sm_count(),
            ask,
            "a multiple of the alignment is split as asked"
        );
        assert_eq!(a.sm_count(), total - ask, "the rest is the remainder");
        let (b_count, a_count) = (b.sm_count(), a.sm_count());
        let (used_a, used_b) = a.enter(|pa| {
            assert_eq!(pa.sm_count(), a_count);
            b.enter(|pb| {
                assert_eq!(pb.sm_count(), b_count);
                Ok::<_, Error>((sms_used(pa)?, sms_used(pb)?))
            })
        })?;
        eprintln!("partition A ran on {used_a:?}, B on {used_b:?}");
        assert!(
            used_a.len() <= a_count as usize,
            "A used {} SMs",
            used_a.len()
        );
        assert!(
            used_b.len() <= b_count as usize,
            "B used {} SMs",
            used_b.len()
        );
        assert!(
            used_a.is_disjoint(&used_b),
            "shared SMs: {:?}",
            used_a.intersection(&used_b).collect::<Vec<_>>()
        );
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn each_partition_computes_with_its_own_module_memory_and_stream() {
    let device = partitionable();
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let (sum_a, sum_b) = with_partitions(&device, |sms| {
        let each = sms.min_partition().max(8);
        // the rest, if any, is never entered: it makes no partition
        let (groups, _rest) = sms.split_groups(each, 2)?;
        assert_eq!(groups.len(), 2);
        let mut groups = groups.into_iter();
        let (first, second) = (groups.next().unwrap(), groups.next().unwrap());
        first.enter(|a| {
            second.enter(|b| {
                let run = |p: PartitionGuard<'_>, k: f32| -> Result<Vec<f32>, Error> {
                    let module = p.module_from_ptx(PTX)?;
                    // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*,
                    // size_t) stays below all three lengths.
                    let add =
                        unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
                    let y: Vec<f32> = x.iter().map(|v| v * k).collect();
                    let (dx, dy) = (p.from_slice(&x)?, p.from_slice(&y)?);
                    let mut dz = p.zeroed::<f32>(n)?;
                    let stream = p.new_stream()?;
                    stream.scope(|s| s.launch(&add, add.config_for(n)?, (&dx, &dy, &mut dz)))?;
                    dz.to_vec()
                };
                Ok::<_, Error>((run(a, 2.0)?, run(b, 3.0)?))
            })
        })
    })
    .unwrap();
    for i in [0, 1, n / 2, n - 1] {
        assert_eq!(sum_a[i], 3.0 * i as f32, "partition A, element {i}");
        assert_eq!(sum_b[i], 4.0 * i as f32, "partition B, element {i}");
    }
}

fn a_short_kernel_finishes_while_the_other_partition_is_saturated() {
    let device = partitionable();
    if common::under_sanitizer() {
        common::skip(common::SERIAL_UNDER_SANITIZER);
    }
    // kHz: the clock that `clock64()` counts
    let cycles_per_second = i64::from(device.attribute(DeviceAttribute::ClockRate).unwrap()) * 1000;
    with_partitions(&device, |sms| {
        let (critical, bulk) = sms.split(16)?;
        bulk.enter(|a| {
            critical.enter(|b| {
                let (ma, mb) = (a.module_from_ptx(PTX)?, b.module_from_ptx(PTX)?);
                // SAFETY: spin(long long cycles) touches no memory.
                let spin_a = unsafe { ma.kernel::<(i64,)>("spin") }?;
                // SAFETY: as above.
                let spin_b = unsafe { mb.kernel::<(i64,)>("spin") }?;
                let (sa, sb) = (a.new_stream()?, b.new_stream()?);
                // warm both up (module loading is lazy)
                sa.scope(|s| s.launch(&spin_a, LaunchConfig::linear(1, 32), (1,)))?;
                sb.scope(|s| s.launch(&spin_b, LaunchConfig::linear(1, 32), (1,)))?;
                // A: every SM of A full, for about 0.3 s a wave
                let bulk_work = LaunchConfig::linear(8 * a.sm_count(), 256);
                let started = Instant::now();
                sa.scope(|s| {
                    s.launch(&spin_a, bulk_work, (cycles_per_second * 3 / 10,))?;
                    // B, queued after A's kernel: must not wait for it
                    let t = Instant::now();
                    sb.scope(|s| s.launch(&spin_b, LaunchConfig::linear(8, 256), (1_000,)))?;
                    let short = t.elapsed();
                    let a_busy = !sa.is_idle()?;
                    eprintln!("B's short kernel: {short:?}; A still busy: {a_busy}");
                    assert!(a_busy, "A's kernel ended before B's was measured");
                    assert!(
                        short < Duration::from_millis(50),
                        "B's kernel waited for A's: {short:?}"
                    );
                    Ok::<_, Error>(())
                })?;
                assert!(started.elapsed() > Duration::from_millis(100));
                Ok::<_, Error>(())
            })
        })
    })
    .unwrap();
}

fn splits_the_device_cannot_give_are_errors_naming_the_numbers() {
    let device = partitionable();
    let total = with_partitions(&device, |sms| Ok::<_, Error>(sms.count())).unwrap();
    for (ask, words) in [
        (0, "a partition of 0 SMs".to_owned()),
        (total + 1, format!("the device has {total}")),
        // all of them: rounded past the device (132 on an H100, not a multiple of 8), or
        // leaving nothing for the second partition
        (total, format!("{total}")),
    ] {
        let e = with_partitions(&device, |sms| sms.split(ask).map(|_| ())).unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("Sms::split", ErrorCode::InvalidInput),
            "{e}"
        );
        assert!(e.to_string().contains(&words), "{ask} SMs: {e}");
    }
    let e = with_partitions(&device, |sms| sms.split_groups(8, total).map(|_| ())).unwrap_err();
    assert!(e.to_string().contains("partitions of 8 SMs"), "{e}");
    // a partition's streams are non-blocking: the driver requires it
    let e = with_partitions(&device, |sms| {
        let (part, _) = sms.split(1)?;
        part.enter(|p| Stream::new(p, StreamFlags::Default).map(drop))
    })
    .unwrap_err();
    assert_eq!(
        (e.call(), e.code()),
        ("Stream::new", ErrorCode::InvalidInput)
    );
}

fn no_other_context_is_entered_inside_a_partitioned_closure() {
    let device = partitionable();
    let refused = |r: Result<(), Error>, call: &str| {
        let e = r.unwrap_err();
        assert_eq!((e.call(), e.code()), (call, ErrorCode::NotPermitted), "{e}");
    };
    // an owned context made before the partitions, entered on another thread during them
    let home = cuda_brand::owned::OwnedContext::primary(&device).unwrap();
    with_partitions(&device, |sms| {
        refused(
            with_context(&device, ContextFlags::default(), |_| Ok(())),
            "with_context",
        );
        refused(
            with_primary_context(&device, |_| Ok(())),
            "with_primary_context",
        );
        refused(with_partitions(&device, |_| Ok(())), "with_partitions");
        // a scoped thread spawned in the closure is not inside it on its own thread, but
        // the device is partitioned: no context of it is entered there either
        std::thread::scope(|t| {
            t.spawn(|| {
                refused(
                    with_context(&device, ContextFlags::default(), |_| Ok(())),
                    "with_context",
                );
                refused(
                    with_primary_context(&device, |_| Ok(())),
                    "with_primary_context",
                );
                refused(home.enter(|_| Ok(())), "OwnedContext::enter");
            });
        });
        let (part, _) = sms.split(1)?;
        part.enter(|_p| {
            refused(
                with_context(&device, ContextFlags::default(), |_| Ok(())),
                "with_context",
            );
            Ok::<_, Error>(())
        })
    })
    .unwrap();
    // and no partitions inside a context's closure, whose guard the closure could use
    with_context(&device, ContextFlags::default(), |_ctx| {
        refused(with_partitions(&device, |_| Ok(())), "with_partitions");
        Ok::<_, Error>(())
    })
    .unwrap();
    // once the closure has returned, contexts are entered as before
    with_context(&device, ContextFlags::default(), |ctx| ctx.synchronize()).unwrap();
    home.enter(|ctx| ctx.synchronize()).unwrap();
}

fn a_partitions_context_is_made_current_on_its_own_thread_only() {
    // The driver: "a green context can be current to only one thread at a time. There is
    // no internal synchronization to make API calls accessing the same green context from
    // multiple threads work." A partition's stream and buffers are `Send` and `Sync`; an
    // operation that makes their context current (a scope's allocation, a buffer's drop)
    // on a scoped thread, while the partition's thread has it current, is refused.
    let device = partitionable();
    with_partitions(&device, |sms| {
        let (part, _) = sms.split(1)?;
        part.enter(|p| {
            let stream = p.new_stream()?;
            let on_other = std::thread::scope(|t| {
                t.spawn(|| stream.scope(|s| s.alloc_zeroed::<u32>(16).map(drop)))
                    .join()
                    .unwrap()
            });
            let e = on_other.unwrap_err();
            assert_eq!(e.code(), ErrorCode::NotPermitted, "{e}");
            assert!(e.to_string().contains("one thread at a time"), "{e}");
            // on the partition's own thread, as before
            stream.scope(|s| s.alloc_zeroed::<u32>(16).map(drop))?;
            Ok::<_, Error>(())
        })
    })
    .unwrap();
    // and the record of the partition is gone: its thread's context is entered elsewhere
    with_context(&device, ContextFlags::default(), |ctx| ctx.synchronize()).unwrap();
}

fn a_part_is_not_entered_on_a_thread_with_a_plain_context_current() {
    // A part is `Send`: a scoped thread spawned in the partitioned closure may enter it.
    // That thread is outside every partition until then, so it may try to enter a plain
    // context first, whose guard its partition's closure could capture and use: work
    // outside every partition. The device is partitioned, so the plain context is refused
    // already (`with_context`); `SmGroup::enter` makes the same check as `with_partitions`
    // (no context current) behind it, for a context of another device.
    let device = partitionable();
    with_partitions(&device, |sms| {
        let (part, rest) = sms.split(1)?;
        let entered = std::thread::scope(|t| {
            t.spawn(|| {
                with_context(&device, ContextFlags::default(), |plain| {
                    part.enter(|_p| {
                        // were it entered: `plain` is reachable here
                        plain.new_stream().map(drop)
                    })
                })
            })
            .join()
            .unwrap()
        });
        let e = entered.unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("with_context", ErrorCode::NotPermitted),
            "{e}"
        );
        assert!(
            e.detail().unwrap().contains("the device is partitioned"),
            "{e}"
        );
        // a scoped thread with no context current enters a part as the closure's does
        std::thread::scope(|t| {
            t.spawn(|| rest.enter(|p| p.new_stream().map(drop)))
                .join()
                .unwrap()
        })
    })
    .unwrap();
}

/// A batch's closure panics while another thread has partitioned the device: `submit`
/// waits for the batch's stream before it resumes the panic, with the batch's context still
/// current (the wait makes it current for its own calls, which no partition refuses), so
/// the work is over when the unwind drops the batch, and its buffer goes back to the pool.
/// (Before the first fix the unwind dropped the batch without the wait, freeing the buffer
/// while the batch's fills still wrote it; after it, the wait entered the context again,
/// was refused, and the batch was leaked: its buffer stayed allocated.)
fn a_panicking_batch_is_waited_for_then_freed_while_another_thread_partitions_the_device() {
    use cuda_brand::owned::OwnedContext;
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::{Arc, mpsc};
    let device = partitionable();
    let home = OwnedContext::primary(&device).unwrap();
    let bytes = 64 << 20;
    let (stream, buf) = home
        .enter(|ctx| {
            let stream = home.unbind(ctx, ctx.new_stream()?)?;
            let buf = home.unbind(ctx, ctx.zeroed::<u32>(bytes / 4)?)?;
            Ok::<_, Error>((Arc::new(stream), buf))
        })
        .unwrap();
    let used = || {
        home.enter(|ctx| cuda_brand::MemoryPool::of_device(ctx)?.used_bytes())
            .unwrap()
    };
    let before = used();
    let (to_b, from_a) = mpsc::channel::<()>();
    let (to_a, from_b) = mpsc::channel::<()>();
    let (unwound, wait_unwound) = mpsc::channel::<()>();
    std::thread::scope(|t| {
        let device = &device;
        t.spawn(move || {
            from_a.recv().unwrap(); // the batch's closure is running
            with_partitions(device, |_sms| {
                to_a.send(()).unwrap();
                wait_unwound.recv().unwrap();
                Ok::<_, Error>(())
            })
            .unwrap();
        });
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            let _work = stream.submit(buf, move |s, d| {
                for _ in 0..100 {
                    s.fill(d, 7u32)?;
                }
                to_b.send(()).unwrap();
                from_b.recv().unwrap(); // the device is partitioned now
                panic!("a batch's closure panics");
            });
        }));
        let payload = caught.expect_err("the closure's panic is resumed by submit");
        assert_eq!(
            payload.downcast_ref::<&str>().copied(),
            Some("a batch's closure panics")
        );
        unwound.send(()).unwrap();
    });
    // the partition has ended: entering works again
    home.enter(|ctx| ctx.synchronize()).unwrap();
    assert_eq!(
        used() + bytes as u64,
        before,
        "the batch, waited for, is dropped by the unwind: its buffer is back in the pool"
    );
}

/// A batch submitted while another thread has partitioned the device: its context cannot
/// be entered, so nothing is queued, and the future is ready at once with the error and
/// the batch (it used to be marked lost: `wait` panicked and the batch was leaked).
fn a_batch_submitted_while_the_device_is_partitioned_is_refused_with_its_batch() {
    use cuda_brand::owned::OwnedContext;
    use std::sync::{Arc, mpsc};
    let device = partitionable();
    let home = OwnedContext::primary(&device).unwrap();
    let stream = home
        .enter(|ctx| Ok::<_, Error>(Arc::new(home.unbind(ctx, ctx.new_stream()?)?)))
        .unwrap();
    let (to_a, from_b) = mpsc::channel::<()>();
    let (done, wait_done) = mpsc::channel::<()>();
    std::thread::scope(|t| {
        let device = &device;
        t.spawn(move || {
            with_partitions(device, |_sms| {
                to_a.send(()).unwrap();
                wait_done.recv().unwrap();
                Ok::<_, Error>(())
            })
            .unwrap();
        });
        from_b.recv().unwrap();
        let work = stream.submit(vec![1u32, 2, 3, 4], |_s, _host| Ok(()));
        assert!(work.is_done(), "refused before anything was queued");
        let (result, batch) = work.wait();
        done.send(()).unwrap();
        let e = result.expect_err("the entry is refused while the device is partitioned");
        assert_eq!(e.code(), ErrorCode::NotPermitted, "{e}");
        assert_eq!(batch, [1, 2, 3, 4], "the batch comes back as it went in");
    });
}

/// An owned primary context of `device`, a stream of it and the sample `spin` kernel, for
/// the batches below.
fn owned_spinner(
    device: &Device,
) -> (
    cuda_brand::owned::OwnedContext,
    std::sync::Arc<cuda_brand::owned::OwnedStream>,
    std::sync::Arc<cuda_brand::owned::OwnedKernel<(i64,)>>,
) {
    use cuda_brand::owned::{OwnedContext, OwnedKernel};
    use std::sync::Arc;
    let home = OwnedContext::primary(device).unwrap();
    let (stream, module) = home
        .enter(|ctx| {
            let stream = home.unbind(ctx, ctx.new_stream()?)?;
            let module =
                home.unbind(ctx, ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?)?;
            Ok::<_, Error>((Arc::new(stream), Arc::new(module)))
        })
        .unwrap();
    // SAFETY: spin(long long) busy-waits and touches no memory.
    let spin = Arc::new(unsafe { OwnedKernel::<(i64,)>::new(&module, "spin") }.unwrap());
    (home, stream, spin)
}

/// Runs `during` on this thread while another thread's `with_partitions` closure has
/// `device`, and returns its result once that closure has ended. Asserts that `home` cannot
/// be entered before `during` runs and after it returns (so `during` ran while the device
/// was partitioned from beginning to end).
fn while_another_thread_partitions<R>(
    device: &Device,
    home: &cuda_brand::owned::OwnedContext,
    during: impl FnOnce() -> R,
) -> R {
    use std::sync::mpsc;
    let refused = || {
        let e = home.enter(|_| Ok::<_, Error>(())).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotPermitted, "{e}");
    };
    let (partitioned, wait_partitioned) = mpsc::channel::<()>();
    let (end, wait_end) = mpsc::channel::<()>();
    std::thread::scope(|t| {
        t.spawn(move || {
            with_partitions(device, |_sms| {
                partitioned.send(()).unwrap();
                // (an `Err` when this thread's test panicked: the partition ends then too)
                let _ = wait_end.recv();
                Ok::<_, Error>(())
            })
            .unwrap();
        });
        wait_partitioned.recv().unwrap();
        refused();
        let r = during();
        refused();
        end.send(()).unwrap();
        r
    })
}

/// About `ms` milliseconds of GPU time for `spin` (an H100 runs near 2 GHz; only its length
/// against the host calls matters).
fn spin_cycles(ms: i64) -> i64 {
    ms * 2_000_000
}

/// A batch waited for ([`Pending::wait`]) while another thread's `with_partitions` closure
/// has the device: waiting needs no entry into the batch's context, which the partition
/// refuses (the event is waited for, and the scope ended, with the context made current
/// for those calls alone), so `wait` returns the batch with its values while the device is
/// still partitioned. (It used to enter the context, was refused, leaked the batch and
/// panicked.)
///
/// [`Pending::wait`]: cuda_brand::owned::Pending::wait
fn a_batch_waited_for_while_another_thread_partitions_the_device_comes_back_with_its_values() {
    let device = partitionable();
    let (home, stream, spin) = owned_spinner(&device);
    let n = 1 << 20;
    let buf = owned_zeroed(&home, n);
    let work = stream.submit((buf, spin), |s, (d, spin)| {
        s.launch(spin, LaunchConfig::linear(1, 1), (spin_cycles(300),))?;
        s.fill(d, 7u32)
    });
    let (result, (buf, _spin)) = while_another_thread_partitions(&device, &home, || work.wait());
    result.unwrap();
    // the partition has ended: the batch's buffer is bound and read again
    assert_filled(&home, &buf, n, 7);
}

/// `n` zeroed `u32`s of `home`, owned.
fn owned_zeroed(
    home: &cuda_brand::owned::OwnedContext,
    n: usize,
) -> cuda_brand::owned::OwnedDeviceBuffer<u32> {
    home.enter(|ctx| home.unbind(ctx, ctx.zeroed::<u32>(n)?))
        .unwrap()
}

/// `buf` (of `home`) holds `n` times `value`.
fn assert_filled(
    home: &cuda_brand::owned::OwnedContext,
    buf: &cuda_brand::owned::OwnedDeviceBuffer<u32>,
    n: usize,
    value: u32,
) {
    let values = home.enter(|ctx| buf.bind(ctx)?.to_vec()).unwrap();
    assert!(
        values.len() == n && values.iter().all(|&x| x == value),
        "the fill of {value} arrived"
    );
}

/// As above, for a batch awaited (polled by an executor) while another thread partitions
/// the device: the first poll finds the work running and arms the wake-up without an
/// entry (it used to be refused and end in a leaked batch and a panic); the driver's wake
/// comes, and the future is ready with the batch while the device is still partitioned.
fn a_batch_polled_while_another_thread_partitions_the_device_comes_back_with_its_values() {
    use std::future::Future;
    use std::task::{Context, Waker};
    let device = partitionable();
    let (home, stream, spin) = owned_spinner(&device);
    let n = 1 << 20;
    let buf = owned_zeroed(&home, n);
    let mut work = stream.submit((buf, spin), |s, (d, spin)| {
        s.launch(spin, LaunchConfig::linear(1, 1), (spin_cycles(500),))?;
        s.fill(d, 9u32)
    });
    let ((result, (buf, _spin)), first) = while_another_thread_partitions(&device, &home, || {
        let mut cx = Context::from_waker(Waker::noop());
        let first = std::pin::Pin::new(&mut work).poll(&mut cx).is_pending();
        (crate::owned::block_on(work).0, first)
    });
    assert!(
        first,
        "the first poll found the work still running (500 ms of spin)"
    );
    result.unwrap();
    assert_filled(&home, &buf, n, 9);
}

/// `err`'s code is `NotPermitted`, and its text says why (`words`).
fn not_permitted(err: Error, words: &str) {
    assert_eq!(err.code(), ErrorCode::NotPermitted, "{err}");
    assert!(err.to_string().contains(words), "{err}");
}

/// A scoped thread spawned in a partition's closure, which entered no partition, holding a
/// partition's buffer (pool memory, tied to no context): its synchronous operations would
/// retain the device's primary context and run there, on any SM, outside every partition.
/// They are refused while the device is partitioned, and the buffer keeps its values.
fn a_scoped_thread_makes_no_synchronous_operation_outside_the_partitions() {
    let device = partitionable();
    with_partitions(&device, |sms| {
        let (part, _) = sms.split(1)?;
        part.enter(|p| {
            let mut buf = p.from_slice(&[1u32; 4096])?;
            let mut host = vec![0u32; 4096];
            std::thread::scope(|t| {
                t.spawn(|| {
                    const WHY: &str = "the device is partitioned";
                    not_permitted(buf.fill(7).unwrap_err(), WHY);
                    not_permitted(buf.copy_from_host(&[9; 4096]).unwrap_err(), WHY);
                    not_permitted(buf.to_vec().unwrap_err(), WHY);
                    not_permitted(buf.copy_to_host(&mut host).unwrap_err(), WHY);
                });
            });
            assert_eq!(buf.to_vec()?, [1; 4096], "nothing was written");
            // on the partition's thread, as before
            buf.fill(3)?;
            assert_eq!(buf.to_vec()?, [3; 4096]);
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// A partition's stream, event, module and function on a scoped thread (they are `Send`),
/// while the partition's thread uses its green context: the driver has "no internal
/// synchronization to make API calls accessing the same green context from multiple
/// threads work". Every call that would reach the driver there is refused; on the
/// partition's thread they work as before.
fn a_partitions_stream_event_and_function_are_refused_on_another_thread() {
    let device = partitionable();
    with_partitions(&device, |sms| {
        let (part, _) = sms.split(1)?;
        part.enter(|p| {
            let stream = p.new_stream()?;
            let mut event = p.new_event_without_timing()?;
            let mut other = p.new_event_without_timing()?;
            let module = p.module_from_ptx(PTX)?;
            let function = module.function("scale")?;
            let recorded = event.record(&stream)?;
            std::thread::scope(|t| {
                t.spawn(|| {
                    const WHY: &str = "one thread at a time";
                    not_permitted(stream.synchronize().unwrap_err(), WHY);
                    not_permitted(stream.is_idle().unwrap_err(), WHY);
                    not_permitted(stream.priority().unwrap_err(), WHY);
                    not_permitted(stream.scope(|_| Ok(())).unwrap_err(), WHY);
                    not_permitted(other.record(&stream).map(drop).unwrap_err(), WHY);
                    not_permitted(stream.wait_event(&recorded).unwrap_err(), WHY);
                    not_permitted(recorded.synchronize().unwrap_err(), WHY);
                    not_permitted(recorded.is_complete().unwrap_err(), WHY);
                    not_permitted(function.max_threads_per_block().unwrap_err(), WHY);
                    not_permitted(function.params().map(drop).unwrap_err(), WHY);
                    not_permitted(module.function("scale").map(drop).unwrap_err(), WHY);
                    not_permitted(module.global::<u32>("nothing").map(drop).unwrap_err(), WHY);
                });
            });
            // the partition's own thread
            recorded.synchronize()?;
            assert!(stream.is_idle()?);
            assert!(function.max_threads_per_block()? > 0);
            stream.scope(|_| Ok::<_, Error>(()))?;
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// The context the driver reports for memory at `p` (`CU_POINTER_ATTRIBUTE_CONTEXT`).
fn context_of(p: u64) -> cuda_brand::sys::CUcontext {
    let mut owner: cuda_brand::sys::CUcontext = std::ptr::null_mut();
    // SAFETY: a live address; the out-pointer has the attribute's type.
    let rc = unsafe {
        (common::driver().cuPointerGetAttribute)(
            (&mut owner as *mut cuda_brand::sys::CUcontext).cast(),
            1, // CU_POINTER_ATTRIBUTE_CONTEXT
            p,
        )
    };
    assert_eq!(rc, 0, "cuPointerGetAttribute(CONTEXT)");
    owner
}

/// Memory a partition allocates outside any pool (pitched, page-locked, managed): the
/// driver does not report it as the partition's context (CUDA 13.0, H200: the first run of
/// this probe found `cuMemAllocPitch` memory reported with another context, the green
/// context's `CUcontext` form being treated "as if it were a primary context"). The crate
/// relies on no such report: a managed buffer's view (a `DeviceSlice`, whose synchronous
/// operations ask the driver for the memory's context) is filled and read in the partition
/// on the partition's thread, and refused on a scoped thread (where it would run in the
/// reported context, on any SM); a pitched buffer's own operations use the buffer's
/// context, the partition's. What the driver reports is printed.
fn a_partitions_memory_outside_pools_is_used_in_the_partition_whatever_context_the_driver_reports()
{
    use cuda_brand::{DeviceBuffer2D, ManagedBuffer, PinnedBuffer};
    let device = partitionable();
    with_partitions(&device, |sms| {
        let (part, _) = sms.split(1)?;
        part.enter(|p| {
            let here = common::handle(p);
            let rows = DeviceBuffer2D::<u32>::zeroed(p, 64, 4)?;
            // SAFETY: given to the driver's attribute query only, while `rows` lives.
            let rows_at = unsafe { rows.as_device_ptr() };
            let pinned = PinnedBuffer::<u32>::zeroed(p, 64)?;
            eprintln!(
                "the partition is {here:?}; the driver reports pitched memory as {:?}, page-locked as {:?}",
                context_of(rows_at),
                context_of(pinned.as_ptr() as u64)
            );
            assert_eq!(rows.to_vec()?, vec![0u32; 64 * 4], "the pitched buffer's own copy");
            let mut managed = match ManagedBuffer::<u32>::zeroed(p, 4096) {
                Ok(managed) => managed,
                Err(e) if e.code() == ErrorCode::NotSupported => {
                    common::skip("managed memory is refused on this device")
                }
                Err(e) => return Err(e),
            };
            // SAFETY: as above, while `managed` lives.
            let at = unsafe { managed.as_device().as_device_ptr() };
            eprintln!("managed memory as {:?}", context_of(at));
            managed.as_device_mut().fill(7)?;
            assert_eq!(managed.as_device().to_vec()?, vec![7u32; 4096]);
            std::thread::scope(|t| {
                t.spawn(|| {
                    let view = managed.as_device();
                    not_permitted(view.to_vec().unwrap_err(), "the device is partitioned");
                });
            });
            assert_eq!(managed.as_device().to_vec()?, vec![7u32; 4096]);
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// The calls of a partition's values on a scoped thread that the test above leaves out,
/// each of which reaches the driver with the green context's handles: a stream's flags,
/// multi-stream and deadline scopes, timing and bounded waits of events, a function's
/// attributes and cache preference, a kernel's configuration, and the synchronous
/// operations of a pitched buffer (memory of the green context itself, made current for
/// them). Each is refused there; an event closed there is released by the partition's
/// thread (`close` returns `Ok`, and the partition ends without a failed release); on the
/// partition's thread every call works as before.
fn the_other_calls_of_a_partitions_values_are_refused_on_another_thread() {
    use cuda_brand::{CacheConfig, DeviceBuffer2D, FunctionAttribute, KeepWaiting};
    let device = partitionable();
    with_partitions(&device, |sms| {
        let (part, _) = sms.split(1)?;
        part.enter(|p| {
            let (a, b) = (p.new_stream()?, p.new_stream()?);
            let (mut start, mut end, closed) = (p.new_event()?, p.new_event()?, p.new_event()?);
            let module = p.module_from_ptx(PTX)?;
            // SAFETY: scale(float *x, size_t x_len, float k) writes x[0..x_len] only.
            let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
            let function = scale.function();
            let mut rows = DeviceBuffer2D::<u32>::zeroed(p, 64, 4)?;
            let first = start.record(&a)?;
            let last = end.record(&a)?;
            std::thread::scope(|t| {
                t.spawn(|| {
                    const WHY: &str = "one thread at a time";
                    not_permitted(a.flags().unwrap_err(), WHY);
                    let pair = a.scope_pair(&b, |_, _| Ok::<_, Error>(()));
                    not_permitted(pair.unwrap_err(), WHY);
                    let all = Stream::scope_all(&[&b, &a], |_| Ok::<_, Error>(()));
                    not_permitted(all.unwrap_err(), WHY);
                    let within = a.scope_within(
                        Duration::from_secs(1),
                        |_| KeepWaiting::until_idle(),
                        |_| Ok::<_, Error>(()),
                    );
                    not_permitted(within.unwrap_err(), WHY);
                    not_permitted(first.elapsed(&last).unwrap_err(), WHY);
                    let bounded = last.synchronize_within(Duration::from_millis(1));
                    not_permitted(bounded.unwrap_err(), WHY);
                    let attribute = function.attribute(FunctionAttribute::MaxThreadsPerBlock);
                    not_permitted(attribute.unwrap_err(), WHY);
                    let cache = function.set_cache_config(CacheConfig::PreferL1);
                    not_permitted(cache.unwrap_err(), WHY);
                    not_permitted(scale.config_for(1024).unwrap_err(), WHY);
                    not_permitted(rows.to_vec().unwrap_err(), WHY);
                    not_permitted(rows.copy_from_host(&[5; 256], 64).unwrap_err(), WHY);
                    // released by the partition's thread at its end
                    assert_eq!(closed.close(), Ok(()));
                });
            });
            // the partition's own thread
            last.synchronize()?;
            assert!(first.elapsed(&last).is_ok());
            a.scope_pair(&b, |_, _| Ok::<_, Error>(()))?;
            assert!(scale.config_for(1024).is_ok());
            rows.copy_from_host(&[5; 256], 64)?;
            assert_eq!(rows.to_vec()?, [5; 256]);
            Ok::<_, Error>(())
        }) // a failed release would be this closure's error
    })
    .unwrap();
}

/// A partition's managed buffer on a scoped thread: advice (`cuMemAdvise`) reaches the
/// driver with the green context's memory without making any context current, as a
/// function's attributes do, so it is refused there like them; on the partition's thread
/// it works as before.
fn a_partitions_managed_buffer_takes_no_advice_on_another_thread() {
    use cuda_brand::{Advice, ManagedBuffer, MemoryLocation};
    let device = partitionable();
    with_partitions(&device, |sms| {
        let (part, _) = sms.split(1)?;
        part.enter(|p| {
            let data = match ManagedBuffer::<u32>::zeroed(p, 4096) {
                Ok(data) => data,
                Err(e) if e.code() == ErrorCode::NotSupported => {
                    common::skip(format!("no concurrent managed access here ({e})"))
                }
                Err(e) => return Err(e),
            };
            let here = MemoryLocation::Device(device);
            std::thread::scope(|t| {
                t.spawn(|| {
                    const WHY: &str = "on the thread that entered it";
                    not_permitted(data.advise(Advice::ReadMostly).unwrap_err(), WHY);
                    not_permitted(
                        data.advise(Advice::PreferredLocation(here)).unwrap_err(),
                        WHY,
                    );
                });
            });
            // the partition's own thread
            data.advise(Advice::PreferredLocation(here))?;
            data.advise(Advice::NoPreferredLocation)?;
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// A partition's buffer, stream, event and module dropped on a scoped thread: the drop
/// cannot reach the driver there (the green context is the partition's thread's), so the
/// partition's thread releases them when the partition ends. Nothing is reported as a
/// failed release, and the buffer's pool block is back in the pool afterwards (it used to
/// be refused and leaked for the process).
fn a_partitions_values_dropped_on_another_thread_are_released_by_its_own() {
    let device = partitionable();
    let bytes = 64usize << 20;
    with_partitions(&device, |sms| {
        let each = sms.min_partition().max(8);
        let (first, second) = sms.split(each)?;
        let before = first.enter(|p| {
            let pool = cuda_brand::MemoryPool::of_device(p)?;
            let before = pool.used_bytes()?;
            let buf = p.zeroed::<u8>(bytes)?;
            assert_eq!(pool.used_bytes()?, before + bytes as u64);
            let (stream, event, module) =
                (p.new_stream()?, p.new_event()?, p.module_from_ptx(PTX)?);
            std::thread::scope(|t| {
                t.spawn(move || drop((buf, stream, event, module)));
            });
            // still the partition's until it ends
            assert_eq!(pool.used_bytes()?, before + bytes as u64);
            Ok::<_, Error>(before)
        })?; // a failed release would be this closure's error
        second.enter(|p| {
            let used = cuda_brand::MemoryPool::of_device(p)?.used_bytes()?;
            assert_eq!(used, before, "the dropped buffer went back to the pool");
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

/// This file's tests, each to run with no other test of its binary beside it (see the
/// file's header; `tests/gpu.rs` runs them after the others).
/// Two partitions of at least 8 SMs each, entered one inside the other; `f` gets both guards.
fn in_two_partitions(
    device: &Device,
    f: impl FnOnce(PartitionGuard<'_>, PartitionGuard<'_>) -> Result<(), Error>,
) {
    with_partitions(device, |sms| {
        let each = sms.min_partition().max(8);
        let (groups, _rest) = sms.split_groups(each, 2)?;
        let mut groups = groups.into_iter();
        let (first, second) = (groups.next().unwrap(), groups.next().unwrap());
        first.enter(|a| second.enter(|b| f(a, b)))
    })
    .unwrap();
}

/// The distinct SMs that `ids` (written by `smid_of_block`, one per block) name, checked to be
/// at most the partition's count, `sm_count`, and none of `other`'s.
fn assert_on_its_sms(ids: Vec<u32>, sm_count: u32, other: &BTreeSet<u32>, what: &str) {
    let used: BTreeSet<u32> = ids.into_iter().collect();
    eprintln!("{what} ran on {used:?}; the other partition on {other:?}");
    assert!(
        used.len() <= sm_count as usize,
        "{what}: {} SMs used, the partition has {sm_count}",
        used.len(),
    );
    assert!(
        used.is_disjoint(other),
        "{what}: ran on the other partition's SMs {:?}",
        used.intersection(other).collect::<Vec<_>>()
    );
}

/// A graph captured in partition A (a fill, then `smid_of_block`) and replayed twice on A's
/// stream: the fill's values come back, and every block of the replays ran on A's SMs, none
/// of them B's. (The capture's stream is the partition's, `cuGreenCtxStreamCreate`, so the
/// graph's kernel node is A's.)
fn a_graph_captured_in_a_partition_replays_on_its_sms_with_the_right_values() {
    let device = partitionable();
    in_two_partitions(&device, |a, b| {
        let module = a.module_from_ptx(SMID_PTX)?;
        // SAFETY: smid_of_block(unsigned*, size_t) writes out[blockIdx.x] only below len.
        let smid = unsafe { module.kernel::<(Out<u32>,)>("smid_of_block") }?;
        let blocks = 4 * a.sm_count();
        let mut ids = a.zeroed::<u32>(blocks as usize)?;
        let mut filled = a.zeroed::<u32>(256)?;
        let (graph, ()) = a.capture(|g| {
            g.fill(g.bind_mut(&mut filled), 7)?;
            let ids = g.bind_mut(&mut ids);
            g.launch(&smid, LaunchConfig::linear(blocks, 32), (ids,))
        })?;
        assert_eq!(graph.node_count()?, 2);
        let exec = graph.instantiate()?;
        a.new_stream()?.scope(|s| {
            exec.launch(s)?;
            exec.launch(s)
        })?;
        drop(exec);
        assert_eq!(filled.to_vec()?, vec![7; 256]);
        let other = sms_used(b)?;
        assert_on_its_sms(ids.to_vec()?, a.sm_count(), &other, "the replayed graph");
        Ok(())
    });
}

/// One `Library`'s kernel, declared for partition A and for partition B (`cuKernelGetFunction`
/// with each partition's context current): each runs on its own partition's SMs.
fn a_library_kernel_of_a_partition_runs_on_its_sms() {
    let device = partitionable();
    let library = Library::from_ptx(SMID_PTX).unwrap();
    in_two_partitions(&device, |a, b| {
        let run = |p: PartitionGuard<'_>| -> Result<Vec<u32>, Error> {
            // SAFETY: smid_of_block(unsigned*, size_t) writes out[blockIdx.x] only below len.
            let smid = unsafe { library.kernel::<(Out<u32>,)>(p, "smid_of_block") }?;
            let blocks = 4 * p.sm_count();
            let mut ids = p.zeroed::<u32>(blocks as usize)?;
            p.new_stream()?
                .scope(|s| s.launch(&smid, LaunchConfig::linear(blocks, 32), (&mut ids,)))?;
            ids.to_vec()
        };
        let (ids_a, ids_b) = (run(a)?, run(b)?);
        let used_b: BTreeSet<u32> = ids_b.iter().copied().collect();
        let used_a: BTreeSet<u32> = ids_a.iter().copied().collect();
        assert_on_its_sms(ids_a, a.sm_count(), &used_b, "A's library kernel");
        assert_on_its_sms(ids_b, b.sm_count(), &used_a, "B's library kernel");
        Ok(())
    });
}

/// Bytes in use in the crate's pool of the device, looked at through its primary context
/// (outside every partitioned closure).
fn crate_pool_used(device: &Device) -> u64 {
    with_primary_context(device, |p| MemoryPool::of_device(p)?.used_bytes()).unwrap()
}

/// A partition in two phases (`SmGroup::enter_phases`): a kernel loaded and a stream made in
/// setup run on the partition's SMs in the run phase (none of the other partition's), a
/// setup buffer dropped in the run phase stays allocated (the crate's pool still counts
/// it), and the partition's teardown frees every setup buffer.
fn a_partition_in_phases_runs_on_its_sms_and_frees_setup_memory_at_its_teardown() {
    let device = partitionable();
    let before = crate_pool_used(&device);
    with_partitions(&device, |sms| {
        let each = sms.min_partition().max(8);
        let (groups, _rest) = sms.split_groups(each, 2)?;
        let mut groups = groups.into_iter();
        let (first, second) = (groups.next().unwrap(), groups.next().unwrap());
        let other = second.enter(sms_used)?;
        first.enter_phases(|phases| {
            let ((module, mut ids, stream, pool, spare), run) = phases.setup(|p| {
                Ok::<_, Error>((
                    p.module_from_ptx(SMID_PTX)?,
                    p.zeroed::<u32>(4 * p.sm_count() as usize)?,
                    p.new_stream()?,
                    MemoryPool::of_device(p)?,
                    p.zeroed::<u8>(8 << 20)?,
                ))
            })?;
            // SAFETY: smid_of_block(unsigned*, size_t) writes out[blockIdx.x] only below len.
            let smid = unsafe { module.kernel::<(Out<u32>,)>("smid_of_block") }?;
            let blocks = 4 * run.sm_count();
            stream.scope(|s| s.launch(&smid, LaunchConfig::linear(blocks, 32), (&mut ids,)))?;
            assert_on_its_sms(
                ids.to_vec()?,
                run.sm_count(),
                &other,
                "the run phase's kernel",
            );
            let used = pool.used_bytes()?;
            assert!(
                used >= 8 << 20,
                "the setup buffers are in the crate's pool: {used}"
            );
            drop(spare);
            run.synchronize()?;
            assert_eq!(
                pool.used_bytes()?,
                used,
                "a setup buffer dropped in the run phase was freed"
            );
            Ok::<_, Error>(())
        })
    })
    .unwrap();
    assert_eq!(
        crate_pool_used(&device),
        before,
        "the partition's teardown frees its setup memory"
    );
}

/// `smid_of_block` in CUDA C++, for NVRTC.
#[cfg(feature = "nvrtc")]
const SMID_CU: &str = r#"
extern "C" __global__ void smid_of_block(unsigned *out, size_t len) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    if (blockIdx.x < len) out[blockIdx.x] = id;
}
"#;

/// CUDA C++ compiled by NVRTC and loaded with a partition's guard (`compile_and_load`): its
/// kernel runs on the partition's SMs. Skipped without an NVRTC library.
#[cfg(feature = "nvrtc")]
fn nvrtc_source_compiled_and_loaded_in_a_partition_runs_on_its_sms() {
    if let Err(e) = cuda_brand::nvrtc::version() {
        assert_eq!(e.code(), ErrorCode::NvrtcNotFound, "{e}");
        common::skip(format!("no NVRTC library ({e})"));
    }
    let device = partitionable();
    in_two_partitions(&device, |a, b| {
        let options = cuda_brand::nvrtc::CompileOptions::new().name("smid.cu");
        let (module, _program) = a.compile_and_load(SMID_CU, &options)?;
        // SAFETY: smid_of_block(unsigned*, size_t) writes out[blockIdx.x] only below len.
        let smid = unsafe { module.kernel::<(Out<u32>,)>("smid_of_block") }?;
        let blocks = 4 * a.sm_count();
        let mut ids = a.zeroed::<u32>(blocks as usize)?;
        a.new_stream()?
            .scope(|s| s.launch(&smid, LaunchConfig::linear(blocks, 32), (&mut ids,)))?;
        let other = sms_used(b)?;
        assert_on_its_sms(ids.to_vec()?, a.sm_count(), &other, "NVRTC's kernel");
        Ok(())
    });
}

/// Uploads `host` with any guard that may allocate (the guide's chapter 1), and reports how
/// many SMs the stream it made ran `smid_of_block` on.
fn upload_and_count_sms<'ctx>(
    ctx: impl Allocates<'ctx>,
    host: &[u32],
) -> Result<(Vec<u32>, usize), Error> {
    let ctx = ctx.into_guard();
    let buf = ctx.from_slice(host)?;
    let module = ctx.module_from_ptx(SMID_PTX)?;
    // SAFETY: smid_of_block(unsigned*, size_t) writes out[blockIdx.x] only below len.
    let smid = unsafe { module.kernel::<(Out<u32>,)>("smid_of_block") }?;
    let mut ids = ctx.zeroed::<u32>(512)?;
    ctx.new_stream()?
        .scope(|s| s.launch(&smid, LaunchConfig::linear(512, 32), (&mut ids,)))?;
    let used: BTreeSet<u32> = ids.to_vec()?.into_iter().collect();
    Ok((buf.to_vec()?, used.len()))
}

/// One helper bounded by `Allocates` takes a plain guard, a setup-phase guard and a
/// partition's: each uploads the values, and in the partition the helper's stream ran on the
/// partition's SMs only (at most its count).
fn one_allocating_helper_takes_a_plain_a_setup_and_a_partitions_guard() {
    let device = partitionable();
    let (plain, _) = with_context(&device, ContextFlags::default(), |ctx| {
        upload_and_count_sms(ctx, &[1, 2])
    })
    .unwrap();
    assert_eq!(plain, [1, 2]);
    let setup = with_phases(&device, ContextFlags::default(), |phases| {
        let (out, _run) = phases.setup(|setup| upload_and_count_sms(setup, &[3, 4]))?;
        Ok::<_, Error>(out.0)
    })
    .unwrap();
    assert_eq!(setup, [3, 4]);
    in_two_partitions(&device, |a, _b| {
        let (values, sms) = upload_and_count_sms(a, &[5, 6])?;
        assert_eq!(values, [5, 6]);
        assert!(
            sms <= a.sm_count() as usize,
            "{sms} SMs of {}",
            a.sm_count()
        );
        Ok(())
    });
}

pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    macro_rules! alone {
        ($($name:ident),* $(,)?) => {
            Vec::from([$(Test { name: stringify!($name), needs: Needs::Gpu, body: $name }),*])
        };
    }
    #[allow(unused_mut)]
    let mut tests = alone![
        a_graph_captured_in_a_partition_replays_on_its_sms_with_the_right_values,
        a_library_kernel_of_a_partition_runs_on_its_sms,
        one_allocating_helper_takes_a_plain_a_setup_and_a_partitions_guard,
        a_partition_in_phases_runs_on_its_sms_and_frees_setup_memory_at_its_teardown,
        a_split_gives_two_partitions_of_the_sizes_asked_on_disjoint_sms,
        each_partition_computes_with_its_own_module_memory_and_stream,
        a_short_kernel_finishes_while_the_other_partition_is_saturated,
        splits_the_device_cannot_give_are_errors_naming_the_numbers,
        no_other_context_is_entered_inside_a_partitioned_closure,
        a_partitions_context_is_made_current_on_its_own_thread_only,
        a_part_is_not_entered_on_a_thread_with_a_plain_context_current,
        a_panicking_batch_is_waited_for_then_freed_while_another_thread_partitions_the_device,
        a_batch_submitted_while_the_device_is_partitioned_is_refused_with_its_batch,
        a_scoped_thread_makes_no_synchronous_operation_outside_the_partitions,
        a_partitions_stream_event_and_function_are_refused_on_another_thread,
        a_partitions_values_dropped_on_another_thread_are_released_by_its_own,
        a_partitions_managed_buffer_takes_no_advice_on_another_thread,
        a_partitions_memory_outside_pools_is_used_in_the_partition_whatever_context_the_driver_reports,
        the_other_calls_of_a_partitions_values_are_refused_on_another_thread,
        a_batch_waited_for_while_another_thread_partitions_the_device_comes_back_with_its_values,
        a_batch_polled_while_another_thread_partitions_the_device_comes_back_with_its_values,
    ];
    #[cfg(feature = "nvrtc")]
    tests.extend(alone![
        nvrtc_source_compiled_and_loaded_in_a_partition_runs_on_its_sms
    ]);
    tests
}
