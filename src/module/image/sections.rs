//! Every section of a cubin: its header, its bytes inside the image, its name and type, the
//! string tables, and the links and contents each type of section has ([`check_section`]
//! hands the contents to the file that checks that type).

use std::collections::HashSet;

use super::callgraph::check_callgraph;
use super::debug_frame::check_debug_frame;
use super::elf::{
    Elf, MAX_ALIGN, MAX_MEMORY, SHF_EXECINSTR, SHT_CUDA_CALLGRAPH, SHT_CUDA_COMPAT, SHT_CUDA_INFO,
    SHT_CUDA_RELOCINFO, SHT_NOBITS, SHT_NOTE, SHT_NULL, SHT_PROGBITS, SHT_REL, SHT_RELA,
    SHT_STRTAB, SHT_SYMTAB, Section,
};
use super::notes::check_notes;
use super::nv_info::{check_nv_info, walk_records};
use super::relocations::{check_relocation_actions, check_relocations};
use super::{R, c_str, span, u32_at, u64_at};

/// A section header as the image has it.
pub(super) struct RawSection {
    name: u32,
    typ: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
}

/// The `shnum` section headers of `table` (the section header table, already inside the
/// image); section 0 must be all zeros.
pub(super) fn read_section_headers(table: &[u8], shnum: u16) -> R<Vec<RawSection>> {
    let mut raw = Vec::with_capacity(usize::from(shnum));
    for i in 0..usize::from(shnum) {
        let at = i * 64;
        let w = "the section header table";
        raw.push(RawSection {
            name: u32_at(table, at, w)?,
            typ: u32_at(table, at + 4, w)?,
            flags: u64_at(table, at + 8, w)?,
            addr: u64_at(table, at + 16, w)?,
            offset: u64_at(table, at + 24, w)?,
            size: u64_at(table, at + 32, w)?,
            link: u32_at(table, at + 40, w)?,
            info: u32_at(table, at + 44, w)?,
            align: u64_at(table, at + 48, w)?,
            entsize: u64_at(table, at + 56, w)?,
        });
    }
    if table.get(..64).is_none_or(|h| h.iter().any(|&c| c != 0)) {
        return Err("section 0 is not the all-zero null section".into());
    }
    Ok(raw)
}

/// The section-name string table (`e_shstrndx`): a string table inside the image.
pub(super) fn section_names<'a>(
    b: &'a [u8],
    raw: &[RawSection],
    shstrndx: u16,
    shnum: u16,
) -> R<&'a [u8]> {
    let len = b.len();
    let shstrndx = usize::from(shstrndx);
    let Some(sh) = raw.get(shstrndx) else {
        return Err(format!(
            "e_shstrndx is {shstrndx}, but there are {shnum} sections"
        ));
    };
    if sh.typ != SHT_STRTAB {
        return Err(format!(
            "e_shstrndx names section {shstrndx}, which is not a string table (type {:#x})",
            sh.typ
        ));
    }
    let names = &b[span(
        &format!("section {shstrndx} (the section-name string table)"),
        sh.offset,
        sh.size,
        len,
        "image",
    )?];
    check_strtab(
        names,
        &format!("section {shstrndx} (the section-name string table)"),
    )?;
    Ok(names)
}

/// Every section with its name, each inside the section-name string table; no bytes yet.
pub(super) fn name_sections<'a>(raw: &[RawSection], names: &'a [u8]) -> R<Vec<Section<'a>>> {
    let mut sections = Vec::with_capacity(raw.len());
    for (i, s) in raw.iter().enumerate() {
        let name = usize::try_from(s.name)
            .ok()
            .and_then(|n| c_str(names, n))
            .ok_or_else(|| {
                format!(
                    "section {i}'s name offset {} is past the end of the {}-byte section-name \
                     string table",
                    s.name,
                    names.len()
                )
            })?;
        sections.push(Section {
            name,
            typ: s.typ,
            flags: s.flags,
            size: s.size,
            link: s.link,
            info: s.info,
            entsize: s.entsize,
            data: &[],
        });
    }
    Ok(sections)
}

/// Every section's type, alignment, address, bytes (into `elf`), name and link.
pub(super) fn place_sections<'a>(b: &'a [u8], raw: &[RawSection], elf: &mut Elf<'a>) -> R {
    let mut seen = HashSet::new();
    for (i, s) in raw.iter().enumerate().skip(1) {
        let what = elf.describe(i);
        let natural = natural_alignment(s.typ, &what)?;
        check_alignment_and_address(s, &what)?;
        if s.typ == SHT_NOBITS {
            check_nobits(s, elf.sections[i].name, &what)?;
        } else {
            elf.sections[i].data = section_bytes(b, s, natural, &what)?;
        }
        let name = elf.sections[i].name;
        if !seen.insert(name) {
            return Err(format!("{what} has the same name as another section"));
        }
        check_name_and_type(name, s.typ, &what)?;
        if usize::try_from(s.link).map_or(true, |l| l >= raw.len()) {
            return Err(format!(
                "{what} links to section {}, but there are {} sections",
                s.link,
                raw.len()
            ));
        }
    }
    Ok(())
}

/// The alignment a section of type `typ` needs for its entries; an error for a type this
/// check does not know.
fn natural_alignment(typ: u32, what: &str) -> R<u64> {
    Ok(match typ {
        SHT_PROGBITS | SHT_STRTAB | SHT_NOBITS => 1,
        SHT_SYMTAB | SHT_RELA | SHT_REL => 8,
        SHT_NOTE | SHT_CUDA_INFO | SHT_CUDA_CALLGRAPH | SHT_CUDA_COMPAT => 4,
        SHT_CUDA_RELOCINFO => 8,
        SHT_NULL => return Err(format!("{what} is a second null section")),
        t => {
            return Err(format!(
                "{what} has type {t:#x}, which this check does not know how to bound"
            ));
        }
    })
}

/// `sh_addralign` a power of two up to 2^20, `sh_addr` at most 2^40.
fn check_alignment_and_address(s: &RawSection, what: &str) -> R {
    if s.align > MAX_ALIGN || (s.align != 0 && !s.align.is_power_of_two()) {
        return Err(format!(
            "{what} has alignment {}, not a power of two up to {MAX_ALIGN}",
            s.align
        ));
    }
    if s.addr > MAX_MEMORY {
        return Err(format!("{what} has address {:#x}, past 2^40", s.addr));
    }
    Ok(())
}

/// An `SHT_NOBITS` section (named `name`): at most 2^40 bytes, and a data section for
/// variables.
fn check_nobits(s: &RawSection, name: &[u8], what: &str) -> R {
    if s.size > MAX_MEMORY {
        return Err(format!(
            "{what} reserves {} bytes, more than {MAX_MEMORY}",
            s.size
        ));
    }
    // Memory without file bytes: only shared, local and global variables. A section
    // the driver reads (code, constants) must not pretend to have no bytes.
    let memory = name == b".nv.global"
        || name.starts_with(b".nv.shared.")
        || name.starts_with(b".nv.local.");
    if !memory || s.flags & SHF_EXECINSTR != 0 {
        return Err(format!(
            "{what} has no bytes in the file (SHT_NOBITS) but is not a .nv.global, \
             .nv.shared.* or .nv.local.* data section"
        ));
    }
    Ok(())
}

/// A section's file bytes: inside the image, at an offset aligned to `sh_addralign` and to
/// the alignment its entries need (`natural`).
fn section_bytes<'a>(b: &'a [u8], s: &RawSection, natural: u64, what: &str) -> R<&'a [u8]> {
    let r = span(&what, s.offset, s.size, b.len(), "image")?;
    if s.offset % s.align.max(natural) != 0 {
        return Err(format!(
            "{what} at byte {} is not aligned to {}",
            s.offset,
            s.align.max(natural)
        ));
    }
    Ok(&b[r])
}

/// Every string table starts and ends with a NUL.
pub(super) fn check_string_tables(elf: &Elf<'_>) -> R {
    for (i, s) in elf.sections.iter().enumerate() {
        if s.typ == SHT_STRTAB {
            check_strtab(s.data, &elf.describe(i))?;
        }
    }
    Ok(())
}

fn check_strtab(data: &[u8], what: &str) -> R {
    match (data.first(), data.last()) {
        (Some(0), Some(0)) => Ok(()),
        (None, _) => Err(format!("{what} is an empty string table")),
        _ => Err(format!(
            "{what} is a string table that does not start and end with a NUL"
        )),
    }
}

/// Sections the driver finds by name must have the type whose contents are checked here,
/// and sections this check cannot bound are refused.
fn check_name_and_type(name: &[u8], typ: u32, what: &str) -> R {
    let expect = |want: u32, kind: &str| -> R {
        if typ == want {
            Ok(())
        } else {
            Err(format!("{what} is named as {kind} but has type {typ:#x}"))
        }
    };
    let is_info = name == b".nv.info" || name.starts_with(b".nv.info.");
    if is_info || typ == SHT_CUDA_INFO {
        if !is_info {
            return Err(format!(
                "{what} has the .nv.info type but not a .nv.info name"
            ));
        }
        return expect(SHT_CUDA_INFO, "an .nv.info section");
    }
    if name == b".nv.callgraph" || typ == SHT_CUDA_CALLGRAPH {
        if name != b".nv.callgraph" {
            return Err(format!(
                "{what} has the call graph type but not the name .nv.callgraph"
            ));
        }
        return expect(SHT_CUDA_CALLGRAPH, "the call graph");
    }
    if name == b".nv.compat" || typ == SHT_CUDA_COMPAT {
        if name != b".nv.compat" {
            return Err(format!("{what} has the .nv.compat type but another name"));
        }
        return expect(SHT_CUDA_COMPAT, "the .nv.compat section");
    }
    if name.starts_with(b".note") || typ == SHT_NOTE {
        if !name.starts_with(b".note") {
            return Err(format!("{what} is a note section without a .note name"));
        }
        return expect(SHT_NOTE, "a note section");
    }
    if name == b".nv.rel.action" || typ == SHT_CUDA_RELOCINFO {
        if name != b".nv.rel.action" {
            return Err(format!(
                "{what} has the relocation-action type but not the name .nv.rel.action"
            ));
        }
        return expect(SHT_CUDA_RELOCINFO, "the relocation-action table");
    }
    if name == b".symtab" || typ == SHT_SYMTAB {
        if name != b".symtab" {
            return Err(format!("{what} is a symbol table not named .symtab"));
        }
        return expect(SHT_SYMTAB, "the symbol table");
    }
    if name == b".debug_frame" {
        return expect(SHT_PROGBITS, "the .debug_frame section");
    }
    if let Some(rest) = name.strip_prefix(b".nv.constant") {
        check_constant_bank_name(rest, what)?;
    }
    const UNCHECKED: [&[u8]; 8] = [
        b".debug_",
        b".nv_debug",
        b".nv.debug",
        b".nv.merc",
        b".nv.capmerc",
        b".nv.resolvedrela",
        b".nv.prototype",
        b".nv.uft",
    ];
    if let Some(p) = UNCHECKED.iter().find(|p| name.starts_with(p)) {
        return Err(format!(
            "{what}: sections named {}* (debug information from -G or -lineinfo, or link-time \
             data) are not checked; build without them, or load the image unchecked",
            String::from_utf8_lossy(p)
        ));
    }
    Ok(())
}

/// `.nv.constant<bank>` or `.nv.constant<bank>.<kernel>` (`rest` follows `.nv.constant`).
fn check_constant_bank_name(rest: &[u8], what: &str) -> R {
    // `.nv.constant<bank>` or `.nv.constant<bank>.<kernel>`: the bank indexes the GPU's
    // constant banks (18 of them).
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let bank = std::str::from_utf8(&rest[..digits])
        .ok()
        .and_then(|d| d.parse::<u32>().ok());
    let tail = &rest[digits..];
    if digits > 2 || bank.is_none_or(|b| b >= 18) || !(tail.is_empty() || tail.starts_with(b".")) {
        return Err(format!(
            "{what} is named like a constant bank, but not .nv.constant<0-17>[.<kernel>]"
        ));
    }
    Ok(())
}

/// The type-specific links and contents of section `i`.
pub(super) fn check_section(elf: &Elf<'_>, i: usize) -> R {
    let s = &elf.sections[i];
    let what = elf.describe(i);
    let nsec = elf.sections.len();
    let links_symtab = || -> R {
        if s.link as usize == elf.symtab {
            Ok(())
        } else {
            Err(format!(
                "{what} links to {}, not the symbol table",
                elf.describe(s.link as usize)
            ))
        }
    };
    match s.typ {
        SHT_REL | SHT_RELA => {
            links_symtab()?;
            check_relocations(elf, i)
        }
        SHT_CUDA_INFO => {
            links_symtab()?;
            check_nv_info(elf, i)
        }
        SHT_CUDA_CALLGRAPH => {
            links_symtab()?;
            check_callgraph(elf, i)
        }
        SHT_CUDA_COMPAT => {
            check_info_index(s.info, nsec, &what)?;
            walk_records(s.data, &what, |_, _, _, _| Ok(()))
        }
        SHT_NOTE => {
            check_info_index(s.info, nsec, &what)?;
            check_notes(s.data, &what)
        }
        SHT_CUDA_RELOCINFO => {
            check_info_index(s.info, nsec, &what)?;
            check_relocation_actions(s, &what)
        }
        SHT_SYMTAB => Ok(()), // checked by check_symbols
        SHT_PROGBITS if s.flags & SHF_EXECINSTR != 0 => {
            // Code: sh_link is the symbol table and sh_info the function's symbol in its low
            // 24 bits (before sm_90, the register count is in the high 8).
            links_symtab()?;
            let function = s.info & 0x00ff_ffff;
            if function as usize >= elf.nsyms() {
                return Err(format!(
                    "{what} names symbol {function} as its function, but there are {} symbols",
                    elf.nsyms()
                ));
            }
            Ok(())
        }
        _ => {
            check_info_index(s.info, nsec, &what)?;
            if s.name == b".debug_frame" {
                check_debug_frame(s.data, &what)?;
            }
            Ok(())
        }
    }
}

fn check_info_index(info: u32, nsec: usize, what: &str) -> R {
    if info as usize >= nsec {
        return Err(format!(
            "{what} names section {info} in sh_info, but there are {nsec} sections"
        ));
    }
    Ok(())
}
