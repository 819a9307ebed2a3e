//! The symbol table: its one section, every symbol's name, section and extent, and the
//! kinds of symbol the driver trusts ([`check_symbol_kind`]).

use super::elf::{Elf, SHF_EXECINSTR, SHN_UNDEF, SHT_PROGBITS, SHT_STRTAB, SHT_SYMTAB, Symbol};
use super::{R, c_str, u16_at, u32_at, u64_at};

/// The one symbol table (`.symtab`, 24-byte entries, linked to `.strtab`) and every symbol
/// in it, which it records in `elf`.
pub(super) fn check_symbols(elf: &mut Elf<'_>) -> R {
    let tables: Vec<usize> = (0..elf.sections.len())
        .filter(|&i| elf.sections[i].typ == SHT_SYMTAB)
        .collect();
    let &[symtab] = tables.as_slice() else {
        return Err(format!(
            "the image has {} symbol tables; a cubin has exactly one",
            tables.len()
        ));
    };
    let what = elf.describe(symtab);
    let s = &elf.sections[symtab];
    if s.entsize != 24 {
        return Err(format!("{what} has entry size {}, not 24", s.entsize));
    }
    if s.size % 24 != 0 || s.size == 0 {
        return Err(format!(
            "{what} has {} bytes, not a positive multiple of its 24-byte entries",
            s.size
        ));
    }
    let strtab = s.link as usize;
    let st = &elf.sections[strtab];
    if st.typ != SHT_STRTAB || st.name != b".strtab" {
        return Err(format!(
            "{what} links to {}, not the .strtab string table",
            elf.describe(strtab)
        ));
    }
    let nsyms = s.data.len() / 24;
    if s.info as usize > nsyms {
        return Err(format!(
            "{what} says its first global symbol is {}, but it has {nsyms} symbols",
            s.info
        ));
    }
    let mut symbols = Vec::with_capacity(nsyms);
    for n in 0..nsyms {
        let at = n * 24;
        let sym = Symbol {
            name: u32_at(s.data, at, &what)?,
            shndx: u16_at(s.data, at + 6, &what)?,
            value: u64_at(s.data, at + 8, &what)?,
            size: u64_at(s.data, at + 16, &what)?,
        };
        if sym.name as usize >= st.data.len() {
            return Err(format!(
                "symbol {n}'s name offset {} is past the end of the {}-byte .strtab",
                sym.name,
                st.data.len()
            ));
        }
        check_symbol_kind(elf, n, s.data[at + 4], sym.shndx)?;
        match sym.shndx {
            SHN_UNDEF => {}
            i if usize::from(i) < elf.sections.len() => {
                let target = &elf.sections[usize::from(i)];
                let end = sym.value.checked_add(sym.size);
                if end.is_none_or(|e| e > target.size) {
                    return Err(format!(
                        "symbol {n} ({}) covers bytes {}..{} of {}, which has {} bytes",
                        String::from_utf8_lossy(c_str(st.data, sym.name as usize).unwrap_or(b"")),
                        sym.value,
                        end.map_or_else(|| "overflow".to_string(), |e| e.to_string()),
                        elf.describe(usize::from(i)),
                        target.size
                    ));
                }
            }
            // refused by `check_symbol_kind`
            _ => unreachable!("a symbol outside every section passed check_symbol_kind"),
        }
        symbols.push(sym);
    }
    elf.symtab = symtab;
    elf.symbols = symbols;
    Ok(())
}

/// Symbol `n`'s binding and type (`st_info`) and its section (`st_shndx`): only what nvcc and
/// NVRTC write. The driver dispatches on these and trusts them: in the fuzz run on an H100
/// (driver 580), a data symbol with binding 4 and type 11 crashed the driver's lazy load of
/// the kernel using it (in `cuModuleGetFunction`), and a kernel's function symbol moved to
/// `SHN_ABS` crashed `cuModuleLoadData`.
///
/// Bindings: local, global, weak. Types: none (undefined only as none), object (in a section
/// that is not code), function (in a code section), section. No symbol is absolute or common.
fn check_symbol_kind(elf: &Elf<'_>, n: usize, info: u8, shndx: u16) -> R {
    const STB_WEAK: u8 = 2;
    const STT_NOTYPE: u8 = 0;
    const STT_OBJECT: u8 = 1;
    const STT_FUNC: u8 = 2;
    const STT_SECTION: u8 = 3;
    let (bind, typ) = (info >> 4, info & 0xf);
    if bind > STB_WEAK {
        return Err(format!(
            "symbol {n} has binding {bind}; a cubin's symbols are local, global or weak (0-2)"
        ));
    }
    if shndx == SHN_UNDEF {
        return match typ {
            STT_NOTYPE => Ok(()),
            _ => Err(format!(
                "symbol {n} of type {typ} is undefined; a cubin defines every symbol it types"
            )),
        };
    }
    let Some(section) = elf.sections.get(usize::from(shndx)) else {
        return Err(format!(
            "symbol {n} is in section {shndx:#x}, which is not one of the image's {} sections \
             (a cubin has no absolute or common symbols)",
            elf.sections.len()
        ));
    };
    let code = section.typ == SHT_PROGBITS && section.flags & SHF_EXECINSTR != 0;
    let fits = match typ {
        STT_NOTYPE | STT_SECTION => true,
        STT_OBJECT => !code,
        STT_FUNC => code,
        _ => {
            return Err(format!(
                "symbol {n} has type {typ}; a cubin's symbols are of type none, object, \
                 function or section (0-3)"
            ));
        }
    };
    if !fits {
        return Err(format!(
            "symbol {n} is a {} in {}, which is {}code",
            if typ == STT_FUNC {
                "function"
            } else {
                "data object"
            },
            elf.describe(usize::from(shndx)),
            if code { "" } else { "not " }
        ));
    }
    Ok(())
}
