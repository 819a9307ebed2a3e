//! The compile-fail suite of the library features (`cargo test --features
//! cublas,cufft,curand --test ui_libs`): the rules of `cuda_brand::cublas`,
//! `cuda_brand::cufft` and `cuda_brand::curand`, pinned with the compiler's full error. It
//! is its own binary because trybuild builds the cases with the features of the test run,
//! and `tests/ui.rs` runs without them.
//!
//! `ui-tests/libs/fail/*.rs` are complete programs that would be correct except for one
//! misuse of a cuBLAS handle (`Blas`), a cuFFT plan (`FftPlan`) or a cuRAND generator
//! (`Rng`): one escaping its context, serving another context's stream, dropped while its
//! queued work runs, or an operation's buffers borrowed against the scope rules. Each must
//! fail to compile with exactly the error committed next to it in the `.stderr` file of the
//! same name; the comment at the top of each case names the rule, says what goes wrong
//! without it, and gives the fix.
//!
//! # Which compiler
//!
//! The `.stderr` files are the words of one compiler: the one named in
//! `ui-tests/rustc-version.txt`. With another `rustc` the test is reported as *ignored*,
//! with both versions named. `CUDA_BRAND_UI_ANY_RUSTC=1` runs it anyway. (This check and
//! re-blessing are `tests/common/ui.rs`, shared with `tests/ui.rs` and `tests/ui_nccl.rs`.)
//!
//! # Re-blessing
//!
//! ```text
//! TRYBUILD=overwrite cargo test --features cublas,cufft,curand --test ui_libs
//! ```
//!
//! rewrites every `.stderr` and `ui-tests/rustc-version.txt`. Review every changed file
//! before committing it: the error must still point at the misuse and name the rule's
//! reason (an escaping borrow, a borrow conflict, a value dropped while borrowed), not an
//! unrelated mistake in the case.

use std::process::ExitCode;

#[path = "common/ui.rs"]
mod runner;

fn main() -> ExitCode {
    let rebless = "TRYBUILD=overwrite cargo test --features cublas,cufft,curand --test ui_libs";
    runner::run("ui_libs", rebless, |t| {
        t.compile_fail("ui-tests/libs/fail/*.rs");
        Ok(())
    })
}
