//! The compile-fail suite of the `nccl` feature (`cargo test --features nccl --test
//! ui_nccl`): the rules of `cuda_brand::nccl`, pinned with the compiler's full error. It is
//! its own binary because trybuild builds the cases with the features of the test run, and
//! `tests/ui.rs` runs without `nccl`.
//!
//! `ui-tests/nccl/fail/*.rs` are complete programs that would be correct except for one
//! misuse of a communicator, a collective or a group. Each must fail to compile with
//! exactly the error committed next to it in the `.stderr` file of the same name; the
//! comment at the top of each case names the rule, says what goes wrong without it, and
//! gives the fix.
//!
//! `ui-tests/nccl/pass/*.rs` are the uses the rules must keep allowed. trybuild compiles
//! *and runs* them; they return early when there is no GPU or no NCCL library, so they
//! pass without either.
//!
//! # Which compiler
//!
//! The `.stderr` files are the words of one compiler: the one named in
//! `ui-tests/rustc-version.txt`. With another `rustc` the test is reported as *ignored*,
//! with both versions named (a newer compiler may word an error differently; that is no
//! failure of the crate). `CUDA_BRAND_UI_ANY_RUSTC=1` runs it anyway. (This check and
//! re-blessing are `tests/common/ui.rs`, shared with `tests/ui.rs`.)
//!
//! # Re-blessing
//!
//! ```text
//! TRYBUILD=overwrite cargo test --features nccl --test ui_nccl
//! ```
//!
//! rewrites every `.stderr` and `ui-tests/rustc-version.txt`. Review every changed file
//! before committing it: the error must still point at the misuse and name the rule's
//! reason (an escaping borrow, a missing `Send`, a lifetime that does not live long
//! enough), not an unrelated mistake in the case.

use std::process::ExitCode;

#[path = "common/ui.rs"]
mod runner;

fn main() -> ExitCode {
    let rebless = "TRYBUILD=overwrite cargo test --features nccl --test ui_nccl";
    runner::run("ui_nccl", rebless, |t| {
        t.compile_fail("ui-tests/nccl/fail/*.rs");
        // the safety profile refuses the communicator's raw handle (see tests/ui.rs)
        t.compile_fail("ui-tests/safety-profile/nccl/*.rs");
        t.pass("ui-tests/nccl/pass/*.rs");
        Ok(())
    })
}
