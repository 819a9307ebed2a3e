//! The adversarial review of issue 47's changes, safe code only: awaited batches woken by a
//! stream callback (an executor that polls inside its waker's `wake`, a waker that drops
//! the future from inside the callback) and the one launch plan's cooperative check in an
//! SM partition, whose multiprocessors are fewer than the device's. A module of
//! `tests/gpu.rs`. Skips without a device; fails instead with `CUDA_BRAND_REQUIRE_GPU=1`.

use crate::common;
use crate::owned::{cycles, owned_buffer, owned_setup, scale_kernel, spin_kernel};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use cuda_brand::owned::{Done, OwnedKernel, Pending, release_deferred};
use cuda_brand::{
    DeviceAttribute, Error, ErrorCode, In, LaunchConfig, MemoryPool, Out, with_partitions,
};

/// `kernels/launch_ex.cu` for sm_90: cluster_info, cluster_info_fixed, grid_sum, empty_ex.
const LAUNCH_EX_PTX: &str = include_str!("../kernels/launch_ex_sm90.ptx");

/// Waits up to 10 s for `done`.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{what}: not within 10 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// An executor of one task that polls it inside its waker's `wake` (on whatever thread
/// wakes it), never in a loop of its own: a wake that finds the task being polled marks it
/// to be polled again by the thread that polls it.
struct InlineTask<B: Send + 'static> {
    future: Mutex<Option<Pending<B>>>,
    again: AtomicBool,
    polls: AtomicUsize,
    /// The output, and the name of the thread whose poll finished the future.
    output: Mutex<Option<(Done<B>, Option<String>)>>,
}

impl<B: Send + 'static> InlineTask<B> {
    fn run(self: &Arc<Self>) {
        self.again.store(true, Ordering::SeqCst);
        // a wake that finds the task held leaves it to the holder, which sees `again` once
        // it lets go
        while let Ok(mut slot) = self.future.try_lock() {
            while self.again.swap(false, Ordering::SeqCst) {
                if let Some(future) = slot.as_mut() {
                    self.polls.fetch_add(1, Ordering::SeqCst);
                    let waker = Waker::from(Arc::clone(self));
                    let mut cx = Context::from_waker(&waker);
                    if let Poll::Ready(done) = std::pin::Pin::new(future).poll(&mut cx) {
                        let name = std::thread::current().name().map(str::to_owned);
                        *self.output.lock().unwrap() = Some((done, name));
                        *slot = None;
                    }
                }
            }
            drop(slot);
            if !self.again.load(Ordering::SeqCst) {
                break;
            }
        }
    }
}

impl<B: Send + 'static> Wake for InlineTask<B> {
    fn wake(self: Arc<Self>) {
        self.run();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.run();
    }
}

/// An executor that polls inside `wake` is first woken on the driver's callback thread,
/// inside the stream callback, where the batch cannot finish (no driver call): with the
/// `repoll-thread` feature its poll there hands the waker to the crate's thread, whose
/// poll finishes the batch, with the kernel's values, and not on the callback thread.
/// (Without the feature such an executor polls inside the callback each time, as the
/// feature's documentation says: not tested.)
#[cfg(feature = "repoll-thread")]
fn an_executor_polling_inside_wake_finishes_the_batch_on_the_repoll_thread() {
    let device = common::gpu();
    let (home, module, stream) = owned_setup(&device);
    let (spin, scale) = (spin_kernel(&module), scale_kernel(&module));
    let n = 4096;
    let mut buf = owned_buffer(&home, &vec![2.0; n]);
    let mut want = 2.0f32;
    // The case needs the batch still running when the first poll returns; a host slowed
    // down (compute-sanitizer intercepts every driver call) can take longer than a short
    // kernel to get there, so the kernel grows until it outlasts the first poll.
    for ms in [20, 200, 2000] {
        let work = stream.submit(
            (buf, vec![0.0f32; 0], Arc::clone(&spin), Arc::clone(&scale)),
            move |s, (d, _host, spin, scale)| {
                s.launch(spin, LaunchConfig::linear(1, 1), (cycles(ms),))?;
                s.launch(scale, LaunchConfig::linear(16, 256), (d, 3.0f32))
            },
        );
        let task = Arc::new(InlineTask {
            future: Mutex::new(Some(work)),
            again: AtomicBool::new(false),
            polls: AtomicUsize::new(0),
            output: Mutex::new(None),
        });
        task.run(); // the first poll, here: arms the callback
        let running_after_first_poll = task.output.lock().unwrap().is_none();
        wait_for("the batch's end", || task.output.lock().unwrap().is_some());
        let ((result, (back, _host, _spin, _scale)), finished_on) =
            task.output.lock().unwrap().take().unwrap();
        result.unwrap();
        buf = back;
        want *= 3.0;
        if !running_after_first_poll {
            eprintln!("the {ms} ms kernel ended before the first poll returned: again, longer");
            continue;
        }
        assert_eq!(
            finished_on.as_deref(),
            Some("cuda-brand-repoll"),
            "finished by the crate's thread, after {} polls",
            task.polls.load(Ordering::SeqCst)
        );
        assert!(
            task.polls.load(Ordering::SeqCst) >= 3,
            "here, in the callback, on the thread"
        );
        let values = home.enter(|ctx| buf.bind(ctx)?.to_vec()).unwrap();
        assert_eq!(values, vec![want; n]);
        return;
    }
    panic!("even a 2 s kernel ended before the first poll returned");
}

/// A waker that notes when it is first woken.
struct WokenAt {
    at: Mutex<Option<Instant>>,
}

impl Wake for WokenAt {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.at.lock().unwrap().get_or_insert_with(Instant::now);
    }
}

/// Two batches on two streams of one context, independent on the GPU: a short one armed
/// after a long one is woken when its own work ends, not when the long one's does. Both
/// futures are polled once while their work runs (so each arms the stream callback that
/// wakes it), the long one first. A notifier stream that served both would queue the
/// short batch's callback behind the long batch's wait for its event
/// (`OwnedContext::notifier` gives each stream with batches awaited at once its own).
fn a_short_batch_is_woken_before_a_long_batch_of_another_stream_ends() {
    let device = common::gpu();
    if common::under_sanitizer() {
        common::skip(common::SERIAL_UNDER_SANITIZER);
    }
    let (home, module, long_stream) = owned_setup(&device);
    let spin = spin_kernel(&module);
    let short_stream = Arc::new(
        home.enter(|ctx| home.unbind(ctx, ctx.new_stream()?))
            .unwrap(),
    );
    let poll_once = |work: &mut Pending<Arc<OwnedKernel<(i64,)>>>| {
        let woken = Arc::new(WokenAt {
            at: Mutex::new(None),
        });
        let waker = Waker::from(Arc::clone(&woken));
        let first = std::pin::Pin::new(work).poll(&mut Context::from_waker(&waker));
        assert!(first.is_pending(), "the batch's kernel is still running");
        woken
    };
    let mut long = long_stream.submit(Arc::clone(&spin), |s, spin| {
        s.launch(spin, LaunchConfig::linear(1, 1), (cycles(500),))
    });
    let long_woken = poll_once(&mut long);
    let began = Instant::now();
    let mut short = short_stream.submit(Arc::clone(&spin), |s, spin| {
        s.launch(spin, LaunchConfig::linear(1, 1), (cycles(5),))
    });
    let short_woken = poll_once(&mut short);
    wait_for("the short batch's wake", || {
        short_woken.at.lock().unwrap().is_some()
    });
    let short_after = short_woken.at.lock().unwrap().unwrap() - began;
    let long_pending = long_woken.at.lock().unwrap().is_none();
    let ((short_result, _), (long_result, _)) = (short.wait(), long.wait());
    short_result.unwrap();
    long_result.unwrap();
    assert!(
        long_pending && short_after < Duration::from_millis(200),
        "the 5 ms batch was woken {short_after:?} after its submit (the 500 ms batch \
         {}): its wake waited behind the other batch's",
        if long_pending {
            "still running"
        } else {
            "already woken"
        }
    );
}

/// A waker whose `wake` drops the future it wakes (a cancelled task): woken by the batch's
/// stream callback, on the driver's callback thread.
struct DropOnWake<B: Send + 'static> {
    future: Mutex<Option<Pending<B>>>,
    dropped: AtomicBool,
}

impl<B: Send + 'static> Wake for DropOnWake<B> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let future = self.future.lock().unwrap().take();
        drop(future);
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// A pending future dropped by its waker inside the stream callback cannot wait for its
/// work there (no driver call): its batch is leaked, never freed, the drop returns (no
/// deadlock in the callback), and the context goes on working (a later batch on the same
/// stream hands back its values). Reads the device's pool: runs alone.
fn a_pending_dropped_by_its_waker_inside_the_callback_leaks_its_batch() {
    let device = common::gpu();
    let (home, module, stream) = owned_setup(&device);
    let (spin, scale) = (spin_kernel(&module), scale_kernel(&module));
    let used = || {
        home.enter(|ctx| MemoryPool::of_device(ctx)?.used_bytes())
            .unwrap()
    };
    let bytes = 4 << 20;
    let buf = owned_buffer(&home, &vec![1.0; bytes / 4]);
    let before = used();
    let work = stream.submit((Arc::clone(&spin), buf), |s, (spin, _d)| {
        s.launch(spin, LaunchConfig::linear(1, 1), (cycles(20),))
    });
    let waker = Arc::new(DropOnWake {
        future: Mutex::new(None),
        dropped: AtomicBool::new(false),
    });
    let mut work = work;
    let first = std::pin::Pin::new(&mut work)
        .poll(&mut Context::from_waker(&Waker::from(Arc::clone(&waker))));
    assert!(first.is_pending(), "a 20 ms kernel is still running");
    *waker.future.lock().unwrap() = Some(work);
    wait_for("the waker's drop", || waker.dropped.load(Ordering::SeqCst));
    assert!(waker.future.lock().unwrap().is_none());
    let idle = home
        .enter(|ctx| {
            ctx.synchronize()?;
            stream.bind(ctx)?.is_idle()
        })
        .unwrap();
    assert!(idle);
    release_deferred();
    assert_eq!(
        used(),
        before,
        "the dropped batch's buffer is leaked, not freed"
    );
    // the stream and the context still work
    let buf = owned_buffer(&home, &[1.0; 256]);
    let (result, (buf, host, _)) = stream
        .submit((buf, vec![0.0f32; 256], scale), |s, (d, h, k)| {
            s.launch(k, LaunchConfig::linear(1, 256), (d, 5.0f32))?;
            s.copy_to_host_view(h, d.into_ref())
        })
        .wait();
    result.unwrap();
    assert_eq!(host, vec![5.0f32; 256]);
    drop(buf);
}

/// A cooperative launch in an SM partition whose grid fits the device but not the
/// partition's multiprocessors is refused with `CooperativeLaunchTooLarge` (by the crate's
/// check or the driver's), and one that fits the partition synchronizes its whole grid
/// (`grid_sum` writes every block's sum and the total). The crate's check counts the
/// device's multiprocessors (`attributes::device_facts`), not the partition's; the launch
/// refused here is of `empty_ex`, which synchronizes nothing, so that a driver that let it
/// run fails the test instead of hanging it (a kernel that synchronizes its grid, launched
/// so, would never finish). Partitions the device: runs alone.
fn a_cooperative_launch_larger_than_its_partition_is_refused() {
    let device = common::gpu();
    let cc = device.compute_capability().unwrap();
    let driver = cuda_brand::driver_version().unwrap();
    if cc.major < 9 || driver < 12050 {
        common::skip(format!(
            "kernels/launch_ex_sm90.ptx needs compute capability 9.0, partitions a CUDA 12.5 \
             driver; this is {cc} with {driver}"
        ));
    }
    let device_sms = device
        .attribute(DeviceAttribute::MultiprocessorCount)
        .unwrap() as u32;
    let outcome = with_partitions(&device, |sms| {
        let (small, _rest) = sms.split(16)?;
        small.enter(|p| {
            let module = p.module_from_ptx(LAUNCH_EX_PTX)?;
            // SAFETY: empty_ex(float *p, size_t p_len) writes p[0] only when p_len is
            // SIZE_MAX, never here.
            let empty = unsafe { module.kernel::<(Out<f32>,)>("empty_ex") }?;
            // SAFETY: grid_sum(const unsigned*, size_t, unsigned*, size_t) reads
            // in[i < in_len], writes out[b < out_len] only, and synchronizes the grid only
            // when launched cooperatively.
            let sum = unsafe { module.kernel::<(In<u32>, Out<u32>)>("grid_sum") }?;
            let part = p.sm_count();
            assert!(
                part < device_sms,
                "a part of a split: {part} of {device_sms}"
            );
            let stream = p.new_stream()?;
            // too large for the partition, not for the device
            let per_sm = empty
                .function()
                .max_active_blocks_per_multiprocessor(256, 0)?;
            let blocks = part * per_sm + 1;
            assert!(blocks <= device_sms * per_sm);
            let mut unused = p.zeroed::<f32>(1)?;
            let config = LaunchConfig::linear(blocks, 256).with_cooperative();
            let refused = stream.scope(|s| s.launch(&empty, config, (&mut unused,)));
            let e = refused.expect_err(&format!(
                "a cooperative grid of {blocks} blocks in a partition of {part} SMs, which \
                 holds {} at once: a kernel that synchronizes its grid would never finish",
                part * per_sm
            ));
            assert_eq!(e.code(), ErrorCode::CooperativeLaunchTooLarge, "{e}");
            // the largest grid of the partition runs, and synchronizes
            let per_sm = sum
                .function()
                .max_active_blocks_per_multiprocessor(256, 0)?;
            let blocks = part * per_sm;
            let n = blocks as usize * 256;
            let din = p.from_slice(&vec![1u32; n])?;
            let mut out = p.zeroed::<u32>(blocks as usize + 1)?;
            let config = LaunchConfig::linear(blocks, 256).with_cooperative();
            stream.scope(|s| s.launch(&sum, config, (&din, &mut out)))?;
            let out = out.to_vec()?;
            assert!(out[..blocks as usize].iter().all(|&b| b == 256), "{out:?}");
            assert_eq!(out[blocks as usize], n as u32);
            Ok::<_, Error>(())
        })
    });
    match outcome {
        Ok(()) => {}
        Err(e) if e.code() == ErrorCode::DriverTooOld => {
            common::skip(format!("no green contexts ({e})"))
        }
        Err(e) => panic!("{e}"),
    }
}

crate::gpu_tests!(
    a_short_batch_is_woken_before_a_long_batch_of_another_stream_ends,
    #[cfg(feature = "repoll-thread")]
    an_executor_polling_inside_wake_finishes_the_batch_on_the_repoll_thread,
);

/// Tests that read the device's pool or partition the device: each runs alone.
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    Vec::from([
        Test {
            name: "a_pending_dropped_by_its_waker_inside_the_callback_leaks_its_batch",
            needs: Needs::Gpu,
            body: a_pending_dropped_by_its_waker_inside_the_callback_leaks_its_batch,
        },
        Test {
            name: "a_cooperative_launch_larger_than_its_partition_is_refused",
            needs: Needs::Gpu,
            body: a_cooperative_launch_larger_than_its_partition_is_refused,
        },
    ])
}
