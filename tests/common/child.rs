//! Tests whose failure mode is a hang (a deadlock): each runs its scenario in a child
//! process (this test binary again, with `--exact` and its own name), and the parent waits
//! with a deadline, kills the child when it is not done by then, and fails naming the
//! deadlock, so that a hang is a failure and never a hung test binary.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Set in the child process that [`run_within`] starts.
const CHILD: &str = "CUDA_BRAND_TEST_DEADLOCK_CHILD";

/// Why the child's scenario could not arise on this machine ([`not_arisen`]).
static NOT_ARISEN: Mutex<Option<String>> = Mutex::new(None);

/// In the child: records that the scenario could not arise here, and why (the first
/// reason is kept); [`end_child`] then reports the test ignored with it, and so does the
/// parent.
pub fn not_arisen(why: impl Into<String>) {
    NOT_ARISEN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(|| why.into());
}

/// In the child, at the end of the test: a skip with the reason [`not_arisen`] recorded,
/// if any (the scenario did not arise, so the test proved nothing: it is ignored, not
/// passed).
pub fn end_child() {
    let why = NOT_ARISEN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(why) = why {
        super::skip(why);
    }
}

/// Whether this process is a child of [`run_within`]: then the test runs its scenario.
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs test `name` of this binary alone in a child process and waits up to `limit`. Panics
/// naming `deadlock` (what hangs) when the child is still running then (it is killed
/// first), and with the child's output when it failed. Prints the child's output otherwise;
/// a child whose scenario could not arise on this machine ([`not_arisen`]) reported its
/// test ignored, and so is the parent's ([`super::skip`], with the child's reason).
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
    // a child whose scenario did not arise reports its test ignored, with the reason
    let ignored = stdout
        .lines()
        .find_map(|line| line.split_once(" ... ignored (").map(|(_, why)| why))
        .map(|why| why.trim_end().trim_end_matches(')').to_owned());
    assert!(
        status.success() && (stdout.contains("1 passed") || ignored.is_some()),
        "the child running `{name}` failed ({status:?}):\n{output}"
    );
    println!("{output}");
    if let Some(why) = ignored {
        super::skip(format!("{why} (in the child process)"));
    }
}

/// Where the child's output goes: a file per test name and process in the temporary
/// directory.
fn output_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cuda-brand-{name}-{}", std::process::id()))
}
