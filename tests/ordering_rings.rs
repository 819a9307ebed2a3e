//! The bounce rings of the sync streams (issue 28, fifth step; `src/synchronous/`): in a
//! context the crate destroys itself (`with_context`, `OwnedContext::new`) a ring is
//! page-locked (at most `MAX_REGISTERED_RINGS` of them), kept with its thread's sync stream
//! and unregistered and freed when the context is destroyed; in any other context it is
//! plain memory, freed with its sync stream. Each test counts the rings of the whole
//! process, so they run alone.

use crate::common;
use crate::common::ordering::{assert_all, keep_busy};

use cuda_brand::__order as order;
use cuda_brand::__staging::is_known_to_driver;
use cuda_brand::owned::OwnedContext;
use cuda_brand::prelude::*;
use cuda_brand::{SharedContext, with_primary_context};

/// 1 GiB of `u32`s: a fill of it keeps a sync stream busy for a while.
const SLOW_LEN: usize = 1 << 28;
/// 64 KiB of `u32`s: an upload of it goes through the bounce ring.
const SMALL: usize = 16 << 10;

/// On a thread of its own, enters `shared`, queues slow fills on its sync stream, then
/// uploads `value` through the ring (behind them, so the slot's copy is still queued when
/// the entry ends) and reads it back synchronously; the ring's (address, page-locked) as
/// it was during the entry.
fn upload_on_a_thread(shared: SharedContext<'_>, value: u32) -> Result<(usize, bool), Error> {
    std::thread::scope(|t| {
        t.spawn(|| {
            shared.enter(|g| {
                let mut slow = g.zeroed::<u32>(SLOW_LEN)?;
                keep_busy(&mut slow, 8)?;
                let mut buf = g.zeroed::<u32>(SMALL)?;
                let host = vec![value; SMALL];
                buf.copy_from_host(&host)?;
                drop(host); // complete: the caller's buffer is free
                let ring = order::ring_of_this_thread(g).expect("a bounced upload made a ring");
                assert_all(&buf.to_vec()?, value, "a bounced upload");
                Ok(ring)
            })
        })
        .join()
        .unwrap()
    })
}

fn a_ring_is_page_locked_where_the_crate_destroys_the_context_and_freed_with_it() {
    let device = common::gpu();
    let before = order::live_rings();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        assert!(order::rings_of(ctx).is_empty(), "no ring before an upload");
        let (first, locked) = upload_on_a_thread(shared, 7)?;
        assert_eq!(order::live_rings(), before + 1, "one ring");
        assert!(locked, "page-locked in a context with_context made");
        assert!(
            is_known_to_driver(first)?,
            "the driver knows it as page-locked"
        );
        assert!(
            order::rings_of(ctx).contains(&(first, true)),
            "kept with the thread's sync stream after its entry ended"
        );
        upload_on_a_thread(shared, 8)?;
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(
        order::live_rings(),
        before,
        "unregistered and freed with the context"
    );
}

fn a_ring_in_a_primary_context_is_plain_memory_freed_with_its_sync_stream() {
    let device = common::gpu();
    let before = order::live_rings();
    with_primary_context(&device, |ctx| {
        let mut buf = ctx.zeroed::<u32>(SMALL)?;
        buf.copy_from_host(&vec![3u32; SMALL])?;
        assert_all(&buf.to_vec()?, 3, "a bounced upload");
        let rings = order::rings_of(ctx);
        assert_eq!(rings.len(), 1, "{rings:?}");
        assert!(
            !rings[0].1,
            "not page-locked: no teardown knows the context idle"
        );
        assert!(
            !is_known_to_driver(rings[0].0)?,
            "plain memory to the driver"
        );
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(order::live_rings(), before, "freed with its sync stream");
}

/// More threads than a context may have page-locked rings, all alive at once and each
/// uploading behind slow fills: the first `MAX_REGISTERED_RINGS` rings are page-locked,
/// the rest plain memory, every value arrives, and every ring is freed with the context.
fn a_context_page_locks_at_most_its_share_of_rings() {
    let device = common::gpu();
    let threads = order::MAX_REGISTERED_RINGS + 4;
    let before = order::live_rings();
    with_context(&device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        let all_up = std::sync::Barrier::new(threads);
        std::thread::scope(|t| {
            let workers: Vec<_> = (0..threads as u32)
                .map(|w| {
                    let all_up = &all_up;
                    t.spawn(move || {
                        shared.enter(|g| {
                            let uploaded = (|| {
                                let mut slow = g.zeroed::<u32>(SLOW_LEN / 4)?;
                                keep_busy(&mut slow, 4)?;
                                let mut buf = g.zeroed::<u32>(SMALL)?;
                                buf.copy_from_host(&vec![w; SMALL])?;
                                Ok::<_, Error>(buf)
                            })();
                            // every thread alive (its own token and sync stream) at once;
                            // reached on error too, so that no thread waits forever
                            all_up.wait();
                            let buf = uploaded?;
                            assert_all(&buf.to_vec()?, w, "a bounced upload");
                            Ok::<_, Error>(())
                        })
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|w| w.join().unwrap())
        })?;
        let rings = order::rings_of(ctx);
        assert_eq!(rings.len(), threads, "one ring per thread's sync stream");
        let locked = rings.iter().filter(|&&(_, locked)| locked).count();
        assert_eq!(locked, order::MAX_REGISTERED_RINGS, "the rest plain memory");
        assert_eq!(order::live_rings(), before + threads as u64);
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(order::live_rings(), before, "every ring freed");
}

fn an_owned_context_frees_its_rings_with_its_last_handle() {
    let device = common::gpu();
    let before = order::live_rings();
    let home = OwnedContext::new(&device, ContextFlags::default()).unwrap();
    for value in [5u32, 6] {
        let (host, locked) = home
            .enter(|ctx| {
                let mut buf = ctx.zeroed::<u32>(SMALL)?;
                buf.copy_from_host(&vec![value; SMALL])?;
                assert_all(&buf.to_vec()?, value, "a bounced upload");
                Ok::<_, Error>(order::ring_of_this_thread(ctx).expect("made by the upload"))
            })
            .unwrap();
        assert!(locked, "page-locked in a context the owning layer destroys");
        assert!(is_known_to_driver(host).unwrap());
    }
    assert_eq!(
        order::live_rings(),
        before + 1,
        "one ring, kept between entries"
    );
    assert_eq!(home.handles(), 1, "the last handle");
    home.close().unwrap();
    assert_eq!(order::live_rings(), before, "freed with the context");
}

/// Tests that run alone: they count the process's rings.
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    let gpu = |name, body| Test {
        name,
        needs: Needs::Gpu,
        body,
    };
    Vec::from([
        gpu(
            "a_ring_is_page_locked_where_the_crate_destroys_the_context_and_freed_with_it",
            a_ring_is_page_locked_where_the_crate_destroys_the_context_and_freed_with_it,
        ),
        gpu(
            "a_ring_in_a_primary_context_is_plain_memory_freed_with_its_sync_stream",
            a_ring_in_a_primary_context_is_plain_memory_freed_with_its_sync_stream,
        ),
        gpu(
            "a_context_page_locks_at_most_its_share_of_rings",
            a_context_page_locks_at_most_its_share_of_rings,
        ),
        gpu(
            "an_owned_context_frees_its_rings_with_its_last_handle",
            an_owned_context_frees_its_rings_with_its_last_handle,
        ),
    ])
}
