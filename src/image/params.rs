//! The C parameter list of each kernel, read from the image a module or library was loaded
//! from: what lets the declaration check ask the driver only about parameters a kernel has.
//!
//! `cuFuncGetParamInfo` (CUDA 12.4) reports one parameter per call and answers
//! `CUDA_ERROR_INVALID_VALUE` past the last one; `cuFuncGetParamCount`, which says how many
//! there are, came only with CUDA 13.2. Finding the end by asking one index too far is an
//! API error that compute-sanitizer reports, once per declaration. So on the drivers in
//! between, the count comes from the image itself:
//!
//! - **PTX**: the `.entry name(.param ..., .param ...)` signature. Each `.param` is one C
//!   parameter; its size and alignment follow from its type (`.u64`, `.f32`, `.b8`, ...),
//!   an explicit `.align N` (not the pointee's alignment after `.ptr`), and array
//!   dimensions (`.param .align 8 .b8 s[16]`, a struct passed by value). An entry without a
//!   list (`.entry k {`) has none. Text with a preprocessor directive (`#define`, `#if`),
//!   which ptxas expands and this reader does not, gives no kernel a list.
//! - **Cubin**: the `.nv.info.<kernel>` section's `EIATTR_KPARAM_INFO` records, one per
//!   parameter (ordinal, offset, size), with `EIATTR_CBANK_PARAM_SIZE` or
//!   `EIATTR_PARAM_CBANK` giving the parameter space; a kernel with no parameter record has
//!   none only where that space is present and 0. The records count only where the
//!   kernel's symbol and code agree as nvcc writes them (the symbol in `.text.<kernel>`,
//!   whose `sh_info` names it and no other code does): the driver finds a kernel's records
//!   through its symbol, not through the records' section name.
//! - **Fatbin**: every entry the crate can read (uncompressed cubins and PTX); entries that
//!   disagree about a kernel leave it without a count.
//!
//! The text and bytes come from users (and from the fuzz runs): every read is
//! bounds-checked, arithmetic is checked, and anything not understood leaves that kernel
//! (or the image) without a table, never a panic. A kernel without a table is declared as
//! before: the driver is asked until it says there is no further parameter.

use std::collections::BTreeMap;

use super::{
    ELF_MAGIC, EM_CUDA, FATBIN_ELF, FATBIN_FLAG_COMPRESS, FATBIN_MAGIC, FATBIN_PTX, Record,
    SHT_CUDA_INFO, c_str, le, walk_records, words,
};

/// One kernel's C parameters as its image declares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamList {
    /// How many C parameters the kernel takes.
    pub(crate) count: usize,
    /// The offset and size in bytes of each, in order, where the image says them (a
    /// cubin) or they follow from the declared types (PTX of types known here).
    pub(crate) layout: Option<Vec<(usize, usize)>>,
}

impl ParamList {
    /// Where the last parameter ends (0 for none), where the layout is known.
    pub(crate) fn bytes(&self) -> Option<usize> {
        let layout = self.layout.as_ref()?;
        Some(layout.last().map_or(0, |&(offset, size)| offset + size))
    }
}

/// The parameter lists of every kernel an image declares, by name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ParamTable {
    /// `None` where two entries of the image declare the kernel differently.
    kernels: BTreeMap<Box<[u8]>, Option<ParamList>>,
    /// The image holds PTX with preprocessor directives (`#define`, `#if`, `#include`):
    /// ptxas expands them before it reads a signature, this reader does not, so the text
    /// may declare other kernels and parameters than it reads as here (a list hidden
    /// behind `#if 0`, a parameter or a whole `.entry` made by a macro). No kernel of the
    /// image then has a list.
    opaque: bool,
}

impl ParamTable {
    /// The kernels of PTX text.
    pub(crate) fn from_ptx(text: &str) -> ParamTable {
        let mut table = ParamTable::default();
        ptx_entries(text.as_bytes(), &mut table);
        table
    }

    /// The kernels of a cubin or fatbin image; empty for anything else or anything that
    /// cannot be read.
    pub(crate) fn from_image(image: &[u8]) -> ParamTable {
        let mut table = ParamTable::default();
        match image.get(..4) {
            Some(m) if m == ELF_MAGIC => elf_entries(image, &mut table),
            Some(m) if m == FATBIN_MAGIC => fatbin_entries(image, &mut table),
            _ => {}
        }
        table
    }

    /// The parameter list of kernel `name`, where the image declares it (consistently).
    pub(crate) fn get(&self, name: &[u8]) -> Option<&ParamList> {
        if self.opaque {
            return None;
        }
        self.kernels.get(name)?.as_ref()
    }

    /// Whether no kernel has a parameter list here.
    pub(crate) fn is_empty(&self) -> bool {
        self.opaque || self.kernels.values().all(Option::is_none)
    }

    /// Every kernel with its parameter list, by name.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &ParamList)> {
        self.kernels
            .iter()
            .filter(|_| !self.opaque)
            .filter_map(|(name, list)| Some((&**name, list.as_ref()?)))
    }

    fn add(&mut self, name: &[u8], list: ParamList) {
        match self.kernels.get_mut(name) {
            None => {
                self.kernels.insert(name.into(), Some(list));
            }
            Some(slot) => *slot = slot.take().and_then(|old| agree(old, list)),
        }
    }

    /// Marks `name` as declared in a way not understood here: no list for it, even where
    /// another entry of the image has one (the driver may load either).
    fn unknown(&mut self, name: &[u8]) {
        self.kernels.insert(name.into(), None);
    }
}

/// One list for a kernel that two entries declare, or `None` if they differ.
fn agree(a: ParamList, b: ParamList) -> Option<ParamList> {
    if a.count != b.count {
        return None;
    }
    match (a.layout, b.layout) {
        (Some(x), Some(y)) if x != y => None,
        (Some(x), _) | (None, Some(x)) => Some(ParamList {
            count: a.count,
            layout: Some(x),
        }),
        (None, None) => Some(ParamList {
            count: a.count,
            layout: None,
        }),
    }
}

/// The largest parameter space a kernel can have (CUDA 12.1 on Volta or newer: 32 764
/// bytes); anything larger is not a kernel signature.
const MAX_PARAM_BYTES: usize = 32_764;

// ---------------------------------------------------------------------------------------
// PTX

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
fn ptx_entries(text: &[u8], table: &mut ParamTable) {
    if (Lexer { b: text, p: 0 }).any(|t| t == Tok::Punct(b'#')) {
        table.opaque = true;
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

// ---------------------------------------------------------------------------------------
// Cubin

/// `EIATTR_KPARAM_INFO`: one parameter's ordinal, offset and size.
const EIATTR_KPARAM_INFO: u8 = 0x17;
/// `EIATTR_PARAM_CBANK`: the parameter constant bank's symbol, offset and size.
const EIATTR_PARAM_CBANK: u8 = 0x0a;
/// `EIATTR_CBANK_PARAM_SIZE`: the parameter space's size.
const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
/// `EIATTR_KPARAM_INFO_V2`: a newer parameter record, not read here.
const EIATTR_KPARAM_INFO_V2: u8 = 0x45;

/// Every kernel's parameters from a cubin's `.nv.info.<kernel>` sections, into `table`.
/// Reads only the ELF header, the section headers, their names and those sections, each
/// bounds-checked; an image that does not hold together adds nothing.
fn elf_entries(b: &[u8], table: &mut ParamTable) {
    let field = |at: usize, n: usize| -> Option<u64> {
        let bytes = b.get(at..at.checked_add(n)?)?;
        Some(bytes.iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x)))
    };
    let header = (|| {
        if b.get(4..6)? != [2, 1] || field(18, 2)? != u64::from(EM_CUDA) || field(58, 2)? != 64 {
            return None;
        }
        Some((
            usize::try_from(field(40, 8)?).ok()?,
            field(60, 2)? as usize,
            field(62, 2)? as usize,
        ))
    })();
    let Some((shoff, shnum, shstrndx)) = header else {
        return;
    };
    // (name, type, offset, size) of section `i`
    let section = |i: usize| -> Option<(u64, u32, u64, u64)> {
        let at = shoff.checked_add(i.checked_mul(64)?)?;
        Some((
            field(at, 4)?,
            field(at + 4, 4)? as u32,
            field(at + 24, 8)?,
            field(at + 32, 8)?,
        ))
    };
    let bytes_of = |off: u64, size: u64| -> Option<&[u8]> {
        let start = usize::try_from(off).ok()?;
        b.get(start..start.checked_add(usize::try_from(size).ok()?)?)
    };
    let Some(names) = section(shstrndx).and_then(|(_, _, off, size)| bytes_of(off, size)) else {
        return;
    };
    let header = |i: usize| -> Option<SectionAt> {
        if i >= shnum {
            return None;
        }
        let at = shoff.checked_add(i.checked_mul(64)?)?;
        Some(SectionAt {
            name: field(at, 4)?,
            typ: field(at + 4, 4)? as u32,
            offset: field(at + 24, 8)?,
            size: field(at + 32, 8)?,
            link: field(at + 40, 4)?,
            info: field(at + 44, 4)?,
        })
    };
    let kernels = Kernels::index(&header, &bytes_of, names, shnum);
    for i in 1..shnum {
        let Some((name, typ, off, size)) = section(i) else {
            return;
        };
        if typ != SHT_CUDA_INFO {
            continue;
        }
        let name = usize::try_from(name).ok().and_then(|n| c_str(names, n));
        let Some(kernel) = name.and_then(|n| n.strip_prefix(b".nv.info.")) else {
            continue;
        };
        if kernel.is_empty() {
            continue;
        }
        let code = header(i).and_then(|h| usize::try_from(h.info).ok());
        let list = bytes_of(off, size)
            .and_then(nv_info_params)
            .filter(|_| code.is_some_and(|t| kernels.code_is(t, kernel)));
        match list {
            Some(list) => table.add(kernel, list),
            None => table.unknown(kernel),
        }
    }
}

/// A section header's fields, as [`Kernels::index`] reads them.
struct SectionAt {
    name: u64,
    typ: u32,
    offset: u64,
    size: u64,
    link: u64,
    info: u64,
}

/// Which code is which kernel's, as the driver finds a kernel: by its symbol, then the
/// records of the code that symbol lies in. Read once per image (linear in its sections
/// and symbols).
struct Kernels<'a> {
    /// Each `.text.<name>` section: its index, and the symbol its `sh_info` names (`None`
    /// for a name two sections have).
    code: BTreeMap<&'a [u8], Option<(usize, usize)>>,
    /// How many code sections name each symbol as their function.
    named: BTreeMap<usize, usize>,
    /// Each symbol name (but section symbols'): the sections its symbols lie in, and the
    /// indices of its function symbols. `None` once a name's symbols lie in two sections.
    symbols: BTreeMap<&'a [u8], Option<(usize, Vec<usize>)>>,
}

impl<'a> Kernels<'a> {
    fn index(
        header: &dyn Fn(usize) -> Option<SectionAt>,
        bytes_of: &dyn Fn(u64, u64) -> Option<&'a [u8]>,
        names: &'a [u8],
        shnum: usize,
    ) -> Kernels<'a> {
        const SHT_SYMTAB: u32 = 2;
        const STT_FUNC: u8 = 2;
        const STT_SECTION: u8 = 3;
        let mut k = Kernels {
            code: BTreeMap::new(),
            named: BTreeMap::new(),
            symbols: BTreeMap::new(),
        };
        let mut symtab = None;
        for i in 1..shnum {
            let Some(h) = header(i) else { break };
            let name = usize::try_from(h.name).ok().and_then(|n| c_str(names, n));
            if let Some(kernel) = name.and_then(|n| n.strip_prefix(b".text.")) {
                let function = (h.info & 0x00ff_ffff) as usize;
                let seen = k.code.insert(kernel, Some((i, function))).is_some();
                if seen {
                    k.code.insert(kernel, None);
                }
                *k.named.entry(function).or_default() += 1;
            }
            if h.typ == SHT_SYMTAB {
                // a cubin has one symbol table; with two, no kernel is known here
                symtab = if symtab.is_none() {
                    Some(Some(h))
                } else {
                    Some(None)
                };
            }
        }
        let Some(Some(symtab)) = symtab else {
            k.code.clear();
            return k;
        };
        let strings = usize::try_from(symtab.link)
            .ok()
            .and_then(header)
            .and_then(|s| bytes_of(s.offset, s.size));
        let (Some(symbols), Some(strings)) = (bytes_of(symtab.offset, symtab.size), strings) else {
            k.code.clear();
            return k;
        };
        for (n, sym) in symbols.chunks_exact(24).enumerate() {
            let name = u32::from_le_bytes([sym[0], sym[1], sym[2], sym[3]]) as usize;
            let (typ, shndx) = (
                sym[4] & 0xf,
                usize::from(u16::from_le_bytes([sym[6], sym[7]])),
            );
            let Some(name) = c_str(strings, name).filter(|_| typ != STT_SECTION) else {
                continue;
            };
            let entry = k
                .symbols
                .entry(name)
                .or_insert_with(|| Some((shndx, Vec::new())));
            match entry {
                Some((at, functions)) if *at == shndx => {
                    if typ == STT_FUNC {
                        functions.push(n);
                    }
                }
                _ => *entry = None,
            }
        }
        k
    }

    /// Whether section `text` (which `.nv.info.<kernel>` names in `sh_info`) is the code of
    /// the function symbol `kernel`: it is `.text.<kernel>`, its `sh_info` names a function
    /// symbol called `kernel`, every symbol called `kernel` (but section symbols) lies in
    /// it, and no other code names that symbol, as nvcc writes them. An image that moved
    /// the symbol into another kernel's code, or pointed the code at another kernel's
    /// symbol, would otherwise give `kernel` one kernel's records here and another's layout
    /// in the driver: a count that a declaration one parameter short could pass.
    fn code_is(&self, text: usize, kernel: &[u8]) -> bool {
        let Some(&Some((at, function))) = self.code.get(kernel) else {
            return false;
        };
        let Some(Some((lies_in, functions))) = self.symbols.get(kernel) else {
            return false;
        };
        at == text
            && *lies_in == text
            && functions.contains(&function)
            && self.named.get(&function) == Some(&1)
    }
}

/// The parameters a kernel's `.nv.info.<kernel>` records describe, or `None` if they do
/// not add up to a list (ordinals `0..n` once each, in order of offset, inside the
/// parameter space, no newer record format).
fn nv_info_params(data: &[u8]) -> Option<ParamList> {
    let mut params: Vec<(u32, usize, usize)> = Vec::new();
    let mut space: Option<usize> = None;
    let mut unknown = false;
    walk_records(data, "", |_, fmt, attr, record| {
        match (attr, record) {
            (EIATTR_KPARAM_INFO, Record::Payload(p)) if fmt == 4 => {
                let w: Vec<u32> = words(p).collect();
                match w[..] {
                    [_, ordinal_offset, flags] => params.push((
                        ordinal_offset & 0xffff,
                        (ordinal_offset >> 16) as usize,
                        (flags >> 18) as usize,
                    )),
                    _ => unknown = true,
                }
            }
            (EIATTR_CBANK_PARAM_SIZE, Record::Value(v)) => {
                let v = usize::from(v);
                unknown |= space.replace(v).is_some_and(|s| s != v);
            }
            (EIATTR_PARAM_CBANK, Record::Payload(p)) if fmt == 4 => match le::<4>(p, 4) {
                Some(w) => {
                    let v = (u32::from_le_bytes(w) >> 16) as usize;
                    unknown |= space.replace(v).is_some_and(|s| s != v);
                }
                None => unknown = true,
            },
            (EIATTR_KPARAM_INFO | EIATTR_PARAM_CBANK | EIATTR_KPARAM_INFO_V2, _) => unknown = true,
            _ => {}
        }
        Ok(())
    })
    .ok()?;
    if unknown {
        return None;
    }
    params.sort_unstable_by_key(|&(ordinal, _, _)| ordinal);
    let mut end = 0usize;
    for (i, &(ordinal, offset, size)) in params.iter().enumerate() {
        if ordinal as usize != i || offset < end || size == 0 {
            return None;
        }
        end = offset + size;
    }
    match space {
        Some(space) if end <= space && space <= MAX_PARAM_BYTES => {}
        // no parameter space named: a list only if it is non-empty (the records say it)
        None if !params.is_empty() && end <= MAX_PARAM_BYTES => {}
        _ => return None,
    }
    Some(ParamList {
        count: params.len(),
        layout: Some(params.iter().map(|&(_, o, s)| (o, s)).collect()),
    })
}

// ---------------------------------------------------------------------------------------
// Fatbin

/// Every uncompressed entry of a fatbin (see the module docs of `image`), into `table`;
/// walks the entries with every offset checked, stopping at the first that does not fit.
fn fatbin_entries(b: &[u8], table: &mut ParamTable) {
    let field = |at: usize, n: usize| -> Option<u64> {
        let bytes = b.get(at..at.checked_add(n)?)?;
        Some(bytes.iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x)))
    };
    let Some((header, size)) = field(6, 2).zip(field(8, 8)) else {
        return;
    };
    let end = usize::try_from(size)
        .ok()
        .and_then(|s| s.checked_add(header as usize))
        .filter(|&e| header >= 16 && e <= b.len());
    let Some(end) = end else {
        return;
    };
    let mut p = header as usize;
    while p < end {
        let entry = (|| {
            let kind = field(p, 2)? as u16;
            let hsize = usize::try_from(field(p + 4, 4)?).ok()?;
            let psize = usize::try_from(field(p + 8, 8)?).ok()?;
            let compressed = field(p + 16, 4)? != 0
                || field(p + 40, 8)? & FATBIN_FLAG_COMPRESS != 0
                || field(p + 56, 8)? != 0;
            let start = p.checked_add(hsize).filter(|_| hsize >= 64)?;
            let stop = start.checked_add(psize).filter(|&s| s <= end)?;
            Some((kind, compressed, start..stop))
        })();
        let Some((kind, compressed, payload)) = entry else {
            return;
        };
        p = payload.end;
        if compressed {
            continue;
        }
        let body = &b[payload];
        match kind {
            FATBIN_ELF => elf_entries(body, table),
            FATBIN_PTX => {
                let text = body.split(|&c| c == 0).next().unwrap_or_default();
                ptx_entries(text, table);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = include_str!("../../kernels/kernels.ptx");
    const CUBIN: &[u8] = include_bytes!("../../kernels/kernels_sm90.cubin");
    const FATBIN: &[u8] = include_bytes!("../../kernels/kernels.fatbin");
    const DERIVE_PTX: &str = include_str!("../../kernels/derive.ptx");
    const LAUNCH_EX_PTX: &str = include_str!("../../kernels/launch_ex_sm90.ptx");
    const DEADLINE_PTX: &str = include_str!("../../tests/kernels/deadline.ptx");
    const GRAPHS_PTX: &str = include_str!("../../tests/kernels/graphs.ptx");

    /// A pointer or `size_t` at each of `n` slots from `from`, 8 bytes each.
    fn words8(n: usize) -> Vec<(usize, usize)> {
        (0..n).map(|i| (8 * i, 8)).collect()
    }

    /// The kernels of `kernels/kernels.cu`, from their C signatures by hand.
    fn kernels_cu() -> Vec<(&'static str, Vec<(usize, usize)>)> {
        vec![
            // bump(int by)
            ("bump", vec![(0, 4)]),
            // empty(float *p, size_t p_len)
            ("empty", words8(2)),
            // empty8(float*, size_t, float*, size_t, const float*, size_t, const float*, size_t)
            ("empty8", words8(8)),
            // scale(float *x, size_t x_len, float k)
            ("scale", vec![(0, 8), (8, 8), (16, 4)]),
            // spin(long long cycles)
            ("spin", vec![(0, 8)]),
            // sum_u64(const unsigned *in, size_t in_len, unsigned long long *out, size_t out_len)
            ("sum_u64", words8(4)),
            // vector_add(const float*, size_t, const float*, size_t, float*, size_t)
            ("vector_add", words8(6)),
            // write_wild(float *p, size_t p_len)
            ("write_wild", words8(2)),
        ]
    }

    /// A kernel's name, count and layout, as the tests compare them.
    type Row = (String, usize, Option<Vec<(usize, usize)>>);

    fn table(t: &ParamTable) -> Vec<Row> {
        t.iter()
            .map(|(name, l)| {
                (
                    String::from_utf8_lossy(name).into_owned(),
                    l.count,
                    l.layout.clone(),
                )
            })
            .collect()
    }

    fn expected(kernels: Vec<(&str, Vec<(usize, usize)>)>) -> Vec<Row> {
        let mut v: Vec<_> = kernels
            .into_iter()
            .map(|(name, layout)| (name.to_owned(), layout.len(), Some(layout)))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_committed_ptx_cubin_and_fatbin_give_the_c_signatures() {
        assert_eq!(table(&ParamTable::from_ptx(PTX)), expected(kernels_cu()));
        assert_eq!(
            table(&ParamTable::from_image(CUBIN)),
            expected(kernels_cu())
        );
        // an sm_90 cubin and compute_75 PTX that agree
        assert_eq!(
            table(&ParamTable::from_image(FATBIN)),
            expected(kernels_cu())
        );
        let scale = ParamTable::from_image(CUBIN);
        let scale = scale.get(b"scale").unwrap();
        assert_eq!((scale.count, scale.bytes()), (3, Some(20)));
        assert!(
            ParamTable::from_image(CUBIN)
                .get(b"no_such_kernel")
                .is_none()
        );
    }

    #[test]
    fn the_test_kernels_give_their_c_signatures() {
        // derive.cu: particles_step(const Particle*, size_t, Particle*, size_t),
        // cells_sum(const Cell*, size_t, unsigned long long*, size_t)
        assert_eq!(
            table(&ParamTable::from_ptx(DERIVE_PTX)),
            expected(vec![
                ("cells_sum", words8(4)),
                ("particles_step", words8(4))
            ])
        );
        // launch_ex.cu: cluster_info(unsigned*, size_t), cluster_info_fixed(unsigned*,
        // size_t), grid_sum(const unsigned*, size_t, unsigned*, size_t), empty_ex(float*,
        // size_t)
        assert_eq!(
            table(&ParamTable::from_ptx(LAUNCH_EX_PTX)),
            expected(vec![
                ("cluster_info", words8(2)),
                ("cluster_info_fixed", words8(2)),
                ("empty_ex", words8(2)),
                ("grid_sum", words8(4)),
            ])
        );
        // deadline.cu: spin_then_fill(unsigned long long ns, unsigned *out, size_t
        // out_len, unsigned value)
        assert_eq!(
            table(&ParamTable::from_ptx(DEADLINE_PTX)),
            expected(vec![(
                "spin_then_fill",
                vec![(0, 8), (8, 8), (16, 8), (24, 4)]
            )])
        );
        // graphs.cu
        assert_eq!(
            table(&ParamTable::from_ptx(GRAPHS_PTX)),
            expected(vec![
                // add_one_f32(float*, size_t)
                ("add_one_f32", words8(2)),
                // add_u32(const unsigned*, size_t, const unsigned*, size_t, unsigned*, size_t)
                ("add_u32", words8(6)),
                // affine_u32(const unsigned*, size_t, unsigned*, size_t, unsigned a, unsigned b)
                (
                    "affine_u32",
                    vec![(0, 8), (8, 8), (16, 8), (24, 8), (32, 4), (36, 4)]
                ),
                // set_u32(unsigned*, size_t, unsigned v)
                ("set_u32", vec![(0, 8), (8, 8), (16, 4)]),
                // spin_cycles(unsigned long long)
                ("spin_cycles", vec![(0, 8)]),
                // square_u32(unsigned*, size_t)
                ("square_u32", words8(2)),
            ])
        );
    }

    #[test]
    fn ptx_signatures_with_alignment_arrays_pointers_and_no_list() {
        let ptx = r#"
            .version 8.0
            .target sm_90
            .address_size 64
            .file 1 "/tmp/a .entry fake(.param .u32 x)"
            // .entry commented(.param .u32 x)
            /* .entry also_commented(
                 .param .u32 x) */
            .visible .entry by_value(
                .param .u8 a,
                .param .align 8 .b8 s[12],
                .param .f16x2 h,
                .param .u64 .ptr .global .align 16 p,
                .param .u64 .ptr.const.align 4 q,
                .param .align 4 .b8 m[2][3]
            )
            .maxntid 128, 1, 1
            {
                ld.param.u8 %rs1, [a];
                ret;
            }
            .visible .entry no_params()
            { ret; }
            .entry no_list .maxntid 32
            { ret; }
            .entry no_list_at_all
            { ret; }
            .weak .entry _Z4fillIfEvPT_mS0_(.param .u64 _Z4fillIfEvPT_mS0__param_0,
                .param .u64 _Z4fillIfEvPT_mS0__param_1, .param .f32 _Z4fillIfEvPT_mS0__param_2)
            { ret; }
            .visible .func (.param .b32 r) helper(.param .b32 x) { ret; }
            .visible .entry texture(.param .texref t, .param .u32 n) { ret; }
        "#;
        let t = ParamTable::from_ptx(ptx);
        assert_eq!(
            table(&t),
            vec![
                (
                    "_Z4fillIfEvPT_mS0_".to_owned(),
                    3,
                    Some(vec![(0, 8), (8, 8), (16, 4)])
                ),
                (
                    "by_value".to_owned(),
                    6,
                    Some(vec![(0, 1), (8, 12), (20, 4), (24, 8), (32, 8), (40, 6)])
                ),
                ("no_list".to_owned(), 0, Some(vec![])),
                ("no_list_at_all".to_owned(), 0, Some(vec![])),
                ("no_params".to_owned(), 0, Some(vec![])),
                // a parameter of a type not sized here: counted, no layout
                ("texture".to_owned(), 2, None),
            ]
        );
        assert_eq!(t.get(b"by_value").unwrap().bytes(), Some(46));
        assert_eq!(t.get(b"texture").unwrap().bytes(), None);
    }

    #[test]
    fn ptx_not_understood_leaves_the_kernel_without_a_list() {
        for ptx in [
            ".entry a(.param .u32 x,) {}",
            ".entry a(, .param .u32 x) {}",
            ".entry a(.reg .u32 x) {}",
            ".entry a(.param .u32) {}",
            ".entry a(.param .align 3 .b8 x[4]) {}",
            ".entry a(.param .u32 x (y)) {}",
            ".entry a(.param .u32 x",
            ".entry a;",
            ".entry a(.param .u32 x) {} .entry a(.param .u32 x, .param .u32 y) {}",
        ] {
            let t = ParamTable::from_ptx(ptx);
            assert!(t.get(b"a").is_none(), "{ptx}: {t:?}");
            assert!(t.is_empty(), "{ptx}");
        }
        // preprocessor directives: ptxas expands them, this reader cannot, so nothing of
        // the text has a list (here the signature ptxas sees has two parameters, not one)
        for ptx in [
            "#if 0\n.entry a(.param .u64 x) {}\n#else\n.visible E a(.param .u64 x, .param .u64 y) {}\n#endif",
            "#define E .entry\n.entry a(.param .u64 x) {}",
            ".entry a(.param .u64 x MORE) {}\n#define MORE , .param .u64 y",
            "   # include \"k.ptx\"\n.entry a(.param .u64 x) {}",
        ] {
            let t = ParamTable::from_ptx(ptx);
            assert!(t.get(b"a").is_none() && t.is_empty(), "{ptx}: {t:?}");
        }
        // a `#` in a comment or a string is no directive
        let t = ParamTable::from_ptx(
            "// #if 0\n/* #define */ .file 1 \"a#b.cu\"\n.entry a(.param .u64 x) {}",
        );
        assert_eq!(t.get(b"a").unwrap().count, 1);
        // the same kernel declared twice alike is fine
        let t = ParamTable::from_ptx(".entry a(.param .u32 x) {} .entry a(.param .u32 y) {}");
        assert_eq!(t.get(b"a").unwrap().count, 1);
        // odd dimensions: counted, no layout
        let t = ParamTable::from_ptx(".entry a(.param .b8 x[0], .param .b8 y[]) {}");
        assert_eq!(
            t.get(b"a").unwrap(),
            &ParamList {
                count: 2,
                layout: None
            }
        );
        let t = ParamTable::from_ptx(".entry a(.param .b8 x[99999999999]) {}");
        assert_eq!(
            t.get(b"a").unwrap(),
            &ParamList {
                count: 1,
                layout: None
            }
        );
    }

    /// The offset of `.nv.info.<kernel>`'s bytes in `CUBIN`.
    fn nv_info(kernel: &str) -> std::ops::Range<usize> {
        let f = |at: usize, n: usize| {
            CUBIN[at..at + n]
                .iter()
                .rev()
                .fold(0u64, |v, &x| (v << 8) | u64::from(x)) as usize
        };
        let (shoff, shnum, shstrndx) = (f(40, 8), f(60, 2), f(62, 2));
        let names = f(shoff + shstrndx * 64 + 24, 8);
        let want = format!(".nv.info.{kernel}");
        for i in 0..shnum {
            let at = shoff + i * 64;
            let name = c_str(CUBIN, names + f(at, 4)).unwrap();
            if name == want.as_bytes() {
                let off = f(at + 24, 8);
                return off..off + f(at + 32, 8);
            }
        }
        panic!("no {want}");
    }

    #[test]
    fn nv_info_records_that_do_not_add_up_leave_the_kernel_without_a_list() {
        let range = nv_info("scale");
        let data = &CUBIN[range.clone()];
        assert_eq!(
            nv_info_params(data),
            Some(ParamList {
                count: 3,
                layout: Some(vec![(0, 8), (8, 8), (16, 4)])
            })
        );
        // find the KPARAM_INFO records (format 4, attribute 0x17, 12 bytes)
        let kparams: Vec<usize> = (0..data.len().saturating_sub(4))
            .filter(|&p| data[p..p + 4] == [4, 0x17, 12, 0])
            .collect();
        assert_eq!(kparams.len(), 3);
        let with = |at: usize, bytes: &[u8]| {
            let mut m = data.to_vec();
            m[at..at + bytes.len()].copy_from_slice(bytes);
            nv_info_params(&m)
        };
        // an ordinal repeated (2 -> 1)
        let second = kparams[0] + 8;
        assert_eq!(data[second], 2, "the first record is parameter 2");
        assert_eq!(with(second, &[1]), None);
        // a parameter past the parameter space (offset 16 -> 40)
        assert_eq!(with(second + 2, &[40]), None);
        // a newer record format in place of one
        assert_eq!(with(kparams[0], &[4, EIATTR_KPARAM_INFO_V2]), None);
        // a record cut off
        assert_eq!(nv_info_params(&data[..data.len() - 2]), None);
        // in the whole cubin: that kernel loses its list, the others keep theirs
        let mut m = CUBIN.to_vec();
        m[range.start + second] = 1;
        let t = ParamTable::from_image(&m);
        assert!(t.get(b"scale").is_none());
        assert_eq!(t.get(b"vector_add").unwrap().count, 6);
    }

    /// `CUBIN`'s section `name`: its index and the byte of its header.
    fn section_of(name: &str) -> (usize, usize) {
        let f = |at: usize, n: usize| {
            CUBIN[at..at + n]
                .iter()
                .rev()
                .fold(0u64, |v, &x| (v << 8) | u64::from(x)) as usize
        };
        let (shoff, shnum, shstrndx) = (f(40, 8), f(60, 2), f(62, 2));
        let names = f(shoff + shstrndx * 64 + 24, 8);
        (0..shnum)
            .map(|i| (i, shoff + i * 64))
            .find(|&(_, at)| c_str(CUBIN, names + f(at, 4)) == Some(name.as_bytes()))
            .unwrap_or_else(|| panic!("no section {name}"))
    }

    /// `CUBIN`'s symbol `name`: its index and the byte of its entry.
    fn symbol_of(name: &str) -> (usize, usize) {
        let f = |at: usize, n: usize| {
            CUBIN[at..at + n]
                .iter()
                .rev()
                .fold(0u64, |v, &x| (v << 8) | u64::from(x)) as usize
        };
        let (_, symtab) = section_of(".symtab");
        let (_, strtab) = section_of(".strtab");
        let (syms, size, strings) = (f(symtab + 24, 8), f(symtab + 32, 8), f(strtab + 24, 8));
        (0..size / 24)
            .map(|n| (n, syms + n * 24))
            .find(|&(_, at)| c_str(CUBIN, strings + f(at, 4)) == Some(name.as_bytes()))
            .unwrap_or_else(|| panic!("no symbol {name}"))
    }

    #[test]
    fn a_kernel_whose_symbol_or_code_points_elsewhere_has_no_list() {
        // the symbol `spin` moved into `scale`'s code (which is long enough for it): the
        // driver would take `scale`'s records for `spin`, so `spin` has no list; `scale`,
        // whose symbol and code are as they were, keeps its own
        let mut image = CUBIN.to_vec();
        let (_, spin) = symbol_of("spin");
        let (text_scale, _) = section_of(".text.scale");
        image[spin + 6..spin + 8].copy_from_slice(&(text_scale as u16).to_le_bytes());
        let t = ParamTable::from_image(&image);
        assert!(t.get(b"spin").is_none(), "{t:?}");
        assert_eq!(t.get(b"scale").map(|l| l.count), Some(3));
        assert_eq!(t.get(b"vector_add").map(|l| l.count), Some(6));
        // `scale`'s code naming `spin`'s symbol as its function: neither has a list
        let mut image = CUBIN.to_vec();
        let (spin, _) = symbol_of("spin");
        let (_, at) = section_of(".text.scale");
        let info = u32::from_le_bytes(image[at + 44..at + 48].try_into().unwrap());
        let info = (info & 0xff00_0000) | spin as u32;
        image[at + 44..at + 48].copy_from_slice(&info.to_le_bytes());
        let t = ParamTable::from_image(&image);
        assert!(
            t.get(b"scale").is_none() && t.get(b"spin").is_none(),
            "{t:?}"
        );
        assert_eq!(t.get(b"vector_add").map(|l| l.count), Some(6));
        // `scale`'s code naming no function (the null symbol)
        let mut image = CUBIN.to_vec();
        image[at + 44..at + 48].copy_from_slice(&(info & 0xff00_0000).to_le_bytes());
        let t = ParamTable::from_image(&image);
        assert!(t.get(b"scale").is_none(), "{t:?}");
        assert_eq!(t.get(b"spin").map(|l| l.count), Some(1));
    }

    #[test]
    fn compressed_fatbin_entries_and_other_bytes_give_no_list() {
        assert!(ParamTable::from_image(b"").is_empty());
        assert!(ParamTable::from_image(b"\x7fELF").is_empty());
        assert!(ParamTable::from_image(PTX.as_bytes()).is_empty());
        // both entries of the fatbin marked compressed
        let mut m = FATBIN.to_vec();
        let mut p = 16;
        let f = |b: &[u8], at: usize, n: usize| {
            b[at..at + n]
                .iter()
                .rev()
                .fold(0u64, |v, &x| (v << 8) | u64::from(x)) as usize
        };
        while p < m.len() {
            let (hsize, psize) = (f(&m, p + 4, 4), f(&m, p + 8, 8));
            m[p + 41] |= 0x20; // flags |= 0x2000
            p += hsize + psize;
        }
        assert!(ParamTable::from_image(&m).is_empty());
    }

    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// Mutated images and PTX never panic the readers, and whatever they read is a list
    /// that could be a kernel's (ordered, non-overlapping, inside the parameter limit).
    #[test]
    fn mutated_images_and_ptx_never_panic_and_give_plausible_lists() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let plausible = |t: &ParamTable| {
            for (name, list) in t.iter() {
                assert!(!name.is_empty());
                if let Some(layout) = &list.layout {
                    assert_eq!(layout.len(), list.count);
                    let mut end = 0;
                    for &(offset, size) in layout {
                        assert!(offset >= end && size > 0, "{layout:?}");
                        end = offset + size;
                    }
                    assert!(end <= MAX_PARAM_BYTES);
                }
            }
        };
        let mut m = Vec::new();
        let mut read = [0usize; 3];
        for (k, image) in [CUBIN, FATBIN].into_iter().enumerate() {
            for _ in 0..3000 {
                m.clear();
                m.extend_from_slice(image);
                match rng.below(4) {
                    0 => m.truncate(rng.below(image.len())),
                    1 => {
                        for _ in 0..1 + rng.below(8) {
                            let at = rng.below(m.len());
                            m[at] = rng.next() as u8;
                        }
                    }
                    2 => {
                        // a header field (the first 64 bytes of the ELF or fatbin entry)
                        let at = rng.below(64.min(m.len()));
                        m[at] ^= 1 << rng.below(8);
                    }
                    _ => {
                        let at = rng.below(m.len().saturating_sub(8));
                        let v = [0u64, u64::MAX, m.len() as u64, rng.next()][rng.below(4)];
                        m[at..at + 8].copy_from_slice(&v.to_le_bytes());
                    }
                }
                let t = ParamTable::from_image(&m);
                plausible(&t);
                read[k] += usize::from(!t.is_empty());
            }
        }
        let sources = [PTX, DERIVE_PTX, LAUNCH_EX_PTX, GRAPHS_PTX];
        let alphabet = b"().,[]{};\"/*\n .param.entry.align 8 .b8 x[4] 0x10 99999999999999999999";
        for _ in 0..3000 {
            let src = sources[rng.below(sources.len())].as_bytes();
            let mut t = src.to_vec();
            for _ in 0..1 + rng.below(16) {
                let at = rng.below(t.len());
                match rng.below(3) {
                    0 => t[at] = alphabet[rng.below(alphabet.len())],
                    1 => {
                        t.remove(at);
                    }
                    _ => t.insert(at, alphabet[rng.below(alphabet.len())]),
                }
            }
            if rng.below(4) == 0 {
                t.truncate(rng.below(t.len()));
            }
            let mut table = ParamTable::default();
            ptx_entries(&t, &mut table);
            plausible(&table);
            read[2] += usize::from(!table.is_empty());
        }
        // most mutations leave something to read: the readers ran on them, not beside them
        assert!(read.iter().all(|&n| n > 1000), "{read:?}");
    }
}
