//! The GPU tests, linked once: every test file that needs no process of its own is a module
//! of this binary (`cargo test --test gpu`; one test: `cargo test --test gpu -- --exact
//! NAME`). Without a GPU its GPU tests are ignored and the rest run: the error mapping, the
//! checks made before any driver call, and the no-device paths (`no_device`).
//!
//! Most tests run several at a time, as `cargo test` runs tests. Those of `errors`,
//! `phases`, `bulk_copies`, `teardown`, `partitions`, some of `owned`, the partition test
//! of `ordering` and two of `ordering_attacks` observe process-wide state (the device's free
//! memory, the crate's pools and staging, the device's default pool, the primary context's
//! retain count; a device is partitioned by one closure at a time): each runs
//! after the others, alone (`common::harness::run_with_alone`). Tests of `events`,
//! `no_device` and `modules` start this binary again in a child process with `--exact` and
//! their own name (so no two tests of it may share a name; the harness refuses that), and
//! the fuzz run of `binary_fuzz` starts it with `CUDA_BRAND_FUZZ_CHILD`, which `main`
//! answers before the harness starts.
//!
//! Binaries of their own, because their tests need a process of their own:
//!
//! * `sticky_error`, `sticky_teardown`: an illegal address poisons every context of the
//!   process, later ones included (`sticky_error` asserts it), so each needs a fresh
//!   process, and no other test may share it.
//! * `no_pools`: `CUDA_BRAND_NO_MEMORY_POOLS=1` is read once per process; it must be set
//!   before anything allocates, and must not reach other tests.
//! * `nccl` (feature `nccl`): NCCL makes failing CUDA calls of its own in every test, so
//!   `scripts/sanitize` runs that binary whole with API errors unreported (a `library` line
//!   of `tests/DRIVER_ERRORS`); here those calls would hide every other test's.

#[macro_use]
mod common;

mod binary_fuzz;
mod bulk_copies;
mod context;
#[cfg(feature = "derive")]
mod derive;
mod errors;
mod events;
mod graphs;
mod kernels;
mod memory;
mod modules;
mod no_device;
mod ordering;
mod ordering_attacks;
mod ordering_raw;
mod ordering_rings;
mod ordering_spans_attacks;
mod owned;
mod partitions;
mod peer;
mod phases;
mod pointer_kernels;
mod review_47;
mod soundness;
mod stream;
mod teardown;

fn main() -> std::process::ExitCode {
    // a child of the fuzz run loads its batch; no harness
    if let Some(exit) = binary_fuzz::child() {
        return exit;
    }
    // the fuzz run first: it takes longest, and its children run beside the other tests
    let mut tests = binary_fuzz::tests();
    tests.extend(context::tests());
    tests.extend(memory::tests());
    tests.extend(stream::tests());
    tests.extend(events::tests());
    tests.extend(kernels::tests());
    tests.extend(pointer_kernels::tests());
    tests.extend(modules::tests());
    tests.extend(graphs::tests());
    tests.extend(peer::tests());
    tests.extend(soundness::tests());
    tests.extend(owned::tests());
    tests.extend(ordering::tests());
    tests.extend(ordering_attacks::tests());
    tests.extend(ordering_raw::tests());
    tests.extend(ordering_spans_attacks::tests());
    tests.extend(review_47::tests());
    #[cfg(feature = "derive")]
    tests.extend(derive::tests());
    tests.extend(no_device::tests());
    let mut alone = Vec::new();
    alone.extend(errors::tests_alone());
    alone.extend(phases::tests_alone());
    alone.extend(bulk_copies::tests_alone());
    alone.extend(teardown::tests_alone());
    alone.extend(owned::tests_alone());
    alone.extend(partitions::tests_alone());
    alone.extend(ordering::tests_alone());
    alone.extend(ordering_attacks::tests_alone());
    alone.extend(ordering_spans_attacks::tests_alone());
    alone.extend(ordering_rings::tests_alone());
    alone.extend(review_47::tests_alone());
    common::harness::run_with_alone(tests, alone)
}
