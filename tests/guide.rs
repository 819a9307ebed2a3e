//! Keeps the guide (`docs/guide/`, the crate's `guide` module) true to what it quotes.
//!
//! The guide is a folder: `docs/guide/README.md`, the `guide` module's own page (the table
//! of chapters, ending with the rules), and one file per chapter page, `NN-topic.md` (a
//! long chapter has two pages, `NNa-...` and `NNb-...`), read in the order of their names,
//! each the page of a module `guide::chNN_topic` in `src/lib.rs`. Each chapter file begins
//! with its chapter's heading, `# N. ...`; a second page of a chapter repeats its number.
//! The rules are one file, `docs/rules.md`: the crate's front page and the guide's page
//! include it, and the README's list must be the same text.
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
//! (Quotes may name any `.stderr` of the suite: `ui-tests/fail/`, `ui-tests/nccl/fail/`,
//! `ui-tests/safety-profile/`.)
//!
//! Chapter 9, "Reading the compiler's errors", is the suite's index: every compile-fail case
//! (every `.rs` under `ui-tests/` outside a `pass/` folder) is listed once, in the
//! "**Produced by.**" paragraph of the section whose heading is its `.stderr`'s first
//! `error` line (`...` in a heading stands for any text), and every section has a row in
//! the chapter's table. And each `#[diagnostic::on_unimplemented]` of the crate ends with a
//! note saying where its rule is explained: `see the guide, chapter N (`cuda_brand::guide`)`
//! (a chapter that names the trait) or `see `cuda_brand::MODULE`` (a public module that
//! does).
//!
//! The README's claims are kept the same way: its numbered rules are the folders of
//! `ui-tests/fail/`, one each, in order, and the bulk-copy thresholds and staging sizes it
//! states (and those of the documentation of `DeviceBuffer` and `DeviceSlice` in
//! `src/memory/`) are the code's (`cuda_brand::__staging`). `tests/no_device.rs` compares
//! its quote of the "driver library not found" message with what the crate prints under
//! `cargo test`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// A quote in the guide: the file it names, its text, and where it is (a guide file and
/// the line its text starts on).
struct Quote {
    source: String,
    text: String,
    file: String,
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

/// A file of the guide: its path from the repository's root and its text.
struct GuideFile {
    path: String,
    text: String,
}

impl GuideFile {
    /// `name:line`, for messages.
    fn at(&self, line: usize) -> String {
        format!("{}:{line}", self.path)
    }

    /// The module whose page the file is: `guide` for the README, `guide::ch05a_stream_scopes`
    /// for `05a-stream-scopes.md`.
    fn module(&self) -> String {
        let name = self.path.trim_start_matches("docs/guide/");
        match name.strip_suffix(".md") {
            Some("README") | None => String::from("guide"),
            Some(stem) => format!("guide::ch{}", stem.replace('-', "_")),
        }
    }
}

/// The number a chapter file's name starts with (`5` of `05a-stream-scopes.md`).
fn chapter_prefix(name: &str) -> Option<usize> {
    let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
    let rest = &name[digits.len()..];
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_lowercase());
    (digits.len() == 2 && rest.starts_with('-') && name.ends_with(".md"))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The guide's files in order: `docs/guide/README.md`, then the chapters `NN-topic.md`
/// sorted by name. Each chapter file begins with the heading of chapter NN.
fn guide_files() -> Vec<GuideFile> {
    let dir = root().join("docs/guide");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    let mut files = vec![GuideFile {
        path: String::from("docs/guide/README.md"),
        text: read(&dir.join("README.md")),
    }];
    for name in names.iter().filter(|n| *n != "README.md") {
        let number = chapter_prefix(name).unwrap_or_else(|| {
            panic!("docs/guide/{name}: not a chapter file (NN-topic.md) or README.md")
        });
        let text = read(&dir.join(name));
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.starts_with(&format!("# {number}. ")),
            "docs/guide/{name}:1: a chapter file begins with its chapter's heading, `# {number}. ...`, not {first:?}"
        );
        files.push(GuideFile {
            path: format!("docs/guide/{name}"),
            text,
        });
    }
    assert!(
        files.len() > 9,
        "docs/guide/ has {} chapter files, expected one per rule (9) at least",
        files.len() - 1
    );
    files
}

/// All of the guide's text, its files one after the other.
fn guide_text() -> String {
    guide_files()
        .iter()
        .map(|f| f.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The number a chapter heading's title starts with (`9` of `9. Reading ...`).
fn title_number(title: &str) -> Option<usize> {
    let digits: String = title.chars().take_while(char::is_ascii_digit).collect();
    title[digits.len()..]
        .starts_with(". ")
        .then(|| digits.parse().ok())
        .flatten()
}

fn parse(files: &[GuideFile]) -> Vec<Chapter> {
    let mut chapters: Vec<Chapter> = Vec::new();
    for file in files {
        parse_file(file, &mut chapters);
    }
    chapters
}

/// The chapters of one file, added to `chapters`; a heading with the last chapter's
/// number (a chapter's second page) continues that chapter.
fn parse_file(file: &GuideFile, chapters: &mut Vec<Chapter>) {
    let lines: Vec<&str> = file.text.lines().collect();
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
                        "{}: a compile_fail example before the first chapter",
                        file.at(i + 1)
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
            if let Some(number) = title_number(title) {
                let continued = chapters
                    .last()
                    .is_some_and(|c| title_number(&c.title) == Some(number));
                if !continued {
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
                "{}: the `{kind}` marker for {source} must be followed directly by a ```text block",
                file.at(i + 1)
            );
            let end = (fence + 1..lines.len())
                .find(|&j| lines[j].starts_with("```"))
                .unwrap_or_else(|| panic!("{}: unclosed ```text block", file.at(fence + 1)));
            let quote = Quote {
                source: source.to_string(),
                text: lines[fence + 1..end].join("\n"),
                file: file.path.clone(),
                line: fence + 2,
            };
            let chapter = chapters
                .last_mut()
                .unwrap_or_else(|| panic!("{}: a quote before the first chapter", file.at(i + 1)));
            match kind {
                "stderr" => chapter.stderr_quotes.push(quote),
                "output" => chapter.output_quotes.push(quote),
                _ => chapter.excerpts.push(quote),
            }
            i = end;
        }
        i += 1;
    }
}

fn guide() -> Vec<Chapter> {
    let chapters = parse(&guide_files());
    assert!(
        chapters.len() >= 9,
        "docs/guide/ has {} numbered chapters, expected one per rule (9)",
        chapters.len()
    );
    chapters
}

/// The longest a page of the guide may be, in lines: a longer chapter is split into pages
/// (`NNa-...`, `NNb-...`) at a section.
const MAX_PAGE_LINES: usize = 800;

#[test]
fn every_page_of_the_guide_is_short() {
    let long: Vec<String> = guide_files()
        .iter()
        .map(|f| (f, f.text.lines().count()))
        .filter(|(_, n)| *n > MAX_PAGE_LINES)
        .map(|(f, n)| format!("{}: {n} lines", f.path))
        .collect();
    assert!(
        long.is_empty(),
        "pages of the guide longer than {MAX_PAGE_LINES} lines; split them at a section:\n{}",
        long.join("\n")
    );
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
                "{}:{}: quotes {}, which does not exist",
                quote.file, quote.line, quote.source
            ));
            continue;
        };
        let (quoted, actual) = (normalize(&quote.text), normalize(&actual));
        if quoted != actual {
            problems.push(format!(
                "{}:{}: the quote of {} differs from the file; {}",
                quote.file,
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
        "{} quoted compiler error(s) no longer match the UI suite; copy the .stderr files into docs/guide/:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn quoted_excerpts_appear_in_their_files() {
    let chapters = guide();
    let mut problems = Vec::new();
    for quote in chapters.iter().flat_map(|c| &c.excerpts) {
        if !(quote.source.starts_with("ui-tests/") && quote.source.ends_with(".stderr")) {
            problems.push(format!(
                "{}:{}: an excerpt must name a ui-tests/**/*.stderr file, not {}",
                quote.file, quote.line, quote.source
            ));
            continue;
        }
        let Ok(actual) = fs::read_to_string(root().join(&quote.source)) else {
            problems.push(format!(
                "{}:{}: quotes {}, which does not exist",
                quote.file, quote.line, quote.source
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
                    "{}:{}: this line of the excerpt of {} is not in the file (or not in its order): {line}",
                    quote.file,
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
            .all(|s| s.starts_with("ui-tests/") && s.ends_with(".stderr")),
        "stderr quotes must name ui-tests/**/*.stderr files: {distinct:?}"
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
    let guide_text = guide_text();
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
                    "{out} has been recorded: quote it in docs/guide/ and remove its `<!-- no output: ... -->` comment"
                ));
            }
            if !guide_text.contains(&format!("docs/c/{name}.c")) {
                problems.push(format!("docs/guide/ never mentions docs/c/{name}.c"));
            }
            continue;
        }
        if !root().join(&out).exists() {
            problems.push(format!(
                "{out} is missing: run `bash docs/c/run.sh` on a machine with a GPU"
            ));
        }
        if !quoted.contains(&out) {
            problems.push(format!("docs/guide/ quotes no {out}"));
        }
        if !guide_text.contains(&format!("docs/c/{name}.c")) {
            problems.push(format!("docs/guide/ never mentions docs/c/{name}.c"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_guide_is_the_guide_module_of_the_crate_docs() {
    let lib = read(&root().join("src/lib.rs"));
    // the `guide` module: its page is the README and the rules, and each chapter file, in
    // order, is the page of a module of its own
    let files = guide_files();
    let mut expected = String::from(
        "#[doc = include_str!(\"../docs/guide/README.md\")]\n\
         #[doc = include_str!(\"../docs/rules.md\")]\n\
         pub mod guide {\n",
    );
    for file in &files[1..] {
        let module = file.module();
        let module = module.trim_start_matches("guide::");
        expected.push_str(&format!(
            "    #[doc = include_str!(\"../{}\")]\n    pub mod {module} {{}}\n",
            file.path
        ));
    }
    expected.push_str("}\n");
    assert!(
        lib.contains(&expected),
        "src/lib.rs must include docs/guide/README.md and docs/rules.md as the `guide` module, \
         and each chapter file as a module inside it, in order:\n{expected}"
    );
    // Every program the guide names exists.
    let guide_text = guide_text();
    for (at, _) in guide_text.match_indices("docs/c/") {
        let name: String = guide_text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.'))
            .collect();
        let name = name.trim_end_matches('.');
        if name.ends_with(".c") || name.ends_with(".sh") {
            assert!(
                root().join(name).exists(),
                "docs/guide/ names {name}, which does not exist"
            );
        }
    }
}

// The README: the rules it lists and the bulk-copy thresholds it states are the crate's.

fn readme() -> String {
    read(&root().join("README.md"))
}

/// The rule number a folder of `ui-tests/fail/` starts with (`10` of `10_owned`).
fn rule_number(folder: &str) -> usize {
    folder
        .split('_')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// The folders of `ui-tests/fail/`, in the order of their rule numbers: one per rule.
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
    folders.sort_by_key(|f| (rule_number(f), f.clone()));
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

/// The README's list of rules, as text: the lines of the numbered list after its
/// "N rules, one folder ..." line.
fn readme_rule_list(readme: &str) -> String {
    let lines: Vec<&str> = readme.lines().collect();
    let intro = lines
        .iter()
        .position(|l| l.contains(" rules, one folder of compile-fail cases each in `ui-tests/fail/`"))
        .expect("README.md: no line \"N rules, one folder of compile-fail cases each in `ui-tests/fail/`\"");
    let first = (intro + 1..lines.len())
        .find(|&k| lines[k].starts_with("1. "))
        .expect("README.md: no numbered list of rules after its \"N rules\" line");
    let end = (first..lines.len())
        .find(|&k| lines[k].trim().is_empty())
        .unwrap_or(lines.len());
    lines[first..end].join("\n")
}

#[test]
fn the_rules_are_one_file_that_the_readme_repeats_and_the_docs_include() {
    let rules = normalize(&read(&root().join("docs/rules.md")));
    let listed = normalize(&readme_rule_list(&readme()));
    assert!(
        listed == rules,
        "README.md's list of rules differs from docs/rules.md, the one source of the rules; copy docs/rules.md into the README; {}",
        first_difference(&listed, &rules)
    );
    let (_, items) = readme_rules(&readme());
    assert_eq!(
        items.len(),
        rule_folders().len(),
        "docs/rules.md: one rule per folder of ui-tests/fail/"
    );
    // the crate's front page includes the file, and states no list of its own
    let lib = read(&root().join("src/lib.rs"));
    assert!(
        lib.contains("\n#![doc = include_str!(\"../docs/rules.md\")]\n"),
        "src/lib.rs: the crate docs must include docs/rules.md (`#![doc = include_str!(\"../docs/rules.md\")]`)"
    );
    let restated: Vec<&str> = lib
        .lines()
        .filter(|l| {
            l.strip_prefix("//! ")
                .and_then(|rest| rest.split_once(". **"))
                .is_some_and(|(n, _)| n.parse::<usize>().is_ok())
        })
        .collect();
    assert!(
        restated.is_empty(),
        "src/lib.rs states rules of its own next to docs/rules.md: {restated:?}"
    );
    // and so does the guide's page (`the_guide_is_the_guide_module_of_the_crate_docs`
    // checks the attribute), which states no list of its own either
    for file in guide_files() {
        for (k, line) in file.text.lines().enumerate() {
            if let Some(first) = rules.lines().next() {
                assert!(
                    line != first,
                    "{}: the guide restates docs/rules.md; it shows the file (the `guide` module includes it)",
                    file.at(k + 1)
                );
            }
        }
    }
}

/// `"16 MiB"` or `"512 KiB"` (the start of `text`) in bytes.
fn stated_size(text: &str) -> Option<usize> {
    let digits: String = text
        .trim()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let n = digits.parse::<usize>().ok()?;
    let rest = text.trim()[digits.len()..].trim_start();
    match () {
        _ if rest.starts_with("MiB") => Some(n << 20),
        _ if rest.starts_with("KiB") => Some(n << 10),
        _ => None,
    }
}

/// `bytes` as the docs write a threshold: `"1 MiB"`, or `"512 KiB"` below a MiB.
fn size_text(bytes: usize) -> String {
    match bytes % (1 << 20) {
        0 => format!("{} MiB", bytes >> 20),
        _ => format!("{} KiB", bytes >> 10),
    }
}

/// The staging kind of a copy method: the one whose threshold decides whether it stages.
fn kind_of(method: &str) -> Option<cuda_brand::__staging::CopyKind> {
    use cuda_brand::__staging::CopyKind;
    match method {
        "to_vec" => Some(CopyKind::ToNewHost),
        "copy_to_host" => Some(CopyKind::ToHost),
        "from_slice" | "from_slice_in" | "copy_from_host" => Some(CopyKind::FromHost),
        _ => None,
    }
}

#[test]
fn the_readme_states_the_staging_thresholds_and_sizes_of_the_code() {
    use cuda_brand::__staging::{
        CopyKind, MAX_STAGINGS_PER_CONTEXT, MAX_WORKERS, SLOT_BYTES, STAGING_BYTES,
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
        let bytes = stated_size(size)
            .unwrap_or_else(|| panic!("README.md: {size:?} is not a size in MiB or KiB ({line})"));
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
                    "README.md: `{method}` staged from {size}; the code's threshold ({kind:?}) is {}",
                    size_text(kind.default_threshold())
                ));
            }
        }
    }
    for kind in CopyKind::ALL {
        assert!(
            seen.contains(&kind),
            "README.md's thresholds leave out {kind:?}"
        );
    }
    // the sizes the section states
    for claim in [
        format!("through {} MiB of page-locked", STAGING_BYTES >> 20),
        format!("each chunk (up to {} MiB)", SLOT_BYTES >> 20),
        format!("up to {MAX_WORKERS} threads that the staging keeps"),
        format!("and up to {MAX_WORKERS} threads (one fewer than the cores"),
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
/// and "(N MiB and up)" in the doc comment of a copy method, and the "from N MiB" of each
/// kind in the type's section on bulk copies.
#[test]
fn the_device_buffer_docs_state_the_staging_thresholds_of_the_code() {
    use cuda_brand::__staging::CopyKind;
    // the copies of `DeviceSlice` and the type and constructors of `DeviceBuffer`
    let files = ["src/memory/slice.rs", "src/memory/buffer.rs"];
    let sources: Vec<(&str, String)> = files
        .iter()
        .map(|file| (*file, read(&root().join(file))))
        .collect();
    let mut doc = String::new();
    let mut problems = Vec::new();
    let mut type_docs_state_them = false;
    for (file, line) in sources
        .iter()
        .flat_map(|(file, source)| source.lines().map(move |line| (*file, line.trim())))
    {
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
                if let Some(bytes) = stated_size(text) {
                    found.push(bytes);
                }
            }
            found
        };
        if line.starts_with("pub struct DeviceBuffer<") {
            // "[`to_vec`](..) and [`copy_to_host`](..) from N MiB, ... [`copy_from_host`](..)
            // from M MiB": the two downloads share one threshold, the uploads another
            type_docs_state_them = true;
            if CopyKind::ToNewHost.default_threshold() != CopyKind::ToHost.default_threshold() {
                problems.push(
                    "DeviceBuffer's docs give to_vec and copy_to_host one threshold; the code has two"
                        .to_owned(),
                );
            }
            for (method, kind) in [
                ("copy_to_host", CopyKind::ToHost),
                ("copy_from_host", CopyKind::FromHost),
            ] {
                let claim = format!(
                    "[`{method}`](DeviceSlice::{method}) from {}",
                    size_text(kind.default_threshold())
                );
                if !item.contains(&claim) {
                    problems.push(format!(
                        "DeviceBuffer's docs do not say \"{claim}\" ({kind:?}'s threshold)"
                    ));
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
                "{file}: `{name}`'s docs state a staging threshold, but it is no staged copy"
            ));
            continue;
        };
        for bytes in stated {
            if bytes != kind.default_threshold() {
                problems.push(format!(
                    "{file}: `{name}`'s docs say staged from {}; {kind:?}'s threshold is {}",
                    size_text(bytes),
                    size_text(kind.default_threshold())
                ));
            }
        }
    }
    assert!(type_docs_state_them, "no DeviceBuffer docs found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// Chapter 9, "Reading the compiler's errors": every compile-fail case of the suite is
// listed there, under the section of its first error line.
//
// A section of the chapter is a `## ` heading whose code spans that begin with `error` are
// first lines as the compiler prints them, with `...` standing for any text; the rest of
// the line may be left out, and backticks inside the line are not written (a code span
// cannot hold them). Its cases are the code spans of its "**Produced by.**" paragraph: a
// span ending in `/` names a folder (from the repository's root), and each other span a
// case in the last folder named, without `.rs`.

/// The text of `` `a` and `b` `` as `["a", "b"]`.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Whether `line` (a first error line) matches a section's `pattern`: backticks aside,
/// the pattern's pieces between `...` appear in order, the first at the start.
fn first_line_matches(pattern: &str, line: &str) -> bool {
    let line = line.replace('`', "");
    let mut pieces = pattern.split("...").map(str::trim);
    let Some(first) = pieces.next() else {
        return false;
    };
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    for piece in pieces.filter(|p| !p.is_empty()) {
        let Some(at) = rest.find(piece) else {
            return false;
        };
        rest = &rest[at + piece.len()..];
    }
    true
}

/// The id rustdoc gives a heading (`#errore0597--does-not-live-long-enough`).
fn heading_id(heading: &str) -> String {
    heading
        .replace('`', "")
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_ascii_lowercase())
            } else if c.is_ascii_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// A section of chapter 9: its heading, the page it is on, the first lines it stands
/// for, and its cases.
struct ErrorSection {
    heading: String,
    /// The module whose page has the section (`guide::ch09b_errors_traits`).
    module: String,
    patterns: Vec<String>,
    /// `(case path without .rs, where the guide lists it)`.
    cases: Vec<(String, String)>,
}

/// A link of chapter 9 to one of its sections: the page it names (its own for `(#anchor)`,
/// `guide::MODULE` for `(crate::guide::MODULE#anchor)`), the anchor, and where it is.
struct SectionLink {
    module: String,
    anchor: String,
    at: String,
}

/// The links to sections in a line of a page of `module`: `(#anchor)` and
/// `(crate::guide::MODULE#anchor)`.
fn section_links(line: &str, module: &str, at: &str) -> Vec<SectionLink> {
    let mut links = Vec::new();
    for (i, _) in line.match_indices("](") {
        let target: String = line[i + 2..].chars().take_while(|&c| c != ')').collect();
        let (page, anchor) = if let Some(anchor) = target.strip_prefix('#') {
            (module.to_string(), anchor)
        } else if let Some((page, anchor)) = target
            .strip_prefix("crate::")
            .and_then(|rest| rest.split_once('#'))
            .filter(|(page, _)| page.starts_with("guide::"))
        {
            (page.to_string(), anchor)
        } else {
            continue;
        };
        links.push(SectionLink {
            module: page,
            anchor: anchor.to_string(),
            at: at.to_string(),
        });
    }
    links
}

/// The sections of the chapter "Reading the compiler's errors" (its pages, one file after
/// another), and the links to sections in its text.
fn error_sections() -> (Vec<ErrorSection>, Vec<SectionLink>) {
    let files = guide_files();
    let (first, start) = files
        .iter()
        .enumerate()
        .find_map(|(f, file)| {
            let k = file.text.lines().position(|l| {
                l.starts_with("# ") && l.ends_with(". Reading the compiler's errors")
            })?;
            Some((f, k))
        })
        .expect("docs/guide/ has no chapter \"N. Reading the compiler's errors\"");
    let number = title_number(
        files[first]
            .text
            .lines()
            .nth(start)
            .and_then(|l| l.strip_prefix("# "))
            .unwrap_or(""),
    );
    let mut sections: Vec<ErrorSection> = Vec::new();
    let mut links = Vec::new();
    let mut folder: Option<String> = None;
    let mut produced_by = false;
    'files: for (f, file) in files.iter().enumerate().skip(first) {
        let module = file.module();
        let skip = if f == first { start + 1 } else { 0 };
        let mut in_code = false;
        for (k, line) in file.text.lines().enumerate().skip(skip) {
            let at = file.at(k + 1);
            if line.starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code {
                continue;
            }
            if let Some(title) = line.strip_prefix("# ") {
                // the chapter's next page goes on; another chapter ends it
                if title_number(title) == number && k == 0 && f != first {
                    continue;
                }
                break 'files;
            }
            if let Some(heading) = line.strip_prefix("## ") {
                sections.push(ErrorSection {
                    heading: heading.to_string(),
                    module: module.clone(),
                    patterns: code_spans(heading)
                        .into_iter()
                        .filter(|s| s.starts_with("error"))
                        .map(str::to_string)
                        .collect(),
                    cases: Vec::new(),
                });
                produced_by = false;
                continue;
            }
            links.extend(section_links(line, &module, &at));
            if line.starts_with("**Produced by.**") {
                produced_by = true;
                folder = None;
            } else if line.trim().is_empty() {
                produced_by = false;
            }
            if !produced_by {
                continue;
            }
            let section = sections.last_mut().unwrap_or_else(|| {
                panic!("{at}: a \"Produced by\" paragraph before the chapter's first section")
            });
            for span in code_spans(line) {
                if span.ends_with('/') {
                    assert!(
                        span.starts_with("ui-tests/"),
                        "{at}: `{span}` is no folder of ui-tests/ (name folders from the repository's root)"
                    );
                    folder = Some(span.to_string());
                    continue;
                }
                let folder = folder.as_deref().unwrap_or_else(|| {
                    panic!("{at}: `{span}` comes before any folder (`ui-tests/.../`)")
                });
                section.cases.push((format!("{folder}{span}"), at.clone()));
            }
        }
    }
    (sections, links)
}

/// Every compile-fail case of the suite: each `.rs` under `ui-tests/` outside a `pass`
/// folder (`tests/ui.rs`, `tests/ui_nccl.rs`, `tests/ui_libs.rs`), as its path without `.rs`.
fn compile_fail_cases() -> Vec<String> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let entries =
            fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                if entry.file_name() != "pass" {
                    walk(&path, found);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&root().join("ui-tests"), &mut found);
    let mut cases: Vec<String> = found
        .iter()
        .map(|p| {
            let relative = p.strip_prefix(root()).expect("under the root");
            let relative = relative.to_string_lossy().replace('\\', "/");
            relative.trim_end_matches(".rs").to_string()
        })
        .collect();
    cases.sort();
    cases
}

/// The first line of a case's `.stderr` that begins with `error`.
fn first_error_line(case: &str) -> Result<String, String> {
    let path = root().join(format!("{case}.stderr"));
    let text = fs::read_to_string(&path).map_err(|e| format!("{case}.stderr: {e}"))?;
    text.lines()
        .find(|l| l.starts_with("error"))
        .map(str::to_string)
        .ok_or_else(|| format!("{case}.stderr has no line beginning with `error`"))
}

#[test]
fn every_compile_fail_case_is_indexed_under_its_first_error_line() {
    let (sections, links) = error_sections();
    let cases = compile_fail_cases();
    assert!(
        cases.len() >= 160,
        "found only {} compile-fail cases under ui-tests/",
        cases.len()
    );
    let mut problems = Vec::new();
    let mut listed: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for section in &sections {
        if section.patterns.is_empty() && !section.cases.is_empty() {
            problems.push(format!(
                "\"## {}\" lists cases but its heading has no first line (`error...`)",
                section.heading
            ));
        }
        if !section.patterns.is_empty() && section.cases.is_empty() {
            problems.push(format!(
                "\"## {}\" lists no case (\"**Produced by.**\"): no case of the suite begins with it any more?",
                section.heading
            ));
        }
        for (case, at) in &section.cases {
            listed.entry(case.as_str()).or_default().push(at);
            if !root().join(format!("{case}.rs")).exists() {
                problems.push(format!("{at}: lists {case}, which does not exist"));
                continue;
            }
            match first_error_line(case) {
                Err(e) => problems.push(e),
                Ok(line) => {
                    if !section
                        .patterns
                        .iter()
                        .any(|p| first_line_matches(p, &line))
                    {
                        problems.push(format!(
                            "{at}: {case} is listed under \"## {}\", but its first error line is\n    {line}",
                            section.heading
                        ));
                    }
                }
            }
        }
    }
    for (case, lines) in &listed {
        if lines.len() > 1 {
            problems.push(format!(
                "{case} is listed {} times (at {lines:?}); list it once, under its first error line",
                lines.len()
            ));
        }
    }
    for case in &cases {
        if !listed.contains_key(case.as_str()) {
            let line = first_error_line(case).unwrap_or_else(|e| e);
            problems.push(format!(
                "{case} is not in the guide's chapter \"Reading the compiler's errors\"; list it under the section of its first error line:\n    {line}"
            ));
        }
    }
    // the chapter's index table and its other links lead to its sections, on their pages
    let ids: Vec<(String, String)> = sections
        .iter()
        .map(|s| (s.module.clone(), heading_id(&s.heading)))
        .collect();
    for link in &links {
        if !ids
            .iter()
            .any(|(m, id)| *m == link.module && *id == link.anchor)
        {
            problems.push(format!(
                "{}: the link to {}#{} leads to no section of the chapter (a section on another page is linked as crate::guide::MODULE#anchor)",
                link.at, link.module, link.anchor
            ));
        }
    }
    for (section, (module, id)) in sections.iter().zip(&ids) {
        if !section.patterns.is_empty()
            && !links.iter().any(|l| l.module == *module && l.anchor == *id)
        {
            problems.push(format!(
                "the chapter's index table has no row linking to \"## {}\" ({module}#{id})",
                section.heading
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// The crate's own compiler messages (`#[diagnostic::on_unimplemented]`) end with where the
// rule is explained: `see the guide, chapter N (`cuda_brand::guide`)`, a chapter that names
// the trait, or `see `cuda_brand::MODULE``, a public module that does.

/// One `#[diagnostic::on_unimplemented(...)]` of the crate: where, its message and notes,
/// and the name the rule goes by (the trait, or the one a sealed trait's message names).
struct CrateMessage {
    at: String,
    message: String,
    notes: Vec<String>,
    subject: String,
}

/// The string literals after `key = ` in an attribute's text.
fn attribute_strings(text: &str, key: &str) -> Vec<String> {
    let mut found = Vec::new();
    let marker = format!("{key} = \"");
    let mut rest = text;
    while let Some(at) = rest.find(&marker) {
        let body = &rest[at + marker.len()..];
        let mut value = String::new();
        let mut chars = body.char_indices();
        let mut end = body.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                '"' => {
                    end = i;
                    break;
                }
                c => value.push(c),
            }
        }
        found.push(value);
        rest = &body[end..];
    }
    found
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

fn crate_messages() -> Vec<CrateMessage> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files.sort();
    let mut messages = Vec::new();
    for file in files {
        let source = read(&file);
        let lines: Vec<&str> = source.lines().collect();
        let name = file
            .strip_prefix(root())
            .expect("under the root")
            .display()
            .to_string();
        for (k, line) in lines.iter().enumerate() {
            if !line
                .trim_start()
                .starts_with("#[diagnostic::on_unimplemented(")
            {
                continue;
            }
            let end = (k..lines.len())
                .find(|&j| lines[j].trim() == ")]")
                .unwrap_or_else(|| panic!("{name}:{}: unclosed on_unimplemented", k + 1));
            let text = lines[k..=end].join("\n");
            let message = attribute_strings(&text, "message")
                .pop()
                .unwrap_or_default();
            // the item it is on: the next `trait` line
            let item = lines[end + 1..]
                .iter()
                .find(|l| l.contains("trait "))
                .unwrap_or_else(|| panic!("{name}:{}: on_unimplemented on no trait", k + 1));
            let trait_name: String = item
                .split("trait ")
                .nth(1)
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let sealed = message
                .split_once("cannot implement `")
                .and_then(|(_, rest)| rest.split_once('`'))
                .map(|(name, _)| name.to_string());
            let subject = sealed.unwrap_or_else(|| {
                if item.trim_start().starts_with("pub trait") {
                    trait_name.clone()
                } else {
                    // a private marker's rule: the type its message is about
                    code_spans(&message)
                        .into_iter()
                        .find(|s| !s.contains('{'))
                        .unwrap_or(&trait_name)
                        .to_string()
                }
            });
            messages.push(CrateMessage {
                at: format!("{name}:{}", k + 1),
                message,
                notes: attribute_strings(&text, "note"),
                subject,
            });
        }
    }
    messages
}

/// The text of the public module `cuda_brand::path` (its file), if there is one.
fn public_module_text(path: &str) -> Option<String> {
    let mut file = root().join("src/lib.rs");
    let mut dir = root().join("src");
    for segment in path.split("::") {
        let parent = fs::read_to_string(&file).ok()?;
        if !parent.lines().any(|l| {
            l.trim() == format!("pub mod {segment};") || l.trim() == format!("pub mod {segment} {{")
        }) {
            return None;
        }
        let flat = dir.join(format!("{segment}.rs"));
        file = if flat.exists() {
            flat
        } else {
            dir.join(segment).join("mod.rs")
        };
        dir = dir.join(segment);
    }
    let mut text = fs::read_to_string(&file).ok()?;
    // a folder module: its other files too
    if file.ends_with("mod.rs") {
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for f in files {
            text.push_str(&fs::read_to_string(f).ok()?);
        }
    }
    Some(text)
}

#[test]
fn every_crate_message_ends_with_where_the_rule_is_explained() {
    let messages = crate_messages();
    assert!(
        messages.len() >= 30,
        "found {} #[diagnostic::on_unimplemented] in src/, expected at least 30",
        messages.len()
    );
    let guide = guide_text();
    // each numbered chapter's number and text (a chapter's second page continues it)
    let mut chapters: Vec<(String, String)> = Vec::new();
    let mut current = None;
    for line in guide.lines() {
        if let Some(title) = line.strip_prefix("# ") {
            let number: String = title.chars().take_while(char::is_ascii_digit).collect();
            current = Some(
                chapters
                    .iter()
                    .position(|(n, _)| *n == number)
                    .unwrap_or_else(|| {
                        chapters.push((number, String::new()));
                        chapters.len() - 1
                    }),
            );
            continue;
        }
        if let Some(k) = current {
            let text = &mut chapters[k].1;
            text.push_str(line);
            text.push('\n');
        }
    }
    let mut problems = Vec::new();
    for m in &messages {
        let Some(last) = m.notes.last() else {
            problems.push(format!(
                "{}: \"{}\" has no note; end it with where the rule is explained",
                m.at, m.message
            ));
            continue;
        };
        let subject = format!("`{}`", m.subject);
        if let Some(number) = last
            .strip_prefix("see the guide, chapter ")
            .and_then(|rest| rest.strip_suffix(" (`cuda_brand::guide`)"))
        {
            match chapters.iter().find(|(n, _)| n == number) {
                None => problems.push(format!(
                    "{}: \"{last}\": the guide has no chapter {number}",
                    m.at
                )),
                Some((_, text)) if !text.contains(&subject) => problems.push(format!(
                    "{}: \"{last}\": chapter {number} never names {subject}; point to the chapter that explains it",
                    m.at
                )),
                Some(_) => {}
            }
        } else if let Some(module) = last
            .strip_prefix("see `cuda_brand::")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            match public_module_text(module) {
                None => problems.push(format!(
                    "{}: \"{last}\": cuda_brand::{module} is no public module",
                    m.at
                )),
                Some(text) if !text.contains(&subject) => problems.push(format!(
                    "{}: \"{last}\": cuda_brand::{module} never names {subject}",
                    m.at
                )),
                Some(_) => {}
            }
        } else {
            problems.push(format!(
                "{}: the last note of \"{}\" does not say where the rule is explained: \"{last}\" (end with `see the guide, chapter N (`cuda_brand::guide`)` or `see `cuda_brand::MODULE``)",
                m.at, m.message
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
