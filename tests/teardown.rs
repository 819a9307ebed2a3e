//! Teardown, measured: a test binary of its own, so that no other test creates or destroys
//! contexts at the same time and the device's free memory is a clean signal.

mod common;

use cuda_brand::{ContextFlags, Error, with_context, with_primary_context};

fn a_destroyed_context_gives_its_memory_back() {
    let device = gpu_or_skip!();
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

gpu_test_main!(
    a_destroyed_context_gives_its_memory_back,
);
