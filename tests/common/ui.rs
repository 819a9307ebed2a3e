//! What the compile-fail runners share (`tests/ui.rs`, `tests/ui_nccl.rs`, `tests/ui_libs.rs`,
//! which include this file as their module `runner`): the compiler check and re-blessing around trybuild.
//!
//! The `.stderr` files are the words of one compiler: the one named in
//! `ui-tests/rustc-version.txt`. With another `rustc` a runner's test is reported as
//! *ignored*, with both versions named (a newer compiler may word an error differently; that
//! is no failure of the crate). `CUDA_BRAND_UI_ANY_RUSTC=1` runs it anyway.
//! `TRYBUILD=overwrite` rewrites every `.stderr` of its cases, and then the recorded version.

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

/// `fn main` of a compile-fail runner: one test, `name`, whose `cases` add the cases to
/// trybuild's list, which runs them when `cases` returns (panicking on a mismatch). Ignored,
/// saying why, under another compiler than the recorded one; `rebless` is the command that
/// re-blesses, for that note.
pub fn run(
    name: &'static str,
    rebless: &'static str,
    cases: impl FnOnce(&trybuild::TestCases) -> Result<(), String> + Send + 'static,
) -> ExitCode {
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
             {rebless} re-blesses)"
        );
    }
    let trial = Trial::test(name, move || {
        let t = trybuild::TestCases::new();
        cases(&t)?;
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
