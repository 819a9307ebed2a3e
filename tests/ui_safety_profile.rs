//! The compile-fail cases of the `safety-profile` feature: each calls an escape hatch that
//! the profile removes, and must fail to compile with the error committed next to it.
//!
//! ```text
//! cargo test --features safety-profile --test ui_safety_profile
//! ```
//!
//! Without the feature this test does nothing but say so (it is reported as ignored):
//! trybuild compiles the cases with the crate's features as this test was built, and
//! without the profile every case compiles. The cases are in `ui-tests/safety-profile/`;
//! the comment at the top of each names what the profile removes and what to use instead.
//! As in `tests/ui.rs`, the `.stderr` files are the words of the compiler named in
//! `ui-tests/rustc-version.txt`: with another `rustc` the test is ignored
//! (`CUDA_BRAND_UI_ANY_RUSTC=1` runs it anyway). Re-bless with
//!
//! ```text
//! TRYBUILD=overwrite cargo test --features safety-profile --test ui_safety_profile
//! ```
//!
//! and read every changed `.stderr` before committing it.

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
    let recorded = std::fs::read_to_string(format!("{root}/{RECORDED}")).unwrap_or_default();
    let recorded = recorded.trim().to_owned();
    let current = rustc_version();
    let bless = std::env::var("TRYBUILD").is_ok_and(|v| v == "overwrite");
    let any = std::env::var("CUDA_BRAND_UI_ANY_RUSTC").is_ok_and(|v| v == "1");
    let profile = cfg!(feature = "safety-profile");
    let other_rustc = !bless && !any && current != recorded;
    if !args.list {
        if !profile {
            println!(
                "note: the safety-profile UI suite is ignored without the feature: \
                 cargo test --features safety-profile --test ui_safety_profile"
            );
        } else if other_rustc {
            println!(
                "note: the safety-profile UI suite is ignored here: its .stderr files were \
                 recorded with `{recorded}`, this is `{current}` (CUDA_BRAND_UI_ANY_RUSTC=1 \
                 runs it anyway)"
            );
        }
    }
    let trial = Trial::test("ui_safety_profile", || {
        let t = trybuild::TestCases::new();
        t.compile_fail("ui-tests/safety-profile/*.rs");
        t.pass("ui-tests/safety-profile/pass/*.rs");
        drop(t); // runs the cases, panicking on a mismatch
        Ok(())
    })
    .with_ignored_flag(!profile || other_rustc);
    libtest_mimic::run(&args, vec![trial]).exit_code()
}
