//! Teardown, observed: each test runs alone (`tests_alone`, after the other tests of the
//! `gpu` binary), so that no other test creates, destroys, retains or releases contexts
//! meanwhile and the device's free memory and the primary context's state are clean
//! signals.

use crate::common;

use cuda_brand::{ContextFlags, Error, with_context, with_primary_context};

fn a_destroyed_context_gives_its_memory_back() {
    let device = common::gpu();
    with_primary_context(&device, |_| {
        let free_before = common::free_memory();
        with_context(&device, ContextFlags::default(), |_| {
            // a fresh context reserves device memory of its own (hundreds of MiB on an H100)
            let free_inside = common::free_memory();
            assert!(
                free_inside < free_before,
                "free {free_inside} vs {free_before}"
            );
            Ok::<_, Error>(())
        })?;
        let free_after = common::free_memory();
        let slack = 64 << 20;
        assert!(
            free_after + slack >= free_before,
            "{free_after} + 64 MiB < {free_before}: context not destroyed"
        );
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn the_primary_context_is_released_after_the_closure() {
    let device = common::gpu();
    let active = device.primary_context_state().unwrap().active;
    assert!(
        !active,
        "nothing in this binary holds the primary context yet"
    );
    with_primary_context(&device, |_| {
        assert!(device.primary_context_state()?.active, "retained inside");
        Ok::<_, Error>(())
    })
    .unwrap();
    let active = device.primary_context_state().unwrap().active;
    assert!(!active, "released after the closure");
    // also when the closure fails or panics
    let _ = with_primary_context(&device, |_| {
        Err::<(), _>(Error::new("my step", cuda_brand::ErrorCode::Unknown))
    });
    assert!(
        !device.primary_context_state().unwrap().active,
        "released after an error"
    );
    let caught = std::panic::catch_unwind(|| {
        let _ = with_primary_context(&device, |_| -> Result<(), Error> { panic!("inside") });
    });
    assert!(caught.is_err());
    assert!(
        !device.primary_context_state().unwrap().active,
        "released after a panic"
    );
}

/// Observes the crate's pool of the device, which every test of a binary shares: here, in
/// the binary whose tests run one at a time.
fn buffers_come_from_the_crate_pool_and_go_back_to_it() {
    common::in_context(|ctx| {
        let pool = cuda_brand::MemoryPool::of_device(ctx)?;
        assert_eq!(pool.release_threshold()?, u64::MAX, "keeps freed memory");
        let before = pool.used_bytes()?;
        let buf = cuda_brand::DeviceBuffer::<u8>::zeroed(ctx, 8 << 20)?;
        // SAFETY: the address and the handle are only compared, while `buf` and `pool` live.
        let (address, raw_pool) = unsafe { (buf.as_device_ptr(), pool.as_raw()) };
        assert_eq!(common::mempool_of(address), raw_pool as usize);
        assert!(pool.used_bytes()? >= before + (8 << 20));
        assert!(pool.reserved_bytes()? >= pool.used_bytes()?);
        assert_eq!(buf.to_vec()?, vec![0u8; 8 << 20]);
        drop(buf);
        ctx.synchronize()?; // the free is stream-ordered
        assert!(pool.used_bytes()? < before + (8 << 20));
        Ok(())
    });
}

/// This file's tests, each to run with no other test of its binary beside it (see the
/// file's header; `tests/gpu.rs` runs them after the others).
pub fn tests_alone() -> Vec<common::harness::Test> {
    use common::harness::{Needs, Test};
    vec![
        Test {
            name: "a_destroyed_context_gives_its_memory_back",
            needs: Needs::Gpu,
            body: a_destroyed_context_gives_its_memory_back,
        },
        Test {
            name: "buffers_come_from_the_crate_pool_and_go_back_to_it",
            needs: Needs::Gpu,
            body: buffers_come_from_the_crate_pool_and_go_back_to_it,
        },
        Test {
            name: "the_primary_context_is_released_after_the_closure",
            needs: Needs::Gpu,
            body: the_primary_context_is_released_after_the_closure,
        },
    ]
}
