//! The compile-fail suite: every rule, pinned with the compiler's full error.
//!
//! `ui-tests/fail/<rule>/*.rs` are complete programs that would be correct except for one
//! misuse, grouped by the README's rules (`1_context_lifetime`, `2_one_context`,
//! `3_threads`, `4_scopes`, `5_kernels`, `6_devices`, and `8_graphs` for graphs and host
//! functions; the guide has a chapter for each), `7_derive` for `#[derive(DeviceCopy)]`
//! (run only with the `derive` feature, on by default), `9_typestate` for phases, events
//! and deadlines, `10_owned` for the owning layer's boundary (`cuda_brand::owned`), and
//! `11_partitions` for SM partitions (`cuda_brand::partition`).
//! Every folder of `ui-tests/fail/` is a group.
//! Each must fail to compile with exactly the error committed next to it in the `.stderr`
//! file of the same name; the comment at the top of each case names the rule, says what
//! goes wrong at run time without it (measured: `docs/driver-facts.md`, `docs/c/`), and
//! gives the fix.
//!
//! `ui-tests/pass/*.rs` are the uses the rules must keep allowed. trybuild compiles *and
//! runs* them; they return early when `Device::get(0)` fails, so they pass without a GPU.
//!
//! `ui-tests/safety-profile/*.rs` are the safety profile's cases (crate docs, "Safety
//! profile"): each a program with `#![deny(unsafe_code)]` that uses one escape hatch, which
//! the lint refuses; `ui-tests/safety-profile/pass/` has the programs the profile allows (a
//! module of kernel declarations that allows `unsafe_code`; with the `derive` feature,
//! `pass/derive/`, derived `DeviceCopy` types). The profile needs no feature, so these run
//! in every build. (`Communicator::as_raw`'s case, `ui-tests/safety-profile/nccl/`, runs
//! in `tests/ui_nccl.rs`.)
//!
//! # Which compiler
//!
//! The `.stderr` files are the words of one compiler: the one named in
//! `ui-tests/rustc-version.txt`. With another `rustc` the test is reported as *ignored*,
//! with both versions named (a newer compiler may word an error differently; that is no
//! failure of the crate). `CUDA_BRAND_UI_ANY_RUSTC=1` runs it anyway. (This check and
//! re-blessing are `tests/common/ui.rs`, shared with `tests/ui_nccl.rs`.)
//!
//! # Which features
//!
//! trybuild compiles the cases with the crate's features as this test was built; the cases
//! of the `derive` feature run only with it (on by default).
//!
//! # Re-blessing
//!
//! ```text
//! TRYBUILD=overwrite cargo test --test ui
//! ```
//!
//! rewrites every `.stderr` and `ui-tests/rustc-version.txt`. Review every changed file
//! before committing it: the error must still point at the misuse and name the rule's
//! reason (an escaping borrow, a missing `Send`, a lifetime that does not live long
//! enough), not an unrelated mistake in the case. `tests/guide.rs` then names the guide's
//! quotes that no longer match.

use std::process::ExitCode;

#[path = "common/ui.rs"]
mod runner;

/// The folders of `ui-tests/fail/`, in the order of their numbers; `7_derive` only with the
/// `derive` feature.
fn groups(dir: &str) -> Result<Vec<String>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {dir}: {e}"))?;
    let mut groups = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("reading {dir}: {e}"))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() && (name != "7_derive" || cfg!(feature = "derive")) {
            groups.push(name);
        }
    }
    // by rule number: `10_owned` after `9_typestate`
    groups.sort_by_key(|g| {
        let number = g.split('_').next().and_then(|n| n.parse::<usize>().ok());
        (number.unwrap_or(usize::MAX), g.clone())
    });
    Ok(groups)
}

fn main() -> ExitCode {
    runner::run("ui", "TRYBUILD=overwrite cargo test --test ui", |t| {
        let root = env!("CARGO_MANIFEST_DIR");
        for group in groups(&format!("{root}/ui-tests/fail"))? {
            t.compile_fail(format!("ui-tests/fail/{group}/*.rs"));
        }
        t.pass("ui-tests/pass/*.rs");
        t.compile_fail("ui-tests/safety-profile/*.rs");
        t.pass("ui-tests/safety-profile/pass/*.rs");
        if cfg!(feature = "derive") {
            t.pass("ui-tests/safety-profile/pass/derive/*.rs");
        }
        Ok(())
    })
}
