//! Kernel parameter lists from a cubin: the `.nv.info.<kernel>` sections'
//! `EIATTR_KPARAM_INFO` records and the parameter space.

use std::collections::BTreeMap;

use super::{MAX_PARAM_BYTES, ParamList, ParamTable};
use crate::module::image::elf::{EM_CUDA, SHT_CUDA_INFO};
use crate::module::image::nv_info::{Record, walk_records, words};
use crate::module::image::{c_str, le};

/// `EIATTR_KPARAM_INFO`: one parameter's ordinal, offset and size.
const EIATTR_KPARAM_INFO: u8 = 0x17;
/// `EIATTR_PARAM_CBANK`: the parameter constant bank's symbol, offset and size.
const EIATTR_PARAM_CBANK: u8 = 0x0a;
/// `EIATTR_CBANK_PARAM_SIZE`: the parameter space's size.
const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
/// `EIATTR_KPARAM_INFO_V2`: a newer parameter record, not read here.
pub(super) const EIATTR_KPARAM_INFO_V2: u8 = 0x45;

/// Every kernel's parameters from a cubin's `.nv.info.<kernel>` sections, into `table`.
/// Reads only the ELF header, the section headers, their names and those sections, each
/// bounds-checked; an image that does not hold together adds nothing.
pub(super) fn elf_entries(b: &[u8], table: &mut ParamTable) {
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
pub(super) fn nv_info_params(data: &[u8]) -> Option<ParamList> {
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
