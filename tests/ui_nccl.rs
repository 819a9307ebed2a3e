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
//! failure of the crate). `CUDA_BRAND_UI_ANY_RUSTC=1` runs it anyway.
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

use std::process::{Command, ExitCode};

use libtest_mimic::{Arguments, Trial};

const RECORDED: &str = "ui-tests/rustc-version.txt";

fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(&rustc)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("running `{rustc} --version`: {e}"));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let root = env!("CARGO_MANIFEST_DIR");
    let recorded_path = format!("{root}/{RECORDED}");
    let recorded = std::fs::read_to_string(&recorded_path).unwrap_or_default();
    let recorded = recorded.trim().to_owned();
    let current = rustc_version();
    let bless = std::env::var("TRYBUILD").is_ok_and(|v| v == "overwrite");
    let any = std::env::var("CUDA_BRAND_UI_ANY_RUSTC").is_ok_and(|v| v == "1");
    let ignored = !bless && !any && current != recorded;
    if ignored && !args.list {
        println!(
            "note: the UI suite is ignored here: its .stderr files were recorded with `{recorded}`, \
             this is `{current}` (CUDA_BRAND_UI_ANY_RUSTC=1 runs it anyway; \
             TRYBUILD=overwrite cargo test --features nccl --test ui_nccl re-blesses)"
        );
    }
    let trial = Trial::test("ui_nccl", move || {
        let t = trybuild::TestCases::new();
        t.compile_fail("ui-tests/nccl/fail/*.rs");
        // the safety profile refuses the communicator's raw handle (see tests/ui.rs)
        t.compile_fail("ui-tests/safety-profile/nccl/*.rs");
        t.pass("ui-tests/nccl/pass/*.rs");
        drop(t); // runs the cases, panicking on a mismatch
        if bless {
            std::fs::write(&recorded_path, format!("{current}\n"))
                .map_err(|e| format!("writing {recorded_path}: {e}"))?;
        }
        Ok(())
    })
    .with_ignored_flag(ignored);
    libtest_mimic::run(&args, vec![trial]).exit_code()
}
