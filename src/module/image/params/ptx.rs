//! Kernel parameter lists from PTX text: the `.entry name(.param ..., .param ...)`
//! signatures, read by a small lexer.

use super::{MAX_PARAM_BYTES, ParamList, ParamTable};

/// A token of PTX text: a word (letters, digits, `_`, `$`, `%` and `.`), or one other
/// byte. Comments and white space separate tokens; a string literal is one `"` token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a [u8]),
    Punct(u8),
}

struct Lexer<'a> {
    b: &'a [u8],
    p: usize,
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'%' | b'.')
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Tok<'a>;

    fn next(&mut self) -> Option<Tok<'a>> {
        loop {
            let b = self.b;
            while b.get(self.p).is_some_and(|c| c.is_ascii_whitespace()) {
                self.p += 1;
            }
            let c = *b.get(self.p)?;
            let next = b.get(self.p + 1).copied();
            if c == b'/' && next == Some(b'/') {
                self.p = match b[self.p..].iter().position(|&c| c == b'\n') {
                    Some(n) => self.p + n + 1,
                    None => b.len(),
                };
                continue;
            }
            if c == b'/' && next == Some(b'*') {
                let rest = &b[self.p + 2..];
                self.p = match rest.windows(2).position(|w| w == b"*/") {
                    Some(n) => self.p + 2 + n + 2,
                    None => b.len(),
                };
                continue;
            }
            if c == b'"' {
                let mut q = self.p + 1;
                while let Some(&d) = b.get(q) {
                    q += match d {
                        b'\\' => 2,
                        b'"' => break,
                        _ => 1,
                    };
                }
                self.p = q.saturating_add(1).min(b.len());
                return Some(Tok::Punct(b'"'));
            }
            if is_word_byte(c) {
                let start = self.p;
                while b.get(self.p).is_some_and(|&c| is_word_byte(c)) {
                    self.p += 1;
                }
                return Some(Tok::Word(&b[start..self.p]));
            }
            self.p += 1;
            return Some(Tok::Punct(c));
        }
    }
}

/// A PTX identifier: `[A-Za-z][A-Za-z0-9_$]*` or `[_$%][A-Za-z0-9_$]+`.
fn is_identifier(w: &[u8]) -> bool {
    let rest_ok = |r: &[u8]| {
        r.iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$')
    };
    match w.split_first() {
        Some((&c, rest)) if c.is_ascii_alphabetic() => rest_ok(rest),
        Some((b'_' | b'$' | b'%', rest)) => !rest.is_empty() && rest_ok(rest),
        _ => false,
    }
}

/// A decimal or `0x` hexadecimal integer.
fn number(w: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(w).ok()?;
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => usize::from_str_radix(hex, 16).ok(),
        None if text.bytes().all(|c| c.is_ascii_digit()) => text.parse().ok(),
        None => None,
    }
}

/// The size in bytes of a PTX fundamental type allowed for a kernel parameter.
fn type_size(t: &[u8]) -> Option<usize> {
    Some(match t {
        b"b8" | b"s8" | b"u8" => 1,
        b"b16" | b"s16" | b"u16" | b"f16" | b"bf16" => 2,
        b"b32" | b"s32" | b"u32" | b"f32" | b"f16x2" | b"bf16x2" => 4,
        b"b64" | b"s64" | b"u64" | b"f64" => 8,
        b"b128" => 16,
        _ => return None,
    })
}

/// At most this many tokens in one parameter declaration; a longer one is not understood.
const MAX_PARAM_TOKENS: usize = 64;

/// What one `.param` declaration of a kernel's list says: `Err` if it is not a parameter
/// declaration as read here (the kernel then has no list), `Ok(None)` for a parameter
/// whose size is not known here, else its size and alignment.
fn ptx_param(item: &[Tok<'_>]) -> Result<Option<(usize, usize)>, ()> {
    // Atoms: directive parts (`.ptr.global` is two), other words, punctuation.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Atom<'a> {
        Dir(&'a [u8]),
        Word(&'a [u8]),
        Punct(u8),
    }
    let mut atoms = Vec::with_capacity(item.len() + 4);
    for t in item {
        match *t {
            Tok::Word(w) if w.first() == Some(&b'.') => atoms.extend(
                w.split(|&c| c == b'.')
                    .filter(|p| !p.is_empty())
                    .map(Atom::Dir),
            ),
            Tok::Word(w) => atoms.push(Atom::Word(w)),
            Tok::Punct(c) => atoms.push(Atom::Punct(c)),
        }
    }
    let mut a = atoms.into_iter().peekable();
    if a.next() != Some(Atom::Dir(b"param")) {
        return Err(());
    }
    let (mut known, mut ptr) = (true, false);
    let (mut align, mut elem) = (None, None);
    loop {
        match a.next() {
            Some(Atom::Dir(b"align")) => {
                let Some(Atom::Word(n)) = a.next() else {
                    return Err(());
                };
                let n = number(n).filter(|n| n.is_power_of_two()).ok_or(())?;
                if !ptr {
                    align = Some(n);
                }
            }
            Some(Atom::Dir(b"ptr")) => ptr = true,
            Some(Atom::Dir(b"global" | b"const" | b"local" | b"shared")) if ptr => {}
            Some(Atom::Dir(t)) => match type_size(t) {
                Some(size) if elem.is_none() => elem = Some(size),
                _ => known = false,
            },
            Some(Atom::Word(w)) if is_identifier(w) => break,
            _ => return Err(()),
        }
    }
    let mut count = 1usize;
    while let Some(atom) = a.next() {
        let dim = match (atom, a.next(), a.next()) {
            (Atom::Punct(b'['), Some(Atom::Word(n)), Some(Atom::Punct(b']'))) => number(n),
            _ => None,
        };
        match dim.and_then(|d| count.checked_mul(d)) {
            Some(c) if c > 0 => count = c,
            _ => {
                known = false;
                break;
            }
        }
    }
    let Some(elem) = elem.filter(|_| known) else {
        return Ok(None);
    };
    let size = elem.checked_mul(count).filter(|&s| s <= MAX_PARAM_BYTES);
    Ok(size.map(|size| (size, align.unwrap_or(elem))))
}

/// Every `.entry` of PTX text, into `table`; none if the text has a preprocessor directive
/// (a `#` outside comments and strings: PTX has no other use for one), which makes the
/// whole table opaque.
pub(super) fn ptx_entries(text: &[u8], table: &mut ParamTable) {
    if (Lexer { b: text, p: 0 }).any(|t| t == Tok::Punct(b'#')) {
        table.make_opaque();
        return;
    }
    let mut lx = Lexer { b: text, p: 0 }.peekable();
    while let Some(t) = lx.next() {
        if t != Tok::Word(b".entry") {
            continue;
        }
        let Some(Tok::Word(name)) = lx.next() else {
            continue;
        };
        if !is_identifier(name) {
            continue;
        }
        match lx.peek() {
            Some(Tok::Punct(b'(')) => {
                lx.next();
            }
            // no parameter list: a body or a performance directive follows
            Some(Tok::Punct(b'{')) => {
                table.add(name, empty_list());
                continue;
            }
            Some(Tok::Word(w)) if w.first() == Some(&b'.') && *w != b".entry" => {
                table.add(name, empty_list());
                continue;
            }
            _ => {
                table.unknown(name);
                continue;
            }
        }
        match ptx_list(&mut lx) {
            Some(list) => table.add(name, list),
            None => table.unknown(name),
        }
    }
}

fn empty_list() -> ParamList {
    ParamList {
        count: 0,
        layout: Some(Vec::new()),
    }
}

/// A kernel's parameter list, read up to its closing `)`; `None` if it is not understood.
fn ptx_list<'a>(lx: &mut impl Iterator<Item = Tok<'a>>) -> Option<ParamList> {
    let mut params: Vec<Option<(usize, usize)>> = Vec::new();
    let mut item: Vec<Tok<'a>> = Vec::new();
    let mut ok = true;
    let mut finish = |item: &mut Vec<Tok<'a>>, ok: &mut bool| {
        if item.len() > MAX_PARAM_TOKENS {
            *ok = false;
        }
        match ptx_param(item) {
            Ok(p) if *ok => params.push(p),
            _ => *ok = false,
        }
        item.clear();
    };
    let mut empty = true;
    loop {
        match lx.next()? {
            Tok::Punct(b')') => {
                if !empty {
                    finish(&mut item, &mut ok);
                }
                break;
            }
            Tok::Punct(b',') => {
                finish(&mut item, &mut ok);
            }
            Tok::Punct(b'(' | b'{' | b'}' | b';' | b'"') => ok = false,
            t => {
                empty = false;
                if item.len() <= MAX_PARAM_TOKENS {
                    item.push(t);
                }
            }
        }
    }
    if !ok {
        return None;
    }
    let count = params.len();
    let layout = params
        .into_iter()
        .try_fold((0usize, Vec::with_capacity(count)), |(end, mut v), p| {
            let (size, align) = p?;
            let offset = end.checked_next_multiple_of(align)?;
            let end = offset.checked_add(size).filter(|&e| e <= MAX_PARAM_BYTES)?;
            v.push((offset, size));
            Some((end, v))
        })
        .map(|(_, v)| v);
    Some(ParamList { count, layout })
}
