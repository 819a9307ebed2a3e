//! Teardown, observed: a test binary of its own whose tests run one at a time, so that no
//! other test creates, destroys, retains or releases contexts meanwhile and the device's
//! free memory and the primary context's state are clean signals.

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

fn the_primary_context_is_released_after_the_closure() {
    let device = gpu_or_skip!();
    let (_, active) = device.primary_context_state().unwrap();
    assert!(
        !active,
        "nothing in this binary holds the primary context yet"
    );
    with_primary_context(&device, |_| {
        assert!(device.primary_context_state()?.1, "retained inside");
        Ok::<_, Error>(())
    })
    .unwrap();
    let (_, active) = device.primary_context_state().unwrap();
    assert!(!active, "released after the closure");
    // also when the closure fails or panics
    let _ = with_primary_context(&device, |_| {
        Err::<(), _>(Error::new("my step", cuda_brand::ErrorCode::Unknown))
    });
    assert!(
        !device.primary_context_state().unwrap().1,
        "released after an error"
    );
    let caught = std::panic::catch_unwind(|| {
        let _ = with_primary_context(&device, |_| -> Result<(), Error> { panic!("inside") });
    });
    assert!(caught.is_err());
    assert!(
        !device.primary_context_state().unwrap().1,
        "released after a panic"
    );
}

fn main() -> std::process::ExitCode {
    use common::harness::{Needs, Test, run_serial};
    run_serial(vec![
        Test {
            name: "a_destroyed_context_gives_its_memory_back",
            needs: Needs::Gpu,
            body: a_destroyed_context_gives_its_memory_back,
        },
        Test {
            name: "the_primary_context_is_released_after_the_closure",
            needs: Needs::Gpu,
            body: the_primary_context_is_released_after_the_closure,
        },
    ])
}
