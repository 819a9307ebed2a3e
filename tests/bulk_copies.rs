//! Bulk copies between device memory and pageable host memory, staged through the
//! page-locked buffers the crate keeps per context (`src/memory/staging/`): every byte right at
//! many sizes and element sizes, several threads at once, the fallbacks, and the staging
//! freed with its context. Each test runs alone (`tests_alone`, after the other tests of
//! the `gpu` binary): they change the process-wide thresholds and count the process's
//! staging memory.
//!
//! Skips without a device; fails instead with `CUDA_BRAND_REQUIRE_GPU=1`.

use crate::common;

use std::fmt::Debug;

use cuda_brand::__staging::{self as staging, CopyKind, MAX_STAGINGS_PER_CONTEXT, STAGING_BYTES};
use cuda_brand::{
    ContextFlags, ContextGuard, DeviceBuffer, DeviceCopy, Error, PinnedBuffer, Stream, StreamFlags,
    with_context, with_primary_context, with_raw_context,
};

/// Sets every threshold to `bytes` until dropped, then back to the defaults.
struct Thresholds;

impl Thresholds {
    fn all(bytes: usize) -> Thresholds {
        for kind in CopyKind::ALL {
            staging::set_threshold(kind, bytes);
        }
        Thresholds
    }
}

impl Drop for Thresholds {
    fn drop(&mut self) {
        for kind in CopyKind::ALL {
            staging::set_threshold(kind, kind.default_threshold());
        }
    }
}

/// `len` values of a pattern that differs at every index (and from its neighbours'
/// bytes), made from `make`.
fn pattern<T>(len: usize, make: impl Fn(u64) -> T) -> Vec<T> {
    (0..len as u64)
        .map(|i| make(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i))
        .collect()
}

#[track_caller]
fn assert_same<T: PartialEq + Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at element {i} of {}: {:?} instead of {:?}",
            want.len(),
            got[i],
            want[i]
        );
    }
}

/// Every copy between `host` and the device, whole and through a sub-view at odd
/// offsets: `from_slice`, `to_vec`, `copy_to_host` (into a buffer holding other values),
/// `copy_from_host` (into a zeroed buffer).
fn every_copy<T: DeviceCopy + PartialEq + Debug>(
    ctx: ContextGuard<'_>,
    host: &[T],
    what: &str,
) -> Result<(), Error> {
    let n = host.len();
    let buf = DeviceBuffer::from_slice(ctx, host)?;
    assert_same(
        &buf.to_vec()?,
        host,
        &format!("{what}: from_slice then to_vec"),
    );
    let mut back: Vec<T> = host.iter().rev().copied().collect();
    buf.copy_to_host(&mut back)?;
    assert_same(&back, host, &format!("{what}: copy_to_host"));
    let mut other = DeviceBuffer::<T>::zeroed(ctx, n)?;
    other.copy_from_host(host)?;
    assert_same(&other.to_vec()?, host, &format!("{what}: copy_from_host"));
    if n >= 8 {
        let (lo, hi) = (3, n - 2);
        assert_same(
            &buf[lo..hi].to_vec()?,
            &host[lo..hi],
            &format!("{what}: to_vec of [3, n - 2)"),
        );
        let mut part: Vec<T> = host[lo + 1..hi + 1].to_vec();
        buf[lo..hi].copy_to_host(&mut part)?;
        assert_same(
            &part,
            &host[lo..hi],
            &format!("{what}: copy_to_host of [3, n - 2)"),
        );
        // shifted by one element: every byte lands somewhere else than before
        other[1..n - 4].copy_from_host(&host[lo..n - 2])?;
        let all = other.to_vec()?;
        assert_same(
            &all[1..n - 4],
            &host[lo..n - 2],
            &format!("{what}: copy_from_host into [1, n - 4)"),
        );
        assert_same(
            &all[..1],
            &host[..1],
            &format!("{what}: the element before"),
        );
        assert_same(
            &all[n - 4..],
            &host[n - 4..],
            &format!("{what}: the elements after"),
        );
    }
    Ok(())
}

/// Element counts around the chunk sizes (64 KiB to 2 MiB) and the default thresholds.
fn lengths(elem: usize) -> Vec<usize> {
    let bytes = [
        0usize,
        1,
        7,
        4096 + 3,
        (64 << 10) - 1,
        (64 << 10) + 5,
        (1 << 20) - 3,
        1 << 20,
        (1 << 20) + 13,
        (2 << 20) + 1,
        (3 << 20) + 4099,
        (4 << 20) + 7,
        (17 << 20) + 3,
    ];
    let mut lens: Vec<usize> = bytes.iter().map(|b| b.div_ceil(elem)).collect();
    lens.dedup();
    lens
}

fn all_types(ctx: ContextGuard<'_>, label: &str) -> Result<(), Error> {
    for len in lengths(1) {
        every_copy(
            ctx,
            &pattern(len, |x| x as u8),
            &format!("{label}, {len} u8"),
        )?;
    }
    for len in lengths(4) {
        every_copy(
            ctx,
            &pattern(len, |x| (x >> 40) as f32 * 0.25),
            &format!("{label}, {len} f32"),
        )?;
    }
    for len in lengths(8) {
        every_copy(ctx, &pattern(len, |x| x), &format!("{label}, {len} u64"))?;
    }
    for len in lengths(16) {
        let make = |x: u64| [x as u32, (x >> 32) as u32, !(x as u32), 7];
        every_copy(
            ctx,
            &pattern(len, make),
            &format!("{label}, {len} [u32; 4]"),
        )?;
    }
    // an element of 6 bytes, which no 16-byte step of a streaming copy divides: elements
    // split across the steps arrive whole
    for len in lengths(6) {
        let make = |x: u64| [x as u16, (x >> 16) as u16, (x >> 48) as u16];
        every_copy(
            ctx,
            &pattern(len, make),
            &format!("{label}, {len} [u16; 3]"),
        )?;
    }
    Ok(())
}

/// With the built-in thresholds (copies of 512 KiB or 1 MiB and up staged), and with every
/// copy staged (thresholds 0), every byte arrives, for elements of 1, 4, 8 and 16 bytes and
/// of 6 (`[u16; 3]`), at lengths that are not multiples of anything, whole buffers and
/// sub-views at odd offsets.
fn every_byte_arrives_at_every_size_and_element_size() {
    common::in_context(|ctx| {
        all_types(ctx, "built-in thresholds")?;
        assert!(
            staging::bytes_of(ctx) > 0,
            "copies of 1 MiB and up were staged"
        );
        let _all = Thresholds::all(0);
        all_types(ctx, "everything staged")?;
        assert!(staging::bytes_of(ctx) <= MAX_STAGINGS_PER_CONTEXT * STAGING_BYTES);
        Ok(())
    });
}

/// 256 MiB each way, through every entry point.
fn a_256_mib_round_trip_is_exact() {
    common::in_context(|ctx| {
        let n = (256 << 20) / 4;
        let host: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let buf = DeviceBuffer::from_slice(ctx, &host)?;
        assert_same(&buf.to_vec()?, &host, "256 MiB from_slice then to_vec");
        let mut back = vec![0u32; n];
        buf.copy_to_host(&mut back)?;
        assert_same(&back, &host, "256 MiB copy_to_host");
        let mut other = DeviceBuffer::<u32>::zeroed(ctx, n)?;
        other.copy_from_host(&back)?;
        assert_same(&other.to_vec()?, &host, "256 MiB copy_from_host");
        assert!(staging::bytes_of(ctx) > 0);
        Ok(())
    });
}

/// Six threads of one `SharedContext` copy their own buffers at once: every byte right,
/// and the context never has more than its maximum of stagings (the others wait).
fn several_threads_copy_at_once_through_one_shared_context() {
    common::in_context(|ctx| {
        let shared = ctx.share();
        let n = (24 << 20) / 4 + 5;
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..6u32)
                .map(|t| {
                    s.spawn(move || {
                        shared.enter(|ctx| {
                            let host: Vec<u32> = (0..n as u32)
                                .map(|i| i.wrapping_mul(31).wrapping_add(t << 28))
                                .collect();
                            let mut buf = DeviceBuffer::from_slice(ctx, &host)?;
                            for round in 0..3 {
                                assert_same(
                                    &buf.to_vec()?,
                                    &host,
                                    &format!("thread {t}, round {round}"),
                                );
                                let mut back = vec![0u32; n];
                                buf.copy_to_host(&mut back)?;
                                assert_same(&back, &host, &format!("thread {t}, copy_to_host"));
                                buf.copy_from_host(&back)?;
                                assert!(
                                    staging::bytes_of(ctx)
                                        <= MAX_STAGINGS_PER_CONTEXT * STAGING_BYTES,
                                    "at most {MAX_STAGINGS_PER_CONTEXT} stagings"
                                );
                            }
                            Ok::<_, Error>(())
                        })
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap()?;
            }
            Ok::<_, Error>(())
        })?;
        let bytes = staging::bytes_of(ctx);
        assert!(
            bytes > 0 && bytes <= MAX_STAGINGS_PER_CONTEXT * STAGING_BYTES,
            "{bytes}"
        );
        Ok(())
    });
}

/// A context's staging is page-locked for it while it lives, freed by `release`, and freed
/// when `with_context` returns: the process's staging memory is back where it was.
fn the_staging_is_page_locked_and_freed_with_its_context() {
    let device = common::gpu();
    let before = staging::live_bytes();
    with_context(&device, ContextFlags::default(), |ctx| {
        assert_eq!(
            staging::bytes_of(ctx),
            0,
            "nothing before the first bulk copy"
        );
        let buf = DeviceBuffer::from_slice(ctx, &vec![5u16; 8 << 20])?;
        assert_eq!(
            staging::bytes_of(ctx),
            STAGING_BYTES,
            "one staging, made by from_slice"
        );
        assert_eq!(staging::live_bytes(), before + STAGING_BYTES);
        let addresses = staging::addresses_of(ctx);
        assert_eq!(addresses.len(), 1);
        assert!(
            staging::is_known_to_driver(addresses[0])?,
            "page-locked in this context"
        );
        assert!(buf.to_vec()?.iter().all(|&x| x == 5));
        staging::release(ctx)?;
        assert_eq!(staging::bytes_of(ctx), 0);
        assert_eq!(staging::live_bytes(), before);
        assert!(!staging::is_known_to_driver(addresses[0])?, "unregistered");
        // and again, kept until the end of the context
        assert!(buf.to_vec()?.iter().all(|&x| x == 5));
        assert_eq!(staging::bytes_of(ctx), STAGING_BYTES);
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(staging::live_bytes(), before, "freed with the context");
}

/// Every `with_primary_context` frees the staging of the primary context before its
/// release (the crate cannot tell which release destroys the context), also a nested one;
/// a later staged copy makes it again.
fn the_primary_context_keeps_its_staging_while_held_and_frees_it_after() {
    let device = common::gpu();
    let before = staging::live_bytes();
    assert!(
        !device.primary_context_state().unwrap().active,
        "nothing holds the primary context yet"
    );
    with_primary_context(&device, |outer| {
        with_primary_context(&device, |inner| {
            let buf = DeviceBuffer::from_slice(inner, &vec![9u8; 32 << 20])?;
            assert_eq!(buf.to_vec()?, vec![9u8; 32 << 20]);
            Ok::<_, Error>(())
        })?;
        assert_eq!(
            staging::bytes_of(outer),
            0,
            "freed before the nested release"
        );
        let buf = DeviceBuffer::from_slice(outer, &vec![4u8; 32 << 20])?;
        assert_eq!(buf.to_vec()?, vec![4u8; 32 << 20]);
        assert_eq!(staging::bytes_of(outer), STAGING_BYTES, "made again");
        Ok::<_, Error>(())
    })
    .unwrap();
    assert!(!device.primary_context_state().unwrap().active, "released");
    assert_eq!(
        staging::live_bytes(),
        before,
        "freed with the primary context"
    );
}

/// `with_raw_context` frees the staging before it returns: the context's owner may destroy
/// the context right after.
fn with_raw_context_frees_the_staging_before_it_returns() {
    common::in_context(|ctx| {
        let before = staging::live_bytes();
        // SAFETY: `ctx` is alive and stays so for the whole call.
        unsafe {
            with_raw_context(common::handle(ctx), |raw| {
                let buf = DeviceBuffer::from_slice(raw, &vec![3u32; 8 << 20])?;
                assert_eq!(buf.to_vec()?, vec![3u32; 8 << 20]);
                assert_eq!(staging::bytes_of(raw), STAGING_BYTES);
                Ok::<_, Error>(())
            })
        }?;
        assert_eq!(staging::bytes_of(ctx), 0);
        assert_eq!(staging::live_bytes(), before);
        Ok(())
    });
}

/// Pool memory (the crate's pool holds a `DeviceBuffer`'s memory) is tied to no context:
/// its copies run in whatever context is current. Where another library made a context
/// current that no scope of the crate holds (here the primary context, retained and pushed
/// with raw calls, as cudarc's `bind_to_thread` does), no teardown of the crate would free
/// a staging made for it, so its copies take the driver's path, exact, and keep nothing.
/// Under `with_primary_context`, which holds the same primary context, they are staged.
/// (`with_partitions` retains the primary context too, but its teardown frees nothing kept
/// for it: one ran before, and must not count as a hold.)
fn pool_memory_copied_in_a_context_no_scope_holds_keeps_no_staging() {
    let device = common::gpu();
    let driver = common::driver();
    if let Err(e) = cuda_brand::with_partitions(&device, |_| Ok::<_, Error>(())) {
        eprintln!("(no partitions here: {e})");
    }
    with_context(&device, ContextFlags::default(), |ctx| {
        let host = pattern(2 << 20, |x| x as u32); // 8 MiB: every kind is staged
        let mut buf = DeviceBuffer::from_slice(ctx, &host)?;
        // SAFETY: only given to the driver's attribute query while `buf` is alive.
        assert_ne!(
            common::mempool_of(unsafe { buf.as_device_ptr() }),
            0,
            "pool memory"
        );
        let before = staging::live_bytes();
        let mut primary = std::ptr::null_mut();
        // SAFETY (of the test): retains and pushes the primary context, undone below.
        unsafe {
            assert_eq!(
                (driver.cuDevicePrimaryCtxRetain)(&mut primary, device.as_raw()),
                0
            );
            assert_eq!((driver.cuCtxPushCurrent_v2)(primary), 0);
        }
        let copied = (|| {
            assert_eq!(common::current(), primary);
            let got = buf.to_vec()?;
            let mut out = vec![0u32; host.len()];
            buf.copy_to_host(&mut out)?;
            let reversed: Vec<u32> = host.iter().rev().copied().collect();
            buf.copy_from_host(&reversed)?;
            Ok::<_, Error>((got, out, reversed, staging::live_bytes()))
        })();
        let mut popped = std::ptr::null_mut();
        // SAFETY: undoes the push and the retain (the primary context is destroyed, nobody
        // else holds it).
        unsafe {
            assert_eq!((driver.cuCtxPopCurrent_v2)(&mut popped), 0);
            assert_eq!((driver.cuDevicePrimaryCtxRelease_v2)(device.as_raw()), 0);
        }
        let (got, out, reversed, during) = copied?;
        assert_same(&got, &host, "to_vec in a foreign context");
        assert_same(&out, &host, "copy_to_host in a foreign context");
        assert_eq!(
            during, before,
            "no staging kept for a context no scope holds"
        );
        assert_same(
            &buf.to_vec()?,
            &reversed,
            "copy_from_host in a foreign context",
        );
        // the same primary context, held by the crate: staged, and freed at its end
        with_primary_context(&device, |held| {
            assert_same(
                &buf.to_vec()?,
                &reversed,
                "to_vec under with_primary_context",
            );
            assert_eq!(staging::bytes_of(held), STAGING_BYTES, "staged");
            Ok::<_, Error>(())
        })?;
        assert_eq!(staging::live_bytes(), before);
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// A frozen context allocates no staging: with none reserved its copies take the driver's
/// path; with one reserved, four threads copying at once share that one.
fn a_frozen_context_never_allocates_and_uses_its_reservation() {
    common::in_context(|ctx| {
        let host = pattern(6 << 20, |x| x as u16);
        staging::freeze(ctx, true);
        let buf = DeviceBuffer::from_slice(ctx, &host)?;
        assert_same(&buf.to_vec()?, &host, "frozen, nothing reserved");
        assert_eq!(staging::bytes_of(ctx), 0, "frozen: nothing allocated");
        staging::reserve(ctx)?;
        assert_eq!(
            staging::bytes_of(ctx),
            STAGING_BYTES,
            "reserved while frozen"
        );
        let shared = ctx.share();
        let buf = &buf;
        let host = &host;
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(move || {
                        shared.enter(|_| {
                            for _ in 0..3 {
                                assert_same(&buf.to_vec()?, host, "frozen, one reserved");
                            }
                            Ok::<_, Error>(())
                        })
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap()?;
            }
            Ok::<_, Error>(())
        })?;
        assert_eq!(
            staging::bytes_of(ctx),
            STAGING_BYTES,
            "still just the reservation"
        );
        staging::freeze(ctx, false);
        Ok(())
    });
}

/// When the staging cannot be allocated, the copies take the driver's path and lose
/// nothing; `reserve` reports the failure, and succeeds once allocation works again.
fn a_failed_staging_allocation_falls_back_to_the_driver_path() {
    common::in_context(|ctx| {
        let before = staging::live_bytes();
        staging::simulate_allocation_failure(true);
        let host = pattern(64 << 20, |x| (x >> 3) as u8);
        let outcome = (|| {
            let mut buf = DeviceBuffer::from_slice(ctx, &host)?;
            assert_same(
                &buf.to_vec()?,
                &host,
                "from_slice and to_vec without staging",
            );
            buf.copy_from_host(&host)?;
            let mut back = vec![0u8; host.len()];
            buf.copy_to_host(&mut back)?;
            assert_same(&back, &host, "copy_to_host without staging");
            assert_eq!(staging::bytes_of(ctx), 0);
            assert!(staging::reserve(ctx).is_err(), "the failure is reported");
            Ok::<_, Error>(())
        })();
        staging::simulate_allocation_failure(false);
        outcome?;
        assert_eq!(staging::live_bytes(), before);
        staging::reserve(ctx)?;
        assert_eq!(staging::bytes_of(ctx), STAGING_BYTES);
        Ok(())
    });
}

/// A staged host-to-device copy is complete when it returns: a non-blocking stream (not
/// ordered after the legacy stream the copy ran on) reads it right after and sees all of it.
fn a_staged_copy_to_the_device_is_complete_when_it_returns() {
    common::in_context(|ctx| {
        let _all = Thresholds::all(0);
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let n = (64 << 20) / 4;
        let mut out = vec![0u32; n];
        for round in 0..3u32 {
            let host: Vec<u32> = (0..n as u32).map(|i| i ^ (round << 30)).collect();
            let mut dev = DeviceBuffer::<u32>::zeroed(ctx, n)?;
            dev.copy_from_host(&host)?;
            let mut copy = DeviceBuffer::<u32>::zeroed(ctx, n)?;
            stream.scope(|s| {
                let c = s.bind_mut(&mut copy);
                s.copy_from_device(c, &dev)?;
                s.copy_to_host(&mut out, c.into_ref())
            })?;
            assert_same(&out, &host, &format!("round {round}"));
        }
        Ok(())
    });
}

/// A staged download (its DMA queued on the legacy stream, asynchronously) sees what a
/// scope and then a synchronous fill (recorded on the thread's sync stream, not waited for)
/// wrote just before it, at sizes from one chunk to many.
fn a_staged_download_sees_the_writes_queued_just_before_it() {
    common::in_context(|ctx| {
        let _all = Thresholds::all(0);
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        for n in [(1 << 20) / 4 + 3, (8 << 20) / 4, (64 << 20) / 4] {
            let mut buf = DeviceBuffer::<u32>::zeroed(ctx, n)?;
            let mut back = vec![0u32; n];
            for round in 1..=5u32 {
                stream.scope(|s| s.fill(&mut buf, 0xabab_abab))?;
                buf.fill(round)?;
                let got = buf.to_vec()?;
                if let Some(i) = got.iter().position(|&v| v != round) {
                    panic!("to_vec of {n}, round {round}: element {i} is {:#x}", got[i]);
                }
                buf.fill(round << 8)?;
                buf.copy_to_host(&mut back)?;
                if let Some(i) = back.iter().position(|&v| v != round << 8) {
                    panic!(
                        "copy_to_host of {n}, round {round}: element {i} is {:#x}",
                        back[i]
                    );
                }
            }
        }
        Ok(())
    });
}

/// The threads a staging keeps exit after 2 s without a copy; the next staged copies start
/// them again and move every byte.
fn staged_copies_after_the_kept_threads_went_idle_are_exact() {
    common::in_context(|ctx| {
        let _all = Thresholds::all(0);
        let n = (24 << 20) / 4 + 1;
        let host = pattern(n, |i| i as u32 ^ 0x5a5a_0000);
        for round in 0..3 {
            let buf = DeviceBuffer::from_slice(ctx, &host)?;
            assert_same(
                &buf.to_vec()?,
                &host,
                &format!("to_vec after idle, round {round}"),
            );
            let mut back = vec![0u32; n];
            buf.copy_to_host(&mut back)?;
            assert_same(
                &back,
                &host,
                &format!("copy_to_host after idle, round {round}"),
            );
            std::thread::sleep(std::time::Duration::from_millis(2500));
        }
        Ok(())
    });
}

/// Host memory the driver already knows (page-locked) is copied directly, not staged.
fn page_locked_host_memory_is_not_staged() {
    common::in_context(|ctx| {
        let _all = Thresholds::all(0);
        let n = 4 << 20;
        let mut pinned = PinnedBuffer::<u8>::zeroed(ctx, n)?;
        pinned.copy_from_slice(&pattern(n, |x| x as u8));
        let mut buf = DeviceBuffer::<u8>::zeroed(ctx, n)?;
        buf.copy_from_host(&pinned)?;
        let mut back = PinnedBuffer::<u8>::zeroed(ctx, n)?;
        buf.copy_to_host(&mut back)?;
        assert_same(&back, &pinned, "pinned round trip");
        assert_eq!(staging::bytes_of(ctx), 0, "nothing staged");
        Ok(())
    });
}

/// Empty copies reach neither the driver nor the staging.
fn empty_copies_stage_nothing() {
    common::in_context(|ctx| {
        let _all = Thresholds::all(0);
        let mut buf = DeviceBuffer::<u64>::from_slice(ctx, &[])?;
        assert!(buf.to_vec()?.is_empty());
        buf.copy_from_host(&[])?;
        buf.copy_to_host(&mut [])?;
        assert_eq!(staging::bytes_of(ctx), 0);
        Ok(())
    });
}

/// On a scoped thread with no current context, a copy of pool memory runs in the device's
/// primary context, retained for the copy alone: it takes the driver's path, correctly.
fn a_copy_on_a_thread_without_a_context_is_exact() {
    common::in_context(|ctx| {
        let _all = Thresholds::all(0);
        let host = pattern(3 << 20, |x| x as u32);
        let buf = DeviceBuffer::from_slice(ctx, &host)?;
        let staged = staging::bytes_of(ctx);
        let got = std::thread::scope(|s| s.spawn(|| buf.to_vec()).join().unwrap())?;
        assert_same(&got, &host, "to_vec on a thread without a context");
        assert_eq!(staging::bytes_of(ctx), staged);
        Ok(())
    });
}

/// This file's tests, each to run with no other test of its binary beside it (see the
/// file's header; `tests/gpu.rs` runs them after the others).
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    let gpu = |name, body| Test {
        name,
        needs: Needs::Gpu,
        body,
    };
    Vec::from([
        gpu(
            "every_byte_arrives_at_every_size_and_element_size",
            every_byte_arrives_at_every_size_and_element_size,
        ),
        gpu(
            "a_256_mib_round_trip_is_exact",
            a_256_mib_round_trip_is_exact,
        ),
        gpu(
            "several_threads_copy_at_once_through_one_shared_context",
            several_threads_copy_at_once_through_one_shared_context,
        ),
        gpu(
            "the_staging_is_page_locked_and_freed_with_its_context",
            the_staging_is_page_locked_and_freed_with_its_context,
        ),
        gpu(
            "the_primary_context_keeps_its_staging_while_held_and_frees_it_after",
            the_primary_context_keeps_its_staging_while_held_and_frees_it_after,
        ),
        gpu(
            "with_raw_context_frees_the_staging_before_it_returns",
            with_raw_context_frees_the_staging_before_it_returns,
        ),
        gpu(
            "pool_memory_copied_in_a_context_no_scope_holds_keeps_no_staging",
            pool_memory_copied_in_a_context_no_scope_holds_keeps_no_staging,
        ),
        gpu(
            "a_frozen_context_never_allocates_and_uses_its_reservation",
            a_frozen_context_never_allocates_and_uses_its_reservation,
        ),
        gpu(
            "a_failed_staging_allocation_falls_back_to_the_driver_path",
            a_failed_staging_allocation_falls_back_to_the_driver_path,
        ),
        gpu(
            "a_staged_copy_to_the_device_is_complete_when_it_returns",
            a_staged_copy_to_the_device_is_complete_when_it_returns,
        ),
        gpu(
            "page_locked_host_memory_is_not_staged",
            page_locked_host_memory_is_not_staged,
        ),
        gpu("empty_copies_stage_nothing", empty_copies_stage_nothing),
        gpu(
            "a_staged_download_sees_the_writes_queued_just_before_it",
            a_staged_download_sees_the_writes_queued_just_before_it,
        ),
        gpu(
            "staged_copies_after_the_kept_threads_went_idle_are_exact",
            staged_copies_after_the_kept_threads_went_idle_are_exact,
        ),
        gpu(
            "a_copy_on_a_thread_without_a_context_is_exact",
            a_copy_on_a_thread_without_a_context_is_exact,
        ),
    ])
}
