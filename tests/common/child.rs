//! Tests whose failure mode is a hang (a deadlock): each runs its scenario in a child
//! process (this test binary again, with `--exact` and its own name), and the parent waits
//! with a deadline, kills the child when it is not done by then, and fails naming the
//! deadlock, so that a hang is a failure and never a hung test binary.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the child process that [`run_within`] starts.
const CHILD: &str = "CUDA_BRAND_TEST_DEADLOCK_CHILD";

/// Whether this process is a child of [`run_within`]: then the test runs its scenario.
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs test `name` of this binary alone in a child process and waits up to `limit`. Panics
/// naming `deadlock` (what hangs) when the child is still running then (it is killed
/// first), and with the child's output when it failed. Prints the child's output otherwise
/// (a scenario that could not arise on this machine says `skipped:` there).
pub fn run_within(name: &str, limit: Duration, deadlock: &str) {
    let out = output_path(name);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(Stdio::from(
            std::fs::File::create(out.with_extension("out")).unwrap(),
        ))
        .stderr(Stdio::from(
            std::fs::File::create(out.with_extension("err")).unwrap(),
        ))
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(out.with_extension("out")).unwrap_or_default();
    let stderr = std::fs::read_to_string(out.with_extension("err")).unwrap_or_default();
    let _ = std::fs::remove_file(out.with_extension("out"));
    let _ = std::fs::remove_file(out.with_extension("err"));
    let output = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    let Some(status) = status else {
        panic!(
            "deadlock: {deadlock}. The child running `{name}` was not done after {limit:?} and \
             was killed; its output (the last `step:` line is the last call that returned):\n{output}"
        );
    };
    assert!(
        status.success() && stdout.contains("1 passed"),
        "the child running `{name}` failed ({status:?}):\n{output}"
    );
    println!("{output}");
}

/// Where the child's output goes: a file per test name and process in the temporary
/// directory.
fn output_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cuda-brand-{name}-{}", std::process::id()))
}
