//! Keeps the guide (`docs/guide.md`, the crate's `guide` module) true to what it quotes.
//!
//! The guide quotes the compiler's errors from the compile-fail suite and the output of
//! the C programs in `docs/c/`. A quote is a fenced ```text block right after an HTML
//! comment naming its source:
//!
//! ```text
//! <!-- stderr: ui-tests/fail/NAME.stderr -->
//! <!-- output: docs/c/NAME.out -->
//! ```
//!
//! A C program whose output cannot be recorded on the project's GPU machine (one that
//! needs two GPUs) is named instead by a comment saying so, and then must have no output
//! file; once it has one, the guide must quote it:
//!
//! ```text
//! <!-- no output: docs/c/NAME.out: not recorded: needs two GPUs -->
//! ```
//!
//! A shorter quote of a compiler error, an excerpt, names its file the same way:
//!
//! ```text
//! <!-- stderr excerpt: ui-tests/fail/RULE/NAME.stderr -->
//! ```
//!
//! Every line of an excerpt must be a line of the file, in the file's order; blank lines
//! and lines `[...]` (marking what was left out) are skipped.
//!
//! Each quote must equal its file (trailing whitespace aside). When a compiler update
//! changes the suite's `.stderr` files (`TRYBUILD=overwrite cargo test --test ui`), copy
//! the new text into the guide too. The doc tests check the other half: each forbidden
//! example in the guide fails to compile with the error code it names.
//!
//! The README's claims are kept the same way: its numbered rules are the folders of
//! `ui-tests/fail/`, one each, in order, and the bulk-copy thresholds and staging sizes it
//! states (and those of `DeviceBuffer`'s documentation in `src/memory.rs`) are the code's
//! (`cuda_brand::__staging`). `tests/no_device.rs` compares its quote of the "driver
//! library not found" message with what the crate prints under `cargo test`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// A quote in the guide: the file it names, its text, and where it is.
struct Quote {
    source: String,
    text: String,
    line: usize,
}

/// A chapter: a level-one heading that starts with its number, e.g. `# 3. ...`.
struct Chapter {
    title: String,
    stderr_quotes: Vec<Quote>,
    output_quotes: Vec<Quote>,
    /// Excerpts of `.stderr` files (`<!-- stderr excerpt: ... -->`).
    excerpts: Vec<Quote>,
    /// The error codes of the chapter's `compile_fail` examples, "" for one without.
    compile_fail_codes: Vec<String>,
    /// The chapter says why it quotes no `.stderr` (`<!-- no stderr quote: ... -->`).
    exempt: bool,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Trailing whitespace of every line and trailing blank lines removed.
fn normalize(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    lines.join("\n").trim_end().to_string()
}

/// The source named by a marker comment, e.g. `stderr` in `<!-- stderr: path -->`.
fn marker<'a>(line: &'a str, kind: &str) -> Option<&'a str> {
    let rest = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    let path = rest.strip_prefix(kind)?.strip_prefix(':')?.trim();
    Some(path)
}

fn parse(guide: &str) -> Vec<Chapter> {
    let lines: Vec<&str> = guide.lines().collect();
    let mut chapters: Vec<Chapter> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(info) = line.strip_prefix("```") {
            // A code block: note compile_fail examples, skip to the closing fence.
            let tokens: Vec<&str> = info.split(',').map(str::trim).collect();
            if tokens.contains(&"compile_fail") {
                let code = tokens
                    .iter()
                    .find(|t| t.len() == 5 && t.starts_with('E'))
                    .map_or(String::new(), |t| t.to_string());
                let chapter = chapters.last_mut().unwrap_or_else(|| {
                    panic!(
                        "line {}: a compile_fail example before the first chapter",
                        i + 1
                    )
                });
                chapter.compile_fail_codes.push(code);
            }
            i += 1;
            while i < lines.len() && !lines[i].starts_with("```") {
                i += 1;
            }
            i += 1;
            continue;
        }
        if let Some(title) = line.strip_prefix("# ") {
            if title.starts_with(|c: char| c.is_ascii_digit()) {
                chapters.push(Chapter {
                    title: title.to_string(),
                    stderr_quotes: Vec::new(),
                    output_quotes: Vec::new(),
                    excerpts: Vec::new(),
                    compile_fail_codes: Vec::new(),
                    exempt: false,
                });
            }
        }
        if line.trim().starts_with("<!-- no stderr quote:") {
            if let Some(chapter) = chapters.last_mut() {
                chapter.exempt = true;
            }
        }
        for kind in ["stderr", "output", "stderr excerpt"] {
            let Some(source) = marker(line, kind) else {
                continue;
            };
            let fence = i + 1;
            assert!(
                lines.get(fence) == Some(&"```text"),
                "docs/guide.md:{}: the `{kind}` marker for {source} must be followed directly by a ```text block",
                i + 1
            );
            let end = (fence + 1..lines.len())
                .find(|&j| lines[j].starts_with("```"))
                .unwrap_or_else(|| panic!("docs/guide.md:{}: unclosed ```text block", fence + 1));
            let quote = Quote {
                source: source.to_string(),
                text: lines[fence + 1..end].join("\n"),
                line: fence + 2,
            };
            let chapter = chapters.last_mut().unwrap_or_else(|| {
                panic!("docs/guide.md:{}: a quote before the first chapter", i + 1)
            });
            match kind {
                "stderr" => chapter.stderr_quotes.push(quote),
                "output" => chapter.output_quotes.push(quote),
                _ => chapter.excerpts.push(quote),
            }
            i = end;
        }
        i += 1;
    }
    chapters
}

fn guide() -> Vec<Chapter> {
    let chapters = parse(&read(&root().join("docs/guide.md")));
    assert!(
        chapters.len() >= 9,
        "docs/guide.md has {} numbered chapters, expected one per rule (9)",
        chapters.len()
    );
    chapters
}

/// Where two texts first differ, for the failure message.
fn first_difference(quoted: &str, actual: &str) -> String {
    let (q, a): (Vec<&str>, Vec<&str>) = (quoted.lines().collect(), actual.lines().collect());
    for k in 0..q.len().max(a.len()) {
        let (ql, al) = (q.get(k), a.get(k));
        if ql != al {
            return format!(
                "line {} of the quote:\n    guide: {}\n    file:  {}",
                k + 1,
                ql.copied().unwrap_or("<missing>"),
                al.copied().unwrap_or("<missing>")
            );
        }
    }
    String::from("(no difference)")
}

/// Compares every quote with its file; returns one message per mismatch.
fn mismatches<'a>(quotes: impl Iterator<Item = &'a Quote>) -> Vec<String> {
    let mut problems = Vec::new();
    for quote in quotes {
        let path = root().join(&quote.source);
        let Ok(actual) = fs::read_to_string(&path) else {
            problems.push(format!(
                "docs/guide.md:{}: quotes {}, which does not exist",
                quote.line, quote.source
            ));
            continue;
        };
        let (quoted, actual) = (normalize(&quote.text), normalize(&actual));
        if quoted != actual {
            problems.push(format!(
                "docs/guide.md:{}: the quote of {} differs from the file; {}",
                quote.line,
                quote.source,
                first_difference(&quoted, &actual)
            ));
        }
    }
    problems
}

#[test]
fn quoted_compiler_errors_match_the_ui_suite() {
    let chapters = guide();
    let problems = mismatches(chapters.iter().flat_map(|c| &c.stderr_quotes));
    assert!(
        problems.is_empty(),
        "{} quoted compiler error(s) no longer match the UI suite; copy the .stderr files into docs/guide.md:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn quoted_excerpts_appear_in_their_files() {
    let chapters = guide();
    let mut problems = Vec::new();
    for quote in chapters.iter().flat_map(|c| &c.excerpts) {
        if !(quote.source.starts_with("ui-tests/fail/") && quote.source.ends_with(".stderr")) {
            problems.push(format!(
                "docs/guide.md:{}: an excerpt must name a ui-tests/fail/*.stderr file, not {}",
                quote.line, quote.source
            ));
            continue;
        }
        let Ok(actual) = fs::read_to_string(root().join(&quote.source)) else {
            problems.push(format!(
                "docs/guide.md:{}: quotes {}, which does not exist",
                quote.line, quote.source
            ));
            continue;
        };
        let mut file = actual.lines().map(str::trim_end);
        for (k, line) in quote.text.lines().map(str::trim_end).enumerate() {
            if line.trim().is_empty() || line.trim() == "[...]" {
                continue;
            }
            if !file.any(|l| l == line) {
                problems.push(format!(
                    "docs/guide.md:{}: this line of the excerpt of {} is not in the file (or not in its order): {line}",
                    quote.line + k,
                    quote.source
                ));
                break;
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_chapter_with_a_forbidden_example_quotes_its_error() {
    let chapters = guide();
    let mut problems = Vec::new();
    for chapter in &chapters {
        if chapter.compile_fail_codes.is_empty() || chapter.exempt {
            continue;
        }
        if chapter.stderr_quotes.is_empty() {
            problems.push(format!(
                "\"{}\" has compile_fail examples but quotes no .stderr",
                chapter.title
            ));
            continue;
        }
        // Each error code the chapter's examples expect is one its quotes show.
        let quoted = chapter
            .stderr_quotes
            .iter()
            .map(|q| q.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        for code in chapter.compile_fail_codes.iter().filter(|c| !c.is_empty()) {
            if !quoted.contains(&format!("error[{code}]")) {
                problems.push(format!(
                    "\"{}\" has a compile_fail,{code} example but no quoted error[{code}]",
                    chapter.title
                ));
            }
        }
    }
    let total: usize = chapters.iter().map(|c| c.stderr_quotes.len()).sum();
    if total < 8 {
        problems.push(format!(
            "the guide quotes {total} .stderr files, expected at least 8"
        ));
    }
    let distinct: BTreeSet<&str> = chapters
        .iter()
        .flat_map(|c| &c.stderr_quotes)
        .map(|q| q.source.as_str())
        .collect();
    assert!(
        distinct
            .iter()
            .all(|s| s.starts_with("ui-tests/fail/") && s.ends_with(".stderr")),
        "stderr quotes must name ui-tests/fail/*.stderr files: {distinct:?}"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn quoted_c_outputs_match_their_files() {
    let chapters = guide();
    let problems = mismatches(chapters.iter().flat_map(|c| &c.output_quotes));
    assert!(
        problems.is_empty(),
        "{} quoted C output(s) differ from docs/c/*.out:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_c_program_has_its_observed_output_in_the_guide() {
    let guide_text = read(&root().join("docs/guide.md"));
    let quoted: BTreeSet<String> = guide()
        .iter()
        .flat_map(|c| &c.output_quotes)
        .map(|q| q.source.clone())
        .collect();
    let mut problems = Vec::new();
    let dir = root().join("docs/c");
    let mut programs: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|name| name.strip_suffix(".c").map(str::to_string))
        .collect();
    programs.sort();
    assert!(!programs.is_empty(), "docs/c/ has no C programs");
    // Programs the guide says are not recorded (`<!-- no output: docs/c/NAME.out: why -->`).
    let unrecorded: BTreeSet<String> = guide_text
        .lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("<!-- no output:")?.trim_start();
            let (path, why) = rest.split_once(": ")?;
            let why = why.trim_end().strip_suffix("-->")?.trim();
            (!why.is_empty()).then(|| path.trim().to_string())
        })
        .collect();
    for name in &programs {
        let out = format!("docs/c/{name}.out");
        if unrecorded.contains(&out) {
            if root().join(&out).exists() {
                problems.push(format!(
                    "{out} has been recorded: quote it in docs/guide.md and remove its `<!-- no output: ... -->` comment"
                ));
            }
            if !guide_text.contains(&format!("docs/c/{name}.c")) {
                problems.push(format!("docs/guide.md never mentions docs/c/{name}.c"));
            }
            continue;
        }
        if !root().join(&out).exists() {
            problems.push(format!(
                "{out} is missing: run `bash docs/c/run.sh` on a machine with a GPU"
            ));
        }
        if !quoted.contains(&out) {
            problems.push(format!("docs/guide.md quotes no {out}"));
        }
        if !guide_text.contains(&format!("docs/c/{name}.c")) {
            problems.push(format!("docs/guide.md never mentions docs/c/{name}.c"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_guide_is_the_guide_module_of_the_crate_docs() {
    let lib = read(&root().join("src/lib.rs"));
    assert!(
        lib.contains("#[doc = include_str!(\"../docs/guide.md\")]\npub mod guide {}"),
        "src/lib.rs must include docs/guide.md as the `guide` module"
    );
    // Every program the guide names exists.
    let guide_text = read(&root().join("docs/guide.md"));
    for (at, _) in guide_text.match_indices("docs/c/") {
        let name: String = guide_text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.'))
            .collect();
        let name = name.trim_end_matches('.');
        if name.ends_with(".c") || name.ends_with(".sh") {
            assert!(
                root().join(name).exists(),
                "docs/guide.md names {name}, which does not exist"
            );
        }
    }
}

// The README: the rules it lists and the bulk-copy thresholds it states are the crate's.

fn readme() -> String {
    read(&root().join("README.md"))
}

/// The folders of `ui-tests/fail/`, sorted: one per rule.
fn rule_folders() -> Vec<String> {
    let dir = root().join("ui-tests/fail");
    let mut folders: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|entry| {
            let entry = entry.ok()?;
            entry.file_type().ok()?.is_dir().then_some(())?;
            entry.file_name().into_string().ok()
        })
        .collect();
    folders.sort();
    folders
}

/// `"nine"` as 9 (and digits as themselves).
fn number_word(word: &str) -> Option<usize> {
    const WORDS: [&str; 13] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    let word = word.to_ascii_lowercase();
    WORDS
        .iter()
        .position(|w| *w == word)
        .or_else(|| word.parse().ok())
}

/// The numbered list of rules after the README's "N rules, one folder ..." line: each
/// item's number and text (its lines joined).
fn readme_rules(readme: &str) -> (usize, Vec<(usize, String)>) {
    let lines: Vec<&str> = readme.lines().collect();
    let intro = lines
        .iter()
        .position(|l| l.contains(" rules, one folder of compile-fail cases each in `ui-tests/fail/`"))
        .expect("README.md: no line \"N rules, one folder of compile-fail cases each in `ui-tests/fail/`\"");
    let word = lines[intro].split_whitespace().next().unwrap_or("");
    let count = number_word(word)
        .unwrap_or_else(|| panic!("README.md:{}: {word:?} is not a number", intro + 1));
    let mut items: Vec<(usize, String)> = Vec::new();
    for line in &lines[intro + 1..] {
        let numbered = line
            .split_once(". ")
            .and_then(|(n, _)| n.parse::<usize>().ok().map(|n| (n, line)));
        match numbered {
            Some((n, line)) => items.push((n, line.to_string())),
            None if line.starts_with("   ") && !items.is_empty() => {
                let item = items.last_mut().expect("an item");
                item.1.push(' ');
                item.1.push_str(line.trim());
            }
            None if items.is_empty() => {}
            None => break,
        }
    }
    (count, items)
}

#[test]
fn the_readme_has_one_rule_per_folder_of_the_compile_fail_suite() {
    let folders = rule_folders();
    let (count, items) = readme_rules(&readme());
    assert_eq!(
        count,
        folders.len(),
        "README.md counts {count} rules; ui-tests/fail/ has {} folders: {folders:?}",
        folders.len()
    );
    let chapters: Vec<String> = guide().into_iter().map(|c| c.title).collect();
    let mut problems = Vec::new();
    for (k, folder) in folders.iter().enumerate() {
        let rule = k + 1;
        if !folder.starts_with(&format!("{rule}_")) {
            problems.push(format!(
                "ui-tests/fail/{folder} is not numbered as rule {rule}"
            ));
        }
        let Some((n, text)) = items.get(k) else {
            problems.push(format!(
                "README.md lists no rule {rule} (ui-tests/fail/{folder}/)"
            ));
            continue;
        };
        if *n != rule {
            problems.push(format!("README.md's rule {rule} is numbered {n}"));
        }
        if !text.starts_with(&format!("{n}. **")) {
            problems.push(format!(
                "README.md's rule {n} does not begin with its name in bold"
            ));
        }
        // the first folder the item names is its own
        let named = text
            .split_once("`ui-tests/fail/")
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(name, _)| name);
        if named != Some(folder.as_str()) {
            problems.push(format!(
                "README.md's rule {n} names {named:?} first, not its folder ui-tests/fail/{folder}/"
            ));
        }
        // every guide chapter it names exists
        for (at, _) in text.match_indices("chapter ") {
            let number: String = text[at + "chapter ".len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !number.is_empty()
                && !chapters
                    .iter()
                    .any(|t| t.starts_with(&format!("{number}. ")))
            {
                problems.push(format!(
                    "README.md's rule {n} names guide chapter {number}, which does not exist"
                ));
            }
        }
    }
    if items.len() > folders.len() {
        problems.push(format!(
            "README.md lists {} rules, ui-tests/fail/ has {} folders",
            items.len(),
            folders.len()
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `"16 MiB"` (the start of `text`) in bytes.
fn mebibytes(text: &str) -> Option<usize> {
    let digits: String = text
        .trim()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let rest = text.trim()[digits.len()..].trim_start();
    rest.starts_with("MiB")
        .then(|| digits.parse::<usize>().ok().map(|n| n << 20))?
}

/// The staging kind of a copy method: the one whose threshold decides whether it stages.
fn kind_of(method: &str) -> Option<cuda_brand::__staging::Kind> {
    use cuda_brand::__staging::Kind;
    match method {
        "to_vec" => Some(Kind::ToNewHost),
        "copy_to_host" => Some(Kind::ToHost),
        "from_slice" | "from_slice_in" | "copy_from_host" => Some(Kind::FromHost),
        _ => None,
    }
}

#[test]
fn the_readme_states_the_staging_thresholds_and_sizes_of_the_code() {
    use cuda_brand::__staging::{
        Kind, MAX_STAGINGS_PER_CONTEXT, MAX_WORKERS, SLOT_BYTES, STAGING_BYTES,
    };
    let readme = readme();
    let lines: Vec<&str> = readme.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.trim() == "| copy | staged from |")
        .expect("README.md: no table \"| copy | staged from |\"");
    let mut seen = Vec::new();
    let mut problems = Vec::new();
    for line in lines[header + 2..]
        .iter()
        .take_while(|l| l.starts_with('|'))
    {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [copies, size] = cells[..] else {
            panic!("README.md: a row of the thresholds' table has not two cells: {line}");
        };
        let bytes = mebibytes(size)
            .unwrap_or_else(|| panic!("README.md: {size:?} is not a size in MiB ({line})"));
        // the methods, before the parenthesis that says what they copy
        let names = copies.split('(').next().unwrap_or("");
        let methods: Vec<&str> = names.split('`').skip(1).step_by(2).collect();
        assert!(
            !methods.is_empty(),
            "README.md: a row names no method: {line}"
        );
        for method in methods {
            let kind = kind_of(method).unwrap_or_else(|| {
                panic!("README.md's thresholds name `{method}`, no staged copy")
            });
            seen.push(kind);
            if bytes != kind.default_threshold() {
                problems.push(format!(
                    "README.md: `{method}` staged from {size}; the code's threshold ({kind:?}) is {} MiB",
                    kind.default_threshold() >> 20
                ));
            }
        }
    }
    for kind in Kind::ALL {
        assert!(
            seen.contains(&kind),
            "README.md's thresholds leave out {kind:?}"
        );
    }
    // the sizes the section states
    for claim in [
        format!("through {} MiB of page-locked", STAGING_BYTES >> 20),
        format!("one chunk (up to {} MiB)", SLOT_BYTES >> 20),
        format!("up to {MAX_WORKERS} scoped threads"),
        format!("one staging of {} MiB page-locked", STAGING_BYTES >> 20),
        format!(
            "at most {MAX_STAGINGS_PER_CONTEXT} per context, {} MiB",
            (MAX_STAGINGS_PER_CONTEXT * STAGING_BYTES) >> 20
        ),
    ] {
        if !readme.replace('\n', " ").contains(&claim) {
            problems.push(format!(
                "README.md does not say \"{claim}\" (the code's value)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `DeviceBuffer`'s documentation states the thresholds of the code: every "From N MiB"
/// and "(N MiB and up)" in the doc comment of a copy method, and the "each from N MiB" of
/// the type's section on bulk copies.
#[test]
fn the_device_buffer_docs_state_the_staging_thresholds_of_the_code() {
    use cuda_brand::__staging::Kind;
    let source = read(&root().join("src/memory.rs"));
    let mut doc = String::new();
    let mut problems = Vec::new();
    let mut type_docs_state_them = false;
    for line in source.lines().map(str::trim) {
        if let Some(text) = line.strip_prefix("///") {
            doc.push(' ');
            doc.push_str(text.trim());
            continue;
        }
        if line.starts_with("#[") || doc.is_empty() {
            continue;
        }
        let item = std::mem::take(&mut doc);
        let sizes = |marker: &str, before: bool| -> Vec<usize> {
            let mut found = Vec::new();
            for (at, _) in item.match_indices(marker) {
                let text = if before {
                    &item[at + marker.len()..]
                } else {
                    // "(16 MiB and up)": the number before the marker, with its unit
                    let start = item[..at].rfind('(').map_or(0, |p| p + 1);
                    &item[start..at + " MiB".len()]
                };
                if let Some(bytes) = mebibytes(text) {
                    found.push(bytes);
                }
            }
            found
        };
        if line.starts_with("pub struct DeviceBuffer<") {
            for bytes in sizes("each from ", true) {
                type_docs_state_them = true;
                for kind in Kind::ALL {
                    if bytes != kind.default_threshold() {
                        problems.push(format!(
                            "DeviceBuffer's docs: staged each from {} MiB; {kind:?}'s threshold is {} MiB",
                            bytes >> 20,
                            kind.default_threshold() >> 20
                        ));
                    }
                }
            }
            continue;
        }
        let Some(name) = line
            .split_once("pub fn ")
            .and_then(|(_, rest)| rest.split(['<', '(']).next())
        else {
            continue;
        };
        let stated: Vec<usize> = sizes("From ", true)
            .into_iter()
            .chain(sizes(" MiB and up)", false))
            .collect();
        if stated.is_empty() || !item.contains("staged") {
            continue;
        }
        let Some(kind) = kind_of(name) else {
            problems.push(format!(
                "src/memory.rs: `{name}`'s docs state a staging threshold, but it is no staged copy"
            ));
            continue;
        };
        for bytes in stated {
            if bytes != kind.default_threshold() {
                problems.push(format!(
                    "src/memory.rs: `{name}`'s docs say staged from {} MiB; {kind:?}'s threshold is {} MiB",
                    bytes >> 20,
                    kind.default_threshold() >> 20
                ));
            }
        }
    }
    assert!(
        type_docs_state_them,
        "DeviceBuffer's docs no longer say \"each from N MiB\""
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
