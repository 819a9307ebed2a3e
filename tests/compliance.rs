//! `docs/compliance.md` names, for every rule it maps, the compile-fail cases and the tests
//! that pin it. These tests check that every one of them exists (a UI case as its file, a
//! test as `tests/FILE.rs::FUNCTION` with `fn FUNCTION` in the file), that every rule of
//! NVIDIA's guideline has its row, and that the page's counts are its rows' counts; and
//! that every file of `tests/` is built, so that a test the page names also runs; and that
//! no test file reports a skip as a pass (`common::skip` reports it ignored, with the
//! reason). No GPU, no driver: they read files.

use std::collections::BTreeMap;
use std::path::Path;

/// Names the page gives that live on a branch not merged yet (UI cases and tests of the
/// `errors`, `graphs`, `derive`, `modules` and `bulk` branches). Remove each once merged:
/// the test fails when a name listed here exists, and when one is no longer on the page.
const PENDING: &[&str] = &[];

/// Every rule of NVIDIA's CUDA C++ Guidelines for Robust and Safety Critical Programming
/// 3.0.1, by the ids of the analyzers that check them (the page's "Sources" say where
/// each was read).
const NVIDIA_RULES: &[&str] = &[
    "CUDA-1.1",
    "CUDA-1.2",
    "CUDA-1.3",
    "CUDA-1.4",
    "CUDA-1.5",
    "CUDA-1.6",
    "CUDA-1.7",
    "CUDA-1.8",
    "CUDA-1.9",
    "CUDA-1.10",
    "CUDA-1.11",
    "CUDA-1.12",
    "CUDA-1.13",
    "CUDA-1.14",
    "CUDA-2.1",
    "CUDA-2.2",
    "CUDA-2.3",
    "CUDA-2.4",
    "CUDA-3.1",
    "CUDA-3.2",
    "CUDA-3.3",
    "CUDA-3.4",
    "CUDA-3.5",
    "CUDA-4.1",
    "CUDA-4.2",
    "CUDA-4.3",
    "CUDA-4.4",
    "CUDASafety-1.1",
    "CUDASafety-1.2",
    "CUDASafety-1.3",
    "CUDASafety-1.4",
    "CUDASafety-1.5",
    "CUDASafety-1.6",
    "CUDASafety-2.1",
    "CUDASafety-3.1",
    "CUDASafety-3.2",
    "CUDADirective-1.1",
    "CUDADirective-1.2",
    "CUDADirective-1.3",
    "CUDADirective-1.4",
    "CUDADirective-1.5",
];

const STATUSES: &[&str] = &[
    "compile error",
    "checked at run time",
    "not applicable (device code)",
    "not enforced",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn page() -> String {
    let path = root().join("docs/compliance.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `ui-tests/...rs` path and every `tests/FILE.rs::FUNCTION` the page names, in
/// order of first appearance, without repeats.
fn references(page: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || "_-./:".contains(c);
    for token in page.split(|c: char| !is_name_char(c)) {
        let token = token.trim_end_matches(['.', ':']);
        let named = (token.starts_with("ui-tests/") && token.ends_with(".rs"))
            || (token.starts_with("tests/") && token.contains(".rs::"));
        if named && !found.iter().any(|f| f == token) {
            found.push(token.to_string());
        }
    }
    found
}

/// Whether a reference names something that exists in this checkout.
fn exists(reference: &str) -> bool {
    match reference.split_once("::") {
        Some((file, function)) => std::fs::read_to_string(root().join(file))
            .is_ok_and(|text| text.contains(&format!("fn {function}("))),
        None => root().join(reference).is_file(),
    }
}

/// `Cargo.toml` lists its test targets (`autotests = false`), and most files of `tests/` are
/// modules of one of them, `gpu`: a file that is neither would be compiled and run by
/// nothing, and a test the page names in it would exist without ever running.
#[test]
fn every_test_file_is_a_test_target_or_a_module_of_the_gpu_binary() {
    let read = |file: &str| {
        let path = root().join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let manifest = read("Cargo.toml");
    assert!(
        manifest.lines().any(|l| l.trim() == "autotests = false"),
        "Cargo.toml lists its test targets"
    );
    let targets: Vec<&str> = manifest
        .split("\n[[test]]\n")
        .skip(1)
        .map(|section| {
            let first = section.lines().next().unwrap_or_default();
            first
                .strip_prefix("name = \"")
                .and_then(|n| n.strip_suffix('"'))
                .unwrap_or_else(|| panic!("a [[test]] whose first line is not its name: {first}"))
        })
        .collect();
    let gpu = read("tests/gpu.rs");
    let modules: Vec<&str> = gpu
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .filter(|&m| m != "common")
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(root().join("tests"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_suffix(".rs").map(str::to_owned))
        .collect();
    files.sort();
    let mut report = String::new();
    for file in &files {
        match (
            targets.contains(&file.as_str()),
            modules.contains(&file.as_str()),
        ) {
            (true, false) | (false, true) => {}
            (false, false) => {
                report += &format!(
                    "tests/{file}.rs is built by nothing: add `mod {file};` (and its tests) to \
                     tests/gpu.rs, or a [[test]] to Cargo.toml if it needs a process of its own\n"
                )
            }
            (true, true) => {
                report +=
                    &format!("tests/{file}.rs is both a [[test]] and a module of tests/gpu.rs\n")
            }
        }
    }
    for name in targets.iter().chain(&modules) {
        if !files.iter().any(|f| f == name) {
            report += &format!("no tests/{name}.rs, which Cargo.toml or tests/gpu.rs names\n");
        }
    }
    assert!(modules.len() > 10, "found only {modules:?} in tests/gpu.rs");
    assert!(report.is_empty(), "{report}");
}

#[test]
fn every_case_and_test_the_page_names_exists_or_is_pending() {
    let page = page();
    let named = references(&page);
    assert!(
        named.len() > 40,
        "found only {} references: is the parser broken?",
        named.len()
    );
    let mut missing = Vec::new();
    let mut merged = Vec::new();
    for reference in &named {
        match (exists(reference), PENDING.contains(&reference.as_str())) {
            (true, false) | (false, true) => {}
            (false, false) => missing.push(reference.as_str()),
            (true, true) => merged.push(reference.as_str()),
        }
    }
    let stale: Vec<&str> = PENDING
        .iter()
        .copied()
        .filter(|p| !named.iter().any(|n| n == p))
        .collect();
    let mut report = String::new();
    if !missing.is_empty() {
        report += &format!(
            "docs/compliance.md names cases or tests that do not exist:\n  {}\n",
            missing.join("\n  ")
        );
    }
    if !merged.is_empty() {
        report += &format!(
            "these exist now: remove them from PENDING in tests/compliance.rs (and the page's \"after merge\" notes):\n  {}\n",
            merged.join("\n  ")
        );
    }
    if !stale.is_empty() {
        report += &format!(
            "PENDING lists names the page no longer gives:\n  {}\n",
            stale.join("\n  ")
        );
    }
    assert!(report.is_empty(), "{report}");
}

/// The cells of the page's table rows whose first cell starts with one of `starts`.
fn rows<'a>(page: &'a str, starts: &[&str]) -> Vec<Vec<&'a str>> {
    page.lines()
        .filter_map(|line| line.strip_prefix("| "))
        .filter(|rest| starts.iter().any(|s| rest.starts_with(s)))
        .map(|rest| rest.split(" | ").map(str::trim).collect())
        .collect()
}

#[test]
fn every_rule_of_the_guideline_has_one_row_with_a_known_status() {
    let page = page();
    let nvidia = rows(&page, &["[CUDA"]);
    let mut ids = Vec::new();
    for row in &nvidia {
        let id = row[0]
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .map(|(id, _)| id)
            .unwrap_or_else(|| panic!("a row without a linked id: {row:?}"));
        assert!(
            row[0].contains(&format!("/{id}.html)")),
            "{id} links to another rule's page: {}",
            row[0]
        );
        assert!(
            STATUSES.contains(&row[3]),
            "{id}: unknown status {:?}",
            row[3]
        );
        assert!(
            row[2] == "Device" || row[2] == "Host" || row[2] == "Host, Device",
            "{id}: scope {:?}",
            row[2]
        );
        if row[2] == "Device" {
            assert_eq!(row[3], STATUSES[2], "{id} is device code only");
        }
        ids.push(id);
    }
    let mut expected = NVIDIA_RULES.to_vec();
    expected.sort_unstable();
    ids.sort_unstable();
    assert_eq!(ids, expected, "one row per rule of the guideline, no other");
}

#[test]
fn the_counts_are_the_rows_counts() {
    let page = page();
    let mut nvidia: BTreeMap<&str, usize> = BTreeMap::new();
    for row in rows(&page, &["[CUDA"]) {
        *nvidia.entry(row[3]).or_default() += 1;
    }
    let mut others: BTreeMap<&str, usize> = BTreeMap::new();
    for row in rows(&page, &["AUTOSAR", "MISRA"]) {
        assert!(
            STATUSES.contains(&row[2]),
            "{}: unknown status {:?}",
            row[0],
            row[2]
        );
        *others.entry(row[2]).or_default() += 1;
    }
    let table = rows(
        &page,
        &STATUSES
            .iter()
            .copied()
            .chain(["total"])
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        table.len(),
        5,
        "the counts table: one row per status and a total"
    );
    for row in table {
        let numbers: Vec<usize> = row[1..4]
            .iter()
            .map(|n| n.trim_end_matches(" |").parse().expect("a count"))
            .collect();
        let (a, b) = if row[0] == "total" {
            (nvidia.values().sum(), others.values().sum())
        } else {
            (
                nvidia.get(row[0]).copied().unwrap_or(0),
                others.get(row[0]).copied().unwrap_or(0),
            )
        };
        assert_eq!(numbers, [a, b, a + b], "counts of {:?}", row[0]);
    }
}

// ---- skips that say they are skips ------------------------------------------------------

/// What the test files may not do: pass a test that did not run. A test that cannot run
/// here calls `common::skip(reason)` (`tests/common/harness.rs`), which the harness reports
/// as `ignored (reason)`; these are the old ways of reporting `ok` instead, each with what
/// to do. Lines are 1-based; comments are not read.
fn skips_reported_as_passes(source: &str) -> Vec<(usize, &'static str)> {
    const PRINTS: [&str; 4] = ["eprintln!(", "println!(", "eprint!(", "print!("];
    const BARE: [&str; 4] = ["return;", "return", "return Ok(());", "return Ok(())"];
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let at = |i: usize| lines.get(i).copied().unwrap_or_default();
    let mut found = Vec::new();
    for (i, &line) in lines.iter().enumerate() {
        if line.starts_with("//") {
            continue;
        }
        // a print of a skip (the text on the macro's line or the next), and a return
        if let Some(rest) = PRINTS.iter().find_map(|p| Some(line.split_once(p)?.1)) {
            let args = if rest.is_empty() { at(i + 1) } else { rest };
            let text = args
                .strip_prefix('"')
                .unwrap_or_default()
                .to_ascii_lowercase();
            let end = (i..i + 6).find(|&j| at(j).ends_with(");")).unwrap_or(i);
            let next = at(end + 1);
            let returns = next.starts_with("return") || next == "None" || next == "false";
            if text.starts_with("skipped") || text.starts_with("skipping") {
                found.push((i + 1, "prints a skip: call common::skip(reason) instead"));
            } else if returns
                && (text.contains("skipped")
                    || text.contains("skipping")
                    || text.starts_with("inconclusive"))
            {
                found.push((
                    i + 1,
                    "prints a skip and returns: call common::skip(reason) instead",
                ));
            }
        }
        // a probe for the caller to return on
        if let Some((_, signature)) = line.split_once("fn ") {
            let name = signature.split('(').next().unwrap_or_default();
            if name.contains("skip") && (line.contains("-> bool") || line.contains("-> Option<")) {
                found.push((
                    i + 1,
                    "a skip probe that returns a value for the caller to return on: make it \
                     call common::skip(reason)",
                ));
            }
        }
        // a bare return out of a `let .. else` or a `None` arm
        let let_else = BARE.iter().any(|r| {
            line.ends_with(&format!("else {{ {r} }};"))
                || line.ends_with(&format!("else {{ {r} }}"))
        }) || (line.ends_with("else {")
            && BARE.contains(&at(i + 1))
            && at(i + 2).starts_with('}'));
        let none_arm = ["=> return,", "=> return Ok(()),", "=> return }"]
            .iter()
            .any(|r| line.ends_with(r));
        if let_else || none_arm {
            found.push((
                i + 1,
                "returns, passing, where a value is missing: call common::skip(reason) \
                 (or make the probe skip)",
            ));
        }
        // `if PROBE { return; }` on a probe: a skip helper, `is_none()`, a negated call
        if let Some(condition) = line.strip_prefix("if ").and_then(|l| l.strip_suffix(" {")) {
            let probe = condition.contains("skip")
                || condition.contains(".is_none()")
                || (condition.starts_with('!') && condition.contains('('));
            if probe && BARE.contains(&at(i + 1)) && at(i + 2) == "}" {
                found.push((
                    i + 1,
                    "returns, passing, on a probe: call common::skip(reason) instead",
                ));
            }
            // under compute-sanitizer: a return anywhere in the block (after its prints)
            let mut block = (i + 1..).take_while(|&j| j < lines.len() && at(j) != "}");
            if condition.contains("under_sanitizer()")
                && !condition.starts_with('!')
                && block.any(|j| BARE.contains(&at(j)))
            {
                found.push((
                    i + 1,
                    "returns, passing, under compute-sanitizer: call common::skip(reason) \
                     instead",
                ));
            }
        }
    }
    found
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A GPU test that cannot run here (a driver entry point, a library, a second GPU, green
/// contexts, compute-sanitizer in the way of the driver error it provokes, a driver too
/// old) is reported `ignored` with the reason, never `ok`: no file of `tests/` (but this
/// one, whose strings below show the old forms) prints a skip and returns.
#[test]
fn no_test_prints_a_skip_and_passes() {
    let mut files = Vec::new();
    rust_files(&root().join("tests"), &mut files);
    files.sort();
    assert!(files.len() > 30, "found only {files:?}");
    let mut report = String::new();
    for path in files {
        let relative = path.strip_prefix(root()).unwrap();
        if relative == Path::new("tests/compliance.rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        for (line, what) in skips_reported_as_passes(&source) {
            report += &format!("{}:{line}: {what}\n", relative.display());
        }
    }
    assert!(report.is_empty(), "skips reported as passes:\n{report}");
}

/// The scanner finds each old form (as the test files had them before `common::skip`) at
/// its line, and none of the forms that stay: a child process's branch, a helper's normal
/// return, a print of a partial check, `common::skip` itself.
#[test]
fn the_skip_scanner_finds_the_old_forms_and_passes_the_new() {
    let old = r#"
fn a() {
    if common::under_sanitizer_skip("an illegal address") {
        return;
    }
    let Some(device) = common::gpu() else { return };
    let Some(device) = partitionable() else {
        return;
    };
    if !without_nccl_comm_id() {
        return;
    }
    if driver() < 12000 {
        eprintln!("skipped: launch priorities need a CUDA 12.0 driver");
        return;
    }
    common::in_context(|ctx| {
        let Some(module) = launch_ex_module(ctx) else {
            return Ok(());
        };
        if !has_clusters(ctx, &module) {
            return Ok(());
        }
        Ok(())
    });
    if mine != freed_at {
        eprintln!(
            "inconclusive: the default pool gave another block ({mine:#x})"
        );
        return;
    }
    match outcome {
        Err(e) if e.code() == ErrorCode::DriverTooOld => eprintln!("skipped: {e}"),
        other => other.unwrap(),
    }
}
pub fn under_sanitizer_skip(what: &str) -> bool {
    false
}
pub fn nvrtc_or_skip() -> Option<(i32, i32)> {
    None
}
macro_rules! gpu_or_skip {
    () => {
        match common::gpu() {
            Some(device) => device,
            None => return,
        }
    };
}
"#;
    let lines: Vec<usize> = skips_reported_as_passes(old)
        .into_iter()
        .map(|(line, _)| line)
        .collect();
    assert_eq!(lines, [3, 6, 7, 10, 14, 18, 21, 27, 33, 37, 40, 47]);
    let new = r#"
fn b() {
    if std::env::var_os(CHILD).is_some() {
        let e = nccl::version().unwrap_err();
        println!("child saw: {e}");
        return;
    }
    common::skip_under_sanitizer("an illegal address");
    let device = common::gpu();
    if cc.major >= 9 && driver() >= 11080 {
        return;
    }
    if driver() < 12000 {
        common::skip(format!("needs a CUDA 12.0 driver, this one is {}", driver()));
    }
    if rc == 801 {
        println!(
            "no memory pools here (CUDA_ERROR_NOT_SUPPORTED): stream-ordered memory skipped"
        );
    } else {
        assert_eq!(rc, 0, "cuMemAllocAsync");
    }
    // eprintln!("skipped: a comment is not read");
    match exec.update(new) {
        Ok(exec) => exec,
        Err(e) => return Err(e),
    };
}
pub fn skip_under_sanitizer(what: &str) {}
"#;
    assert_eq!(skips_reported_as_passes(new), []);
    let sanitized = "
if common::under_sanitizer() {
    // compute-sanitizer runs one kernel at a time
    eprintln!(\"under compute-sanitizer: not asserted\");
    return Ok(());
}
let ms = if common::under_sanitizer() { 1000 } else { 100 };
if !common::under_sanitizer() {
    return;
}
";
    let lines: Vec<usize> = skips_reported_as_passes(sanitized)
        .into_iter()
        .map(|(line, _)| line)
        .collect();
    assert_eq!(lines, [2, 8]);
}
