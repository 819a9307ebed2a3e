//! Checks a cubin, part by part: the ELF's header and tables (`elf.rs`), then its sections
//! (`sections.rs`, which checks each kind of section in its own file) and symbols
//! (`symbols.rs`). The one place that knows the order; the parts know nothing of it.

use super::R;
use super::elf::{
    Elf, check_header, check_identification, check_program_headers, program_header_table,
    section_header_table,
};
use super::sections::{
    check_section, check_string_tables, name_sections, place_sections, read_section_headers,
    section_names,
};
use super::symbols::check_symbols;

/// Checks a cubin; the ELF may be followed by unrelated bytes (a fatbin's padding).
pub(super) fn check_elf(b: &[u8]) -> R {
    let len = b.len();
    check_identification(b)?;
    let h = check_header(b)?;
    let shtab = section_header_table(&h, len)?;
    let phtab = program_header_table(&h, len)?;
    let raw = read_section_headers(&b[shtab], h.shnum)?;
    let names = section_names(b, &raw, h.shstrndx, h.shnum)?;
    let mut elf = Elf {
        sections: name_sections(&raw, names)?,
        symtab: 0,
        symbols: Vec::new(),
    };
    place_sections(b, &raw, &mut elf)?;
    check_string_tables(&elf)?;
    check_symbols(&mut elf)?;
    for i in 1..elf.sections.len() {
        check_section(&elf, i)?;
    }
    if let Some(phtab) = phtab {
        check_program_headers(&b[phtab], usize::from(h.phnum), len)?;
    }
    Ok(())
}
