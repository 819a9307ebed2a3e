//! The figures of the tables of `BENCHMARKS.md` and `README.md` come from committed results
//! files, and this test (no GPU) holds them to it: every table is preceded, within a few
//! lines, by a stamp
//!
//! ```text
//! Source: bench/results/DATE-NAME/FILE.md (commit HASH, GPU, driver VERSION, YYYY-MM-DD)
//! ```
//!
//! and every figure of its cells (a decimal like `1.077`, a number with a unit like
//! `1396 ns` or `54.2 GB/s`, a cell that is a number) appears in the file the stamp names.
//! A table needs a stamp where it has decimals or measurements with units; a table of
//! counts alone (lines of code) is the code's fact, not a run's.
//! A table without a stamp may instead name, in each row, the files its figures come from
//! (`README.md`'s table of misuses names the program output of each row); a row with
//! figures and neither fails, naming the table's first row.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The file at `path` (relative to the repository root), if there is one.
fn read_repo(path: &str) -> Option<String> {
    std::fs::read_to_string(root().join(path)).ok()
}

/// Lines starting with a table row are tables; fenced code blocks are skipped.
struct Table {
    /// 0-based line of the table's first row
    start: usize,
    rows: Vec<String>,
}

fn tables(doc: &str) -> Vec<Table> {
    let mut found = Vec::new();
    let mut current: Option<Table> = None;
    let mut fenced = false;
    for (n, line) in doc.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('|') {
            current
                .get_or_insert_with(|| Table {
                    start: n,
                    rows: Vec::new(),
                })
                .rows
                .push(line.to_string());
        } else if let Some(table) = current.take() {
            found.push(table);
        }
    }
    found.extend(current);
    found
}

/// The path of the `Source:` stamp within `LOOKBACK` lines above line `start`, not past a
/// heading or another table.
fn stamp_above<'a>(lines: &[&'a str], start: usize) -> Option<&'a str> {
    const LOOKBACK: usize = 5;
    for line in lines[start.saturating_sub(LOOKBACK)..start].iter().rev() {
        if line.starts_with('|') || line.starts_with('#') {
            return None;
        }
        if let Some(rest) = line.strip_prefix("Source: ") {
            return rest.split_whitespace().next().map(|p| p.trim_matches('`'));
        }
    }
    None
}

/// A stamp line in its one form: the file, then commit, GPU, driver and date.
fn stamp_is_well_formed(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("Source: ") else {
        return false;
    };
    let Some((path, details)) = rest.split_once(" (commit ") else {
        return false;
    };
    let hash: String = details
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    let date = details
        .trim_end()
        .strip_suffix(')')
        .and_then(|d| d.rsplit(", ").next());
    path.starts_with("bench/results/")
        && !path.contains(' ')
        && hash.len() >= 7
        && hash.chars().all(|c| c.is_ascii_hexdigit())
        && details.contains(", driver ")
        && date.is_some_and(|d| {
            d.len() == 10
                && d.char_indices().all(|(i, c)| {
                    if i == 4 || i == 7 {
                        c == '-'
                    } else {
                        c.is_ascii_digit()
                    }
                })
        })
}

const UNITS: [&str; 10] = [
    "ns",
    "µs",
    "us",
    "ms",
    "GB/s",
    "TFLOP/s",
    "Gsamples/s",
    "×",
    "%",
    "GiB/s",
];

/// The figures of one cell: decimals, numbers followed by a unit of time or rate (the unit
/// kept: `54.2 GB/s`), and, where `whole` (a stamped table: rounds per second), the whole
/// cell where it is one number. Numbers inside names (`f32`, `sm_90`, `2^24`,
/// `cuMemcpy2D`) and sizes or counts (`1 KiB`, `100 per sync`) are not figures; neither is
/// a bare count in a table of the code's facts (lines of code, threads), which no run
/// measured.
fn figures(cell: &str, whole: bool) -> Vec<String> {
    let bare = cell.trim().trim_matches('*').trim();
    let chars: Vec<char> = cell.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let glued =
            i > 0 && (chars[i - 1].is_alphanumeric() || matches!(chars[i - 1], '_' | '^' | '.'));
        if !c.is_ascii_digit() || glued {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len()
            && (chars[j].is_ascii_digit()
                || (chars[j] == '.' && chars.get(j + 1).is_some_and(char::is_ascii_digit)))
        {
            j += 1;
        }
        let number: String = chars[i..j].iter().collect();
        let rest: String = chars[j..].iter().collect();
        let after_space = rest.strip_prefix(' ').unwrap_or(&rest);
        let unit = UNITS
            .iter()
            .filter(|u| after_space.starts_with(*u))
            .max_by_key(|u| u.len())
            .filter(|u| {
                after_space[u.len()..]
                    .chars()
                    .next()
                    .is_none_or(|n| !n.is_alphanumeric())
            });
        let glued_after = chars.get(j).is_some_and(|n| n.is_alphabetic()) && unit.is_none();
        if let Some(unit) = unit {
            let spaced = rest.starts_with(' ');
            out.push(format!("{number}{}{unit}", if spaced { " " } else { "" }));
        } else if !glued_after && (number.contains('.') || (whole && bare == number)) {
            out.push(number);
        }
        i = j;
    }
    out
}

/// Whether `figure` occurs in `text` as a whole figure: not the tail or head of a longer
/// number (`1.07` is not in `11.077`), nor of a longer word after its unit.
fn contains_figure(text: &str, figure: &str) -> bool {
    text.match_indices(figure).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let mut after = text[at + figure.len()..].chars();
        let next = after.next();
        let next2 = after.next();
        let ends_in_digit = figure.ends_with(|c: char| c.is_ascii_digit());
        before.is_none_or(|b| !(b.is_ascii_digit() || b == '.'))
            && next.is_none_or(|n| {
                if ends_in_digit {
                    !(n.is_ascii_digit() || (n == '.' && next2.is_some_and(|m| m.is_ascii_digit())))
                } else {
                    !n.is_alphanumeric()
                }
            })
    })
}

fn cells(row: &str) -> Vec<&str> {
    row.trim()
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}

fn is_separator(row: &str) -> bool {
    row.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// The repository files a row names in backticks (`docs/c/x.out`, `bench/...`).
fn named_files(row: &str, read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    row.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|quoted| quoted.split(", "))
        .filter(|p| p.contains('/') && !p.contains(' '))
        .filter_map(read)
        .collect()
}

/// Every problem of `doc` (named `name`): tables with figures and no source, figures not in
/// their source, stamps not in their form, sources that are not there.
fn check(name: &str, doc: &str, read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut problems = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if line.starts_with("Source: ") && !stamp_is_well_formed(line) {
            problems.push(format!(
                "{name}:{}: a stamp not of the form \"Source: bench/results/... (commit HASH, GPU, driver VERSION, YYYY-MM-DD)\": {line}",
                n + 1
            ));
        }
    }
    for table in tables(doc) {
        let first = table.rows[0].as_str();
        let source = stamp_above(&lines, table.start);
        let stamped = match source {
            Some(path) => match read(path) {
                Some(text) => Some((path, text)),
                None => {
                    problems.push(format!(
                        "{name}:{}: the stamp names {path}, which is not there (table {first})",
                        table.start + 1
                    ));
                    continue;
                }
            },
            None => None,
        };
        for (k, row) in table.rows.iter().enumerate() {
            if is_separator(row) {
                continue;
            }
            let wanted: Vec<String> = cells(row)
                .iter()
                .flat_map(|c| figures(c, stamped.is_some()))
                .collect();
            if wanted.is_empty() {
                continue;
            }
            let line = table.start + k + 1;
            let (origin, texts) = match &stamped {
                Some((path, text)) => (path.to_string(), vec![text.clone()]),
                None => {
                    let texts = named_files(row, read);
                    if texts.is_empty() {
                        problems.push(format!(
                            "{name}:{line}: a table with figures and no \"Source:\" stamp above it (first row: {first})"
                        ));
                        break;
                    }
                    ("the files its row names".to_string(), texts)
                }
            };
            for figure in wanted {
                if !texts.iter().any(|t| contains_figure(t, &figure)) {
                    problems.push(format!(
                        "{name}:{line}: {figure:?} is not in {origin} (row {row})"
                    ));
                }
            }
        }
    }
    problems
}

fn check_file(name: &str) {
    let doc = read_repo(name).unwrap_or_else(|| panic!("no {name}"));
    let problems = check(name, &doc, &read_repo);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_figures_of_benchmarks_md_are_in_the_results_files_their_stamps_name() {
    check_file("BENCHMARKS.md");
}

#[test]
fn the_figures_of_the_readme_are_in_the_results_files_their_stamps_name() {
    check_file("README.md");
}

/// Every benchmark section of BENCHMARKS.md has a table from a results file (or says it has
/// not been run), and the page stays a reference: at most 500 lines, no history.
#[test]
fn benchmarks_md_is_a_reference_of_stamped_tables() {
    let doc = read_repo("BENCHMARKS.md").expect("no BENCHMARKS.md");
    let lines = doc.lines().count();
    assert!(
        lines <= 500,
        "BENCHMARKS.md has {lines} lines, more than 500"
    );
    let mut problems = Vec::new();
    for section in doc.split("\n## ").skip(1) {
        let title = section.lines().next().unwrap_or("");
        if title.contains(".rs`")
            && !section.contains("\nSource: ")
            && !section.contains("not yet run")
        {
            problems.push(format!(
                "BENCHMARKS.md's section {title:?} has no Source: stamp"
            ));
        }
    }
    for (n, line) in doc.lines().enumerate() {
        let lower = line.to_lowercase();
        let issue = lower
            .match_indices("issue ")
            .any(|(at, w)| lower[at + w.len()..].starts_with(|c: char| c.is_ascii_digit()));
        if issue || lower.contains("#4") || lower.contains(" step:") {
            problems.push(format!(
                "BENCHMARKS.md:{}: history in the reference: {line}",
                n + 1
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// The check itself, on small documents, so that it is known to fail where it should.

const RESULTS: &str = "NVIDIA H200\n\n| operation | cuda-brand | raw | ratio |\n|---|---:|---:|---:|\n\
    | launch, 100 per sync | 4583 ns | 4505 ns | 1.017 |\n\
    | 256 MiB copy | 54.2 GB/s | 53.9 GB/s | 0.995 |\n";

fn results(path: &str) -> Option<String> {
    (path == "bench/results/2026-12-02-x/run.md").then(|| RESULTS.to_string())
}

const STAMP: &str = "Source: bench/results/2026-12-02-x/run.md (commit 518271a, NVIDIA H200, driver 580.159.04 (CUDA 13.0), 2026-12-02)";

fn doc(stamp: &str, table: &str) -> String {
    format!(
        "# Doc\n\n{stamp}\n\n| operation | cuda-brand | raw | ratio |\n|---|---:|---:|---:|\n{table}"
    )
}

#[test]
fn figures_copied_from_the_stamped_file_pass() {
    let good = doc(
        STAMP,
        "| launch, 100 per sync | 4583 ns | 4505 ns | 1.017 |\n| 256 MiB copy | 54.2 GB/s | 53.9 GB/s | 0.995 |\n",
    );
    assert_eq!(check("doc", &good, &results), Vec::<String>::new());
}

#[test]
fn a_wrong_figure_is_caught() {
    // a changed digit, a figure cut short, a unit changed: each is one problem
    for (wrong, figure) in [
        (
            "| launch, 100 per sync | 4583 ns | 4505 ns | 1.018 |\n",
            "1.018",
        ),
        (
            "| launch, 100 per sync | 4584 ns | 4505 ns | 1.017 |\n",
            "4584 ns",
        ),
        (
            "| launch, 100 per sync | 4583 ns | 4505 ns | 1.01 |\n",
            "1.01",
        ),
        (
            "| 256 MiB copy | 54.2 GB/s | 53.9 µs | 0.995 |\n",
            "53.9 µs",
        ),
        (
            "| 256 MiB copy | 4.2 GB/s | 53.9 GB/s | 0.995 |\n",
            "4.2 GB/s",
        ),
    ] {
        let problems = check("doc", &doc(STAMP, wrong), &results);
        assert_eq!(problems.len(), 1, "{wrong}: {problems:?}");
        assert!(problems[0].contains(&format!("{figure:?}")), "{problems:?}");
    }
}

#[test]
fn a_table_with_figures_and_no_stamp_is_caught_by_its_first_row() {
    let problems = check(
        "doc",
        &doc("", "| launch, 100 per sync | 4583 ns | 4505 ns | 1.017 |\n"),
        &results,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("no \"Source:\" stamp")
            && problems[0].contains("| operation | cuda-brand |"),
        "{problems:?}"
    );
    // a table of words needs no stamp
    assert!(
        check(
            "doc",
            &doc("", "| launch | fast | slow | n/a |\n"),
            &results
        )
        .is_empty()
    );
}

#[test]
fn a_stamp_of_a_missing_file_or_not_in_its_form_is_caught() {
    let missing = STAMP.replace("run.md", "gone.md");
    let problems = check("doc", &doc(&missing, "| a | 1.017 | 1 | 1 |\n"), &results);
    assert!(
        problems.iter().any(|p| p.contains("not there")),
        "{problems:?}"
    );
    let no_date =
        "Source: bench/results/2026-12-02-x/run.md (commit 518271a, NVIDIA H200, driver 580)";
    let problems = check("doc", &doc(no_date, "| a | 1.017 | 1 | 1 |\n"), &results);
    assert!(
        problems.iter().any(|p| p.contains("not of the form")),
        "{problems:?}"
    );
}

#[test]
fn the_figures_of_a_cell_are_its_measurements() {
    assert_eq!(figures("1396 ns", true), ["1396 ns"]);
    assert_eq!(figures("**1.096**", true), ["1.096"]);
    assert_eq!(
        figures("2.670 ms (51.5 TFLOP/s)", true),
        ["2.670 ms", "51.5 TFLOP/s"]
    );
    assert_eq!(figures("7.1 µs, 0.00 GB/s", true), ["7.1 µs", "0.00 GB/s"]);
    assert_eq!(figures("9510", true), ["9510"]);
    assert!(figures("9510", false).is_empty());
    assert_eq!(figures("15.50×", true), ["15.50×"]);
    assert!(figures("alloc+free 1 KiB, stream-ordered (100 per sync)", true).is_empty());
    assert!(figures("launch, empty kernel, 4 slices (8 params)", true).is_empty());
    assert!(
        figures(
            "GEMM 4096³ f32, FFT 2^24, sm_90, cuMemcpy2D, 16 x 16 x 16 B",
            true
        )
        .is_empty()
    );
    assert!(contains_figure("| 1.077 |", "1.077"));
    assert!(!contains_figure("| 11.077 |", "1.077"));
    assert!(!contains_figure("| 1.0771 |", "1.077"));
    assert!(!contains_figure("54.2 GB/sx", "54.2 GB/s"));
}
