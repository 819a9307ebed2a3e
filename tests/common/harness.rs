//! The harness of the GPU test binaries (`harness = false` in `Cargo.toml`), on
//! `libtest-mimic`: it decides at run time which tests can run here, so a test that cannot
//! shows as **ignored**, with the reason, in `cargo test`'s normal output and counts,
//! instead of passing without having run.
//!
//! Most GPU test files are modules of one binary, `gpu` (`tests/gpu.rs`, linked once): each
//! lists its tests with `gpu_tests!` (or by hand as `tests_alone()`, for tests that must run
//! with no other test beside them), and `tests/gpu.rs` runs them all with
//! [`run_with_alone`]. A test that needs a process of its own is in a binary of its own,
//! whose `fn main` is `gpu_test_main!`.
//!
//! * A test that needs a GPU is ignored where `Device::get(0)` fails (no driver library, no
//!   device), with the reason printed once at the top; with `CUDA_BRAND_REQUIRE_GPU=1` it
//!   runs anyway, and fails.
//! * A test that needs two GPUs is ignored where there are fewer; with
//!   `CUDA_BRAND_REQUIRE_GPUS=2` it runs anyway, and fails.
//! * A test that finds, once running, that it cannot run here (a driver too old for what it
//!   checks, a library or a device feature missing, compute-sanitizer in the way of the
//!   driver error it provokes on purpose) calls [`skip`] with the reason: it is reported
//!   `ignored (reason)`, never `ok`. `tests/compliance.rs` keeps the test files from
//!   printing a skip and returning instead.
//! * `--include-ignored` and `--ignored` (which the GPU bundle passes to every test
//!   binary) are accepted but do not run a test that cannot run here: no test of this
//!   suite is ignored by choice, only by what the machine lacks.

use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::{PoisonError, RwLock};

use cuda_brand::Device;
use libtest_mimic::{Arguments, Completion, Trial};

/// What a test needs from the machine.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: runs everywhere.
    Nothing,
    /// One GPU.
    Gpu,
    /// Two GPUs.
    TwoGpus,
    /// No GPU: a no-device path (no driver library, or a driver without a device).
    NoGpu,
}

/// One test: a name, what it needs, and a body that panics on failure and calls [`skip`]
/// where it finds it cannot run here.
pub struct Test {
    pub name: &'static str,
    pub needs: Needs,
    pub body: fn(),
}

/// Why a running test did not run to its end here: the payload [`skip`] unwinds with, which
/// the harness reports as `ignored (reason)`.
pub struct Skip(pub String);

/// Ends the running test as skipped, reported `ignored (reason)`: for a test that finds it
/// cannot run here (see the module's doc). It unwinds with a [`Skip`] payload through
/// `std::panic::resume_unwind`, which calls no panic hook, so nothing is printed as a
/// panic; the crate's closures (contexts, scopes, owned entries) tear down and pass the
/// payload on unchanged, as they do a panic's.
///
/// Call it on the test's own thread, best at the top, before any context or thread: on a
/// spawned thread the payload reaches `join` as a panic's, where `join().unwrap()` (or the
/// end of a `std::thread::scope`) turns it into a failure.
pub fn skip(reason: impl Into<String>) -> ! {
    panic::resume_unwind(Box::new(Skip(reason.into())))
}

/// Runs a test's body: `Ignored` with the reason of a [`skip`], `Completed` when it
/// returns; any other panic goes on, and libtest-mimic reports it as the test's failure.
fn run_body(body: fn()) -> Completion {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(()) => Completion::Completed,
        Err(payload) => match payload.downcast::<Skip>() {
            Ok(skip) => Completion::ignored_with(skip.0),
            Err(payload) => panic::resume_unwind(payload),
        },
    }
}

fn env_is(name: &str, value: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == value)
}

/// How many GPUs the driver reports here, or why there are none.
fn gpus() -> Result<usize, String> {
    Device::get(0).map_err(|e| e.to_string())?;
    Device::count().map_err(|e| e.to_string())
}

/// Runs `tests` like `cargo test` does, ignoring (with the reason) those this machine
/// cannot run.
pub fn run(tests: Vec<Test>) -> ExitCode {
    run_with(tests, Vec::new(), Arguments::from_args())
}

/// As [`run`], one test at a time: for binaries whose tests observe process-wide state
/// (free device memory, the primary context's retain count).
pub fn run_serial(tests: Vec<Test>) -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    run_with(tests, Vec::new(), args)
}

/// As [`run`], and then `alone`: each of those starts once every test before it has
/// finished, and no other test starts until it has (they observe process-wide state: free
/// device memory, the primary context's retain count, the crate's pools and staging). The
/// others run as many at a time as `run` runs them.
pub fn run_with_alone(tests: Vec<Test>, alone: Vec<Test>) -> ExitCode {
    run_with(tests, alone, Arguments::from_args())
}

/// Taken shared by every test while it runs, and exclusively by each test that runs alone.
static TURN: RwLock<()> = RwLock::new(());

fn run_with(tests: Vec<Test>, alone: Vec<Test>, mut args: Arguments) -> ExitCode {
    let mut names: Vec<&str> = tests.iter().chain(&alone).map(|t| t.name).collect();
    names.sort_unstable();
    if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
        // `--exact NAME` (scripts/sanitize, the tests that re-run themselves in a child)
        // must name one test
        panic!("two tests are named {}: rename one", twice[0]);
    }
    let tests: Vec<(Test, bool)> = tests
        .into_iter()
        .map(|t| (t, false))
        .chain(alone.into_iter().map(|t| (t, true)))
        .collect();
    args.include_ignored = false;
    args.ignored = false;
    let found = gpus();
    let require_one = env_is("CUDA_BRAND_REQUIRE_GPU", "1");
    let require_two = env_is("CUDA_BRAND_REQUIRE_GPUS", "2");
    let n = *found.as_ref().unwrap_or(&0);
    let missing = |needs: Needs| match needs {
        Needs::Nothing => None,
        Needs::Gpu if n >= 1 || require_one => None,
        Needs::Gpu => Some(match &found {
            Err(why) => format!("no usable GPU ({why})"),
            Ok(_) => "no GPU".to_owned(),
        }),
        Needs::TwoGpus if n >= 2 || require_two => None,
        Needs::TwoGpus => Some(format!("needs two GPUs, this machine has {n}")),
        Needs::NoGpu if n == 0 => None,
        Needs::NoGpu => Some("a GPU is present, so the no-device paths cannot be taken".to_owned()),
    };
    let mut reasons: Vec<(Needs, String, usize)> = Vec::new();
    for (t, _) in &tests {
        if let Some(why) = missing(t.needs) {
            match reasons.iter_mut().find(|(needs, _, _)| *needs == t.needs) {
                Some((_, _, count)) => *count += 1,
                None => reasons.push((t.needs, why, 1)),
            }
        }
    }
    if !args.list {
        for (_, why, count) in &reasons {
            println!("note: {count} test(s) ignored here: {why}");
        }
    }
    let trials = tests
        .into_iter()
        .map(|(t, alone)| {
            let kind = match t.needs {
                Needs::Nothing => "",
                Needs::Gpu => "gpu",
                Needs::TwoGpus => "2 gpus",
                Needs::NoGpu => "no gpu",
            };
            let ignored = missing(t.needs).is_some();
            let body = t.body;
            Trial::ignorable_test(t.name, move || {
                // a panicking test poisons the lock; the next one takes its turn all the same
                let _turn = if alone {
                    (
                        None,
                        Some(TURN.write().unwrap_or_else(PoisonError::into_inner)),
                    )
                } else {
                    (
                        Some(TURN.read().unwrap_or_else(PoisonError::into_inner)),
                        None,
                    )
                };
                Ok(run_body(body))
            })
            .with_kind(kind)
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// `pub fn tests() -> Vec<Test>`, a module's tests for `tests/gpu.rs`: every named function
/// is a test needing one GPU. `two_gpus: [...]` names those that need two, `anywhere: [...]`
/// those that need none, `no_gpu: [...]` those that only run where there is none. A name may
/// carry attributes, e.g. `#[cfg(feature = "derive")]` for a test that needs a feature.
#[macro_export]
macro_rules! gpu_tests {
    ($($(#[$a:meta])* $name:ident),* $(,)?
     $(; two_gpus: [$($(#[$ta:meta])* $two:ident),* $(,)?])?
     $(; anywhere: [$($(#[$aa:meta])* $any:ident),* $(,)?])?
     $(; no_gpu: [$($(#[$na:meta])* $none:ident),* $(,)?])?) => {
        /// This file's tests, which may run beside any other test of their binary.
        #[allow(clippy::vec_init_then_push)]
        pub fn tests() -> Vec<$crate::common::harness::Test> {
            #[allow(unused_imports)]
            use $crate::common::harness::{Needs, Test};
            // pushed one by one, so that a name's attributes (a `cfg`) apply to its test
            #[allow(unused_mut)]
            let mut tests = Vec::new();
            $($(#[$a])* tests.push(Test { name: stringify!($name), needs: Needs::Gpu, body: $name });)*
            $($($(#[$ta])* tests.push(Test { name: stringify!($two), needs: Needs::TwoGpus, body: $two });)*)?
            $($($(#[$aa])* tests.push(Test { name: stringify!($any), needs: Needs::Nothing, body: $any });)*)?
            $($($(#[$na])* tests.push(Test { name: stringify!($none), needs: Needs::NoGpu, body: $none });)*)?
            tests
        }
    };
}

/// `fn main` of a GPU test binary of its own (a test that needs a process of its own): the
/// tests named as for `gpu_tests!`, run by [`run`].
#[macro_export]
macro_rules! gpu_test_main {
    ($($list:tt)*) => {
        $crate::gpu_tests!($($list)*);

        fn main() -> std::process::ExitCode {
            $crate::common::harness::run(tests())
        }
    };
}
