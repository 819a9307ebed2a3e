//! The house rules of `src/` (CONTRIBUTING.md, "The house"), read from the code itself:
//!
//! * **Layers import only downward.** Every top-level module of `src/` (a folder or a file)
//!   has a layer in [`LAYERS`]; every `crate::` path in a module (in `use` lines, grouped
//!   `use crate::{a, b::{c, d}}` lines and paths in the code) names a module of a lower
//!   layer, or of its own module. A lower layer never names a higher one, and two modules
//!   of one layer never name each other, so there is no import cycle between modules.
//! * **No import circle inside a folder either.** Among the child modules of a folder (its
//!   files and subfolders), none names another that names it back, directly or around
//!   (a path through `super::`, `self::` or `crate::` to the other module's items); the
//!   folder's `mod.rs` is the folder, which may name its children ([`folder_circles`]).
//! * **Short rooms.** No source file is longer than [`MAX_FILE_LINES`] lines and no function
//!   longer than [`MAX_FN_LINES`].
//! * **Brands are argued where they are.** Every branded `pub struct` (one whose generics name
//!   `'ctx`, or with a field of type `Brand<'_>` or an invariant marker such as
//!   `PhantomData<fn(&'a ()) -> &'a ()>`) has a section "# The brand" in its doc comment with
//!   a `compile_fail` test that names its error code, and a comment on each field that
//!   carries a brand, saying why it is invariant.
//!
//! Each failure names the file, the line and the import or item.
//!
//! The test reads `src/` at run time: where the source is not next to the binary (a test
//! binary copied to the GPU machine), it reports itself as ignored.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};

/// The layers of `src/`, lowest first. A module may name modules of lower layers only
/// (and itself). `lib` is the crate root, which re-exports from every layer.
const LAYERS: &[&[&str]] = &[
    &["error", "span"],
    &["tracker"],
    &["driver"],
    &["context"],
    &["synchronous"],
    &["memory"],
    &["stream"],
    &["launch"],
    &["scope"],
    &["module"],
    &[
        "graph", "nccl", "cublas", "cufft", "curand", "phase", "samples",
    ],
    &["owned"],
    &["lib"],
];

/// The longest a source file may be, in lines.
const MAX_FILE_LINES: usize = 1_000;
/// The longest a function may be, in lines (from its `fn` line to its closing brace).
const MAX_FN_LINES: usize = 100;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The top-level module a file of `src/` belongs to: `src/memory/pool.rs` -> `memory`,
/// `src/phase.rs` -> `phase`, `src/lib.rs` -> `lib`.
fn top_module(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The text of `source` with comments and string literals blanked (kept as spaces, so that
/// line numbers stay), so that paths in docs and messages are not read as imports.
fn code_only(source: &str) -> String {
    let b = source.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
            }
        } else if b[i] == b'"'
            || (b[i] == b'r' && i + 1 < b.len() && matches!(b[i + 1], b'"' | b'#'))
        {
            // a string literal, raw or not: blank it to its end
            let raw = b[i] == b'r';
            let mut hashes = 0;
            out.push(b' ');
            i += 1;
            if raw {
                while i < b.len() && b[i] == b'#' {
                    hashes += 1;
                    out.push(b' ');
                    i += 1;
                }
                if i >= b.len() || b[i] != b'"' {
                    continue; // an identifier starting with r
                }
                out.push(b' ');
                i += 1;
            }
            while i < b.len() {
                if !raw && b[i] == b'\\' {
                    // an escape; a line continuation keeps its line
                    out.push(b' ');
                    out.push(if b.get(i + 1) == Some(&b'\n') {
                        b'\n'
                    } else {
                        b' '
                    });
                    i += 2;
                    continue;
                }
                if b[i] == b'"' && b[i + 1..].iter().take(hashes).all(|&c| c == b'#') {
                    out.extend(std::iter::repeat_n(b' ', 1 + hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                i += 1;
            }
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // a char literal ('a', '\n', '\''): not a lifetime
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' {
                    out.push(b' ');
                    i += 1;
                }
                out.push(b' ');
                i += 1;
            }
            out.push(b' ');
            i += 1;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The first path segment of every `crate::` path in `code`, with its line: `crate::a::b`
/// gives `a`; `crate::{a::b, c}` gives `a` and `c` (nested groups included).
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    resolved_paths(code, &[], &["crate::"])
        .into_iter()
        .map(|(line, path)| (line, path[0].clone()))
        .collect()
}

/// Every import of a module of a layer above or beside the importing module's.
fn upward_imports() -> Result<(), Failed> {
    let mut problems = Vec::new();
    let mut modules: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in rust_files(&src()) {
        let from = top_module(&file);
        modules.entry(from.clone()).or_default();
        let Some(from_layer) = layer_of(&from) else {
            problems.push(format!(
                "{}: module `{from}` has no layer in tests/house.rs's LAYERS",
                file.display()
            ));
            continue;
        };
        let code = code_only(&fs::read_to_string(&file).unwrap());
        for (line, to) in crate_paths(&code) {
            if to == from || to == "self" || to == "super" {
                continue;
            }
            // items of the crate root itself (`crate::Result`, `crate::prelude`, macros)
            // are the root's: only the root may name them from below... except the
            // re-exported names, which are the lower layers' own. Treat the root's names
            // as the root's layer.
            let target = if layer_of(&to).is_some() {
                to.clone()
            } else {
                "lib".into()
            };
            let to_layer = layer_of(&target).unwrap();
            if to_layer >= from_layer && target != from {
                problems.push(format!(
                    "{}:{line}: `{from}` (layer {from_layer}) names `crate::{to}` (module \
                     `{target}`, layer {to_layer}): a layer imports only from the layers below it",
                    file.display()
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} upward or sideways imports:\n{}",
            problems.len(),
            problems.join("\n")
        )
        .into())
    }
}

/// The module path of a file of `src/`: `src/synchronous/book.rs` -> `[synchronous,
/// book]`, `src/synchronous/mod.rs` -> `[synchronous]`, `src/lib.rs` -> `[]`.
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let mut segs: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
        segs.pop();
    }
    segs
}

/// Every path of `code` that starts with one of `prefixes` (`crate::`, `super::`,
/// `self::`), resolved against
/// `here` (the file's module path) to the absolute module path of its first two segments
/// after the prefix (enough to name a sibling module or an item of the parent), with its
/// line: in `synchronous/outside.rs`, `super::book::Book` gives `[synchronous, book,
/// Book]` and `use super::{Book, book::X}` gives `[synchronous, Book]` and
/// `[synchronous, book, X]`. An inline `mod` inside a file is read as the file (its
/// `super::` resolves one level too high): the crate's inline modules are `tests` and
/// `hidden` ones, whose paths name their own file's items.
fn resolved_paths(code: &str, here: &[String], prefixes: &[&str]) -> Vec<(usize, Vec<String>)> {
    let bytes = code.as_bytes();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let boundary = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || matches!(bytes[i - 1], b'_' | b'$' | b':'));
        let start = prefixes.iter().copied().find(|p| rest.starts_with(p));
        let (Some(prefix), true) = (start, boundary) else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        let line = code[..i].matches('\n').count() + 1;
        let mut base: Vec<String> = match prefix {
            "crate::" => Vec::new(),
            "self::" => here.to_vec(),
            _ => here[..here.len().saturating_sub(1)].to_vec(),
        };
        let mut j = i + prefix.len();
        while code[j..].starts_with("super::") {
            base.pop();
            j += "super::".len();
        }
        let tail = &code[j..];
        let mut items: Vec<String> = Vec::new();
        if let Some(group) = tail.strip_prefix('{') {
            // the group's top-level items, each up to its first two segments
            let (mut depth, mut item) = (1, String::new());
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => items.push(std::mem::take(&mut item)),
                    _ if depth == 1 => item.push(c),
                    _ => {}
                }
            }
            items.push(item);
        } else {
            items.push(tail.to_string());
        }
        for item in items {
            let item = item.trim();
            let first = ident(item);
            if first.is_empty() || item[first.len()..].starts_with('!') {
                continue;
            }
            let mut path = base.clone();
            path.push(first.clone());
            if let Some(after) = item[first.len()..].strip_prefix("::") {
                let second = ident(after);
                if !second.is_empty() {
                    path.push(second);
                }
            }
            out.push((line, path));
        }
        i = j.max(i + 1);
    }
    out
}

/// The folders of `src/` (their module paths) with their child modules.
fn folders() -> BTreeMap<Vec<String>, Vec<String>> {
    let mut out: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for file in rust_files(&src()) {
        let path = module_path(&file);
        if let Some((name, parent)) = path.split_last() {
            let children = out.entry(parent.to_vec()).or_default();
            if !children.contains(name) {
                children.push(name.clone());
            }
        }
    }
    out
}

/// Where each child module of a folder names another child (the first place).
type Edges = BTreeMap<(Vec<String>, String), BTreeMap<String, (PathBuf, usize)>>;

/// The import circles among the child modules of each folder: `context/{enter, teardown}`
/// when `enter` names `teardown` and `teardown` names `enter` (a path through `super::`,
/// `self::` or `crate::` to the other module). A folder's `mod.rs` is the folder, not a
/// child: it may name its children, and naming an item of it (a re-export) names the
/// folder.
fn folder_circles() -> Vec<String> {
    let folders = folders();
    let mut edges = Edges::new();
    for file in rust_files(&src()) {
        let here = module_path(&file);
        let code = code_only(&fs::read_to_string(&file).unwrap());
        for (line, path) in resolved_paths(&code, &here, &["crate::", "super::", "self::"]) {
            // every folder above this file in which the file is inside one child and the
            // path names another
            for depth in 0..here.len() {
                let (folder, child) = (&here[..depth], &here[depth]);
                if path.len() <= depth || path[..depth] != *folder || &path[depth] == child {
                    continue;
                }
                let Some(children) = folders.get(folder) else {
                    continue;
                };
                if children.contains(&path[depth]) {
                    edges
                        .entry((folder.to_vec(), child.clone()))
                        .or_default()
                        .entry(path[depth].clone())
                        .or_insert((file.clone(), line));
                }
            }
        }
    }
    let mut circles = Vec::new();
    for (folder, children) in &folders {
        // a circle: a child that reaches itself again (each circle reported from its
        // smallest member, once)
        for start in children {
            let mut seen = vec![start.clone()];
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            while let Some((at, trail)) = stack.pop() {
                let Some(next) = edges.get(&(folder.clone(), at.clone())) else {
                    continue;
                };
                for (to, (file, line)) in next {
                    if to == start && trail.iter().all(|m| m >= start) {
                        let names = trail.join(" -> ");
                        circles.push(format!(
                            "{}/{{{names} -> {start}}} (the last step at {}:{line})",
                            if folder.is_empty() {
                                "src".into()
                            } else {
                                format!("src/{}", folder.join("/"))
                            },
                            file.strip_prefix(src().parent().unwrap())
                                .unwrap_or(file)
                                .display()
                        ));
                    } else if !seen.contains(to) && to > start {
                        seen.push(to.clone());
                        let mut t = trail.clone();
                        t.push(to.clone());
                        stack.push((to.clone(), t));
                    }
                }
            }
        }
    }
    circles.sort();
    circles.dedup();
    circles
}

/// No import circle inside a folder of `src/` ([`folder_circles`]).
fn no_folder_has_an_import_circle() -> Result<(), Failed> {
    let circles = folder_circles();
    if circles.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} import circles inside folders (a child module names another that names it \
             back, directly or around): move what both need into one of them, or into a leaf \
             both may name\n{}",
            circles.len(),
            circles.join("\n")
        )
        .into())
    }
}

/// The image checker (`src/module/image/`, without `params/`, the parameter-count reader)
/// is a leaf: it names nothing of the crate outside itself but `error`, so that it is read,
/// tested and fuzzed alone (`tests/binary_fuzz.rs`).
fn the_image_checker_is_a_leaf() -> Result<(), Failed> {
    let root = src().join("module").join("image");
    let mut problems = Vec::new();
    for file in rust_files(&root) {
        if file.starts_with(root.join("params")) {
            continue;
        }
        let here = module_path(&file);
        let code = code_only(&fs::read_to_string(&file).unwrap());
        for (line, path) in resolved_paths(&code, &here, &["crate::", "super::", "self::"]) {
            let inside = path.len() >= 2 && path[0] == "module" && path[1] == "image";
            let error = path.first().is_some_and(|m| m == "error");
            // `mod.rs` naming its own child modules resolves to [module, image, child]
            if !inside && !error {
                problems.push(format!(
                    "{}:{line}: names {}",
                    file.display(),
                    path.join("::")
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the image checker names the crate outside itself:\n{}",
            problems.join("\n")
        )
        .into())
    }
}

/// Every file over [`MAX_FILE_LINES`] and every function over [`MAX_FN_LINES`].
fn short_rooms() -> Result<(), Failed> {
    let mut problems = Vec::new();
    for file in rust_files(&src()) {
        let source = fs::read_to_string(&file).unwrap();
        let lines = source.lines().count();
        if lines > MAX_FILE_LINES {
            problems.push(format!(
                "{}: {lines} lines (at most {MAX_FILE_LINES})",
                file.display()
            ));
        }
        let code = code_only(&source);
        for (name, start, len) in functions(&code) {
            if len > MAX_FN_LINES {
                problems.push(format!(
                    "{}:{start}: fn {name} has {len} lines (at most {MAX_FN_LINES})",
                    file.display()
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} rooms too long:\n{}",
            problems.len(),
            problems.join("\n")
        )
        .into())
    }
}

/// Every function with a body in `code`: its name, first line and length in lines (its
/// `fn` line to its closing brace).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut search = 0;
    while let Some(found) = code[search..].find("fn ") {
        let at = search + found;
        search = at + 3;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // `fn(` types
        }
        // the body: the first `{` before any `;` at depth 0 of parentheses and brackets
        let mut i = at + 3;
        let mut paren = 0i32;
        let mut body = None;
        while i < bytes.len() {
            match bytes[i] {
                b'(' | b'[' | b'<' => paren += 1,
                b')' | b']' => paren -= 1,
                b'>' if i > 0 && bytes[i - 1] != b'-' && bytes[i - 1] != b'=' => paren -= 1,
                b';' if paren <= 0 => break,
                b'{' if paren <= 0 => {
                    body = Some(i);
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let Some(open) = body else { continue };
        let mut depth = 0;
        let mut close = open;
        for (j, &c) in bytes[open..].iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let start = code[..at].matches('\n').count() + 1;
        let end = code[..close].matches('\n').count() + 1;
        out.push((name, start, end - start + 1));
    }
    out
}

/// Whether a field's type (or a struct's generics) carries a brand: the crate's `Brand`
/// alias, an invariant marker (`fn(&'a ()) -> &'a ()`, `&'a mut &'a ()`), or `'ctx`.
fn carries_brand(code: &str) -> bool {
    code.contains("Brand<")
        || (code.contains("fn(&'") && code.contains(") -> &'"))
        || code.contains("mut &'")
        || code.contains("'ctx")
}

/// The problems of the branded `pub struct`s of one file (see the module documentation):
/// each names the file, the line and the struct.
fn brand_problems(file: &str, source: &str) -> Vec<String> {
    let raw: Vec<&str> = source.lines().collect();
    let code = code_only(source);
    let lines: Vec<&str> = code.lines().collect();
    let mut problems = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("pub struct ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // `pub struct $name` in a macro
        }
        // the generics, up to the body's opening `{` or `(` (or the `;` of a unit struct)
        let from: usize = lines[..i].iter().map(|l| l.len() + 1).sum();
        let Some(open) = code[from..].find(['{', '(', ';']).map(|o| from + o) else {
            continue;
        };
        if code.as_bytes()[open] == b';' {
            continue;
        }
        let generics = &code[from..open];
        // the body, to the matching close
        let mut depth = 0;
        let mut close = open;
        for (j, c) in code[open..].char_indices() {
            match c {
                '{' | '(' => depth += 1,
                '}' | ')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = code[..open].matches('\n').count();
        let last = code[..close].matches('\n').count();
        // the fields that carry a brand, one a line (the first line holds the opening)
        let fields: Vec<usize> = (first..=last)
            .filter(|&j| {
                let part = if j == first {
                    &lines[j][lines[j].find(['{', '(']).unwrap() + 1..]
                } else {
                    lines[j]
                };
                carries_brand(part)
            })
            .collect();
        if !carries_brand(generics) && fields.is_empty() {
            continue;
        }
        let at = format!("{file}:{}: `{name}`", i + 1);
        for &j in &fields {
            let above = raw[j - 1].trim_start();
            if j == first || !(above.starts_with("//")) {
                problems.push(format!(
                    "{file}:{}: a field of `{name}` carries a brand without a comment saying \
                     why it is invariant",
                    j + 1
                ));
            }
        }
        // the doc comment above the struct (and its attributes)
        let mut top = i;
        while top > 0 && {
            let l = raw[top - 1].trim_start();
            l.starts_with("///") || l.starts_with("#[")
        } {
            top -= 1;
        }
        let doc: Vec<&str> = raw[top..i]
            .iter()
            .filter_map(|l| l.trim_start().strip_prefix("///"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect();
        let Some(section) = doc.iter().position(|l| *l == "# The brand") else {
            problems.push(format!(
                "{at} is branded, and its docs have no \"# The brand\""
            ));
            continue;
        };
        // a `compile_fail` test with an error code before the next heading
        let mut fence = false;
        let mut tested = false;
        for l in &doc[section + 1..] {
            if l.starts_with("```") {
                tested |= !fence && l.starts_with("```compile_fail,E");
                fence = !fence;
            } else if !fence && l.starts_with("# ") {
                break;
            }
        }
        if !tested {
            problems.push(format!(
                "{at}: its \"# The brand\" has no `compile_fail,E....` test (with the error code)"
            ));
        }
    }
    problems
}

/// Every problem of [`brand_problems`] in `src/`, and the branded types found (a check that
/// the reader still finds them).
fn brands_are_argued() -> Result<(), Failed> {
    let mut problems = Vec::new();
    let mut branded = 0;
    for file in rust_files(&src()) {
        let source = fs::read_to_string(&file).unwrap();
        let name = file.display().to_string();
        problems.extend(brand_problems(&name, &source));
        branded += source.matches("\n/// # The brand\n").count();
    }
    // ContextGuard, SharedContext, Stream, Event, DeviceBuffer, ... (33 with NCCL's)
    if branded < 30 {
        problems.push(format!(
            "only {branded} \"# The brand\" sections found in src/: has the reader lost them?"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} branded types without their argument:\n{}",
            problems.len(),
            problems.join("\n")
        )
        .into())
    }
}

fn self_test() -> Result<(), Failed> {
    let code = code_only(
        "use crate::{a::{b, c}, d};\n// crate::e\nlet s = \"crate::f\"; let r = r#\"crate::g\"#;\n\
         let c = '\"'; crate::h::i(); $crate::k; crate::m!(x);\n",
    );
    let names: Vec<String> = crate_paths(&code).into_iter().map(|(_, n)| n).collect();
    if names != ["a", "d", "h"] {
        return Err(format!("crate_paths read {names:?}, not [a, d, h]").into());
    }
    let here: Vec<String> = ["context", "order", "book"].map(String::from).to_vec();
    let paths: Vec<Vec<String>> = resolved_paths(
        &code_only(
            "use super::{access::X, Book};\nuse super::super::enter::f;\ncrate::memory::Span;\n",
        ),
        &here,
        &["crate::", "super::", "self::"],
    )
    .into_iter()
    .map(|(_, p)| p)
    .collect();
    let want: Vec<Vec<String>> = [
        &["context", "order", "access", "X"][..],
        &["context", "order", "Book"],
        &["context", "enter", "f"],
        &["memory", "Span"],
    ]
    .iter()
    .map(|p| p.iter().map(|s| s.to_string()).collect())
    .collect();
    if paths != want {
        return Err(format!("resolved_paths read {paths:?}, not {want:?}").into());
    }
    let fns = functions(&code_only(
        "fn a() {\n    if x { y }\n}\nfn b(f: fn(u8) -> u8) -> Vec<u8> where T: Fn() {\n}\n",
    ));
    let want = vec![("a".to_string(), 1, 3), ("b".to_string(), 4, 2)];
    if fns != want {
        return Err(format!("functions read {fns:?}, not {want:?}").into());
    }
    let argued = "/// A thing.\n///\n/// # The brand\n///\n/// ```compile_fail,E0521\n/// x\n/// ```\n\
                  #[derive(Clone)]\npub struct A<'ctx> {\n    // why\n    _brand: Brand<'ctx>,\n}\n";
    let bare = "/// A thing.\n///\n/// ```compile_fail\n/// x\n/// ```\npub struct B<'s>(\n    \
                PhantomData<fn(&'s ()) -> &'s ()>,\n);\npub struct C<'a> {\n    x: &'a u8,\n}\n";
    let found = (brand_problems("a.rs", argued), brand_problems("b.rs", bare));
    if !found.0.is_empty() || found.1.len() != 2 || !found.1[0].starts_with("b.rs:7:") {
        return Err(format!("brand_problems read {found:?}").into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let here = src().is_dir();
    let trial = |name: &'static str, f: fn() -> Result<(), Failed>| {
        Trial::test(name, f).with_ignored_flag(!here)
    };
    let tests = vec![
        Trial::test("the_checker_reads_paths_functions_and_brands", self_test),
        trial("layers_import_only_from_the_layers_below", upward_imports),
        trial("no_file_or_function_is_too_long", short_rooms),
        trial(
            "no_folder_has_an_import_circle",
            no_folder_has_an_import_circle,
        ),
        trial("the_image_checker_is_a_leaf", the_image_checker_is_a_leaf),
        trial(
            "every_branded_type_argues_its_invariance",
            brands_are_argued,
        ),
    ];
    libtest_mimic::run(&args, tests).exit_code()
}
