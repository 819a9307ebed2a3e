//! The ELF container of a cubin: the identification and header, the section and program
//! header tables, and the program headers. [`check_elf`] runs every cubin check in order;
//! the sections themselves are checked in `sections` and the files it names.

use std::ops::Range;

use super::{R, span, u16_at, u32_at, u64_at};

pub(super) const SHT_NULL: u32 = 0;
pub(super) const SHT_PROGBITS: u32 = 1;
pub(super) const SHT_SYMTAB: u32 = 2;
pub(super) const SHT_STRTAB: u32 = 3;
pub(super) const SHT_RELA: u32 = 4;
pub(super) const SHT_NOTE: u32 = 7;
pub(super) const SHT_NOBITS: u32 = 8;
pub(super) const SHT_REL: u32 = 9;
pub(super) const SHT_CUDA_INFO: u32 = 0x7000_0000;
pub(super) const SHT_CUDA_CALLGRAPH: u32 = 0x7000_0001;
pub(super) const SHT_CUDA_RELOCINFO: u32 = 0x7000_000b;
pub(super) const SHT_CUDA_COMPAT: u32 = 0x7000_0086;

pub(super) const SHF_EXECINSTR: u64 = 0x4;

pub(super) const SHN_UNDEF: u16 = 0;
const SHN_LORESERVE: u16 = 0xff00;

const PT_NULL: u32 = 0;
const PT_LOAD: u32 = 1;
const PT_PHDR: u32 = 6;

pub(super) const EM_CUDA: u16 = 190;
const ET_EXEC: u16 = 2;
const ET_REL: u16 = 1;

/// No section or segment occupies more memory than this (1 TiB): far beyond any GPU's, and
/// small enough that the driver's sums of sizes cannot overflow.
pub(super) const MAX_MEMORY: u64 = 1 << 40;
/// Largest `sh_addralign` / `p_align` accepted.
pub(super) const MAX_ALIGN: u64 = 1 << 20;

/// A section whose header lies inside the image, with its name and (once placed) its bytes.
pub(super) struct Section<'a> {
    pub(super) name: &'a [u8],
    pub(super) typ: u32,
    pub(super) flags: u64,
    pub(super) size: u64,
    pub(super) link: u32,
    pub(super) info: u32,
    pub(super) entsize: u64,
    /// The section's bytes (empty for `SHT_NOBITS`).
    pub(super) data: &'a [u8],
}

/// A symbol table entry's fields that locate it.
pub(super) struct Symbol {
    pub(super) name: u32,
    pub(super) shndx: u16,
    pub(super) value: u64,
    pub(super) size: u64,
}

/// What the checks of one section may need of the others.
pub(super) struct Elf<'a> {
    pub(super) sections: Vec<Section<'a>>,
    pub(super) symtab: usize,
    pub(super) symbols: Vec<Symbol>,
}

impl Elf<'_> {
    /// `section 7 (.nv.info.scale)`, for messages.
    pub(super) fn describe(&self, i: usize) -> String {
        match self.sections.get(i) {
            Some(s) => format!("section {i} ({})", String::from_utf8_lossy(s.name)),
            None => format!("section {i}"),
        }
    }

    pub(super) fn nsyms(&self) -> usize {
        self.symbols.len()
    }
}

/// The ELF header's fields that locate the rest of the image.
pub(super) struct Header {
    phoff: u64,
    shoff: u64,
    phentsize: u16,
    pub(super) phnum: u16,
    shentsize: u16,
    pub(super) shnum: u16,
    pub(super) shstrndx: u16,
}

/// The 64-byte header is there, and its identification bytes are a CUDA ELF64's.
pub(super) fn check_identification(b: &[u8]) -> R {
    let len = b.len();
    if len < 64 {
        return Err(format!(
            "the image has {len} bytes, fewer than an ELF header's 64"
        ));
    }
    if b[4] != 2 {
        return Err(format!(
            "not a 64-bit ELF (EI_CLASS {}); cubins are ELF64",
            b[4]
        ));
    }
    if b[5] != 1 {
        return Err(format!("not a little-endian ELF (EI_DATA {})", b[5]));
    }
    if b[6] != 1 {
        return Err(format!("ELF identification version {} is not 1", b[6]));
    }
    if ![0x29, 0x33, 0x41].contains(&b[7]) {
        return Err(format!(
            "ELF OS/ABI {:#04x} is not CUDA's (0x29, 0x33 or 0x41)",
            b[7]
        ));
    }
    if ![7, 8].contains(&b[8]) {
        return Err(format!(
            "CUDA ELF ABI version {} is not one this check knows (7 or 8)",
            b[8]
        ));
    }
    Ok(())
}

/// An executable cubin for `EM_CUDA` with a 64-byte header; returns where its tables are.
pub(super) fn check_header(b: &[u8]) -> R<Header> {
    let hdr = "the ELF header";
    let e_type = u16_at(b, 16, hdr)?;
    let e_machine = u16_at(b, 18, hdr)?;
    if e_machine != EM_CUDA {
        return Err(format!(
            "an ELF for machine {e_machine}, not a CUDA cubin (EM_CUDA, 190); a host object's \
             fatbin (its .nv_fatbin section) is not accepted: extract the fatbin and load that"
        ));
    }
    if e_type == ET_REL {
        return Err(
            "a relocatable cubin (nvcc -rdc): link it first (nvlink, or the cuLink* calls)".into(),
        );
    }
    if e_type != ET_EXEC {
        return Err(format!("ELF type {e_type} is not an executable cubin (2)"));
    }
    // e_version (offset 20) is 1 in CUDA 13 cubins and the toolkit version (118) in CUDA
    // 11.8 ones: not checked, it bounds nothing.
    let phoff = u64_at(b, 32, hdr)?;
    let shoff = u64_at(b, 40, hdr)?;
    let ehsize = u16_at(b, 52, hdr)?;
    let phentsize = u16_at(b, 54, hdr)?;
    let phnum = u16_at(b, 56, hdr)?;
    let shentsize = u16_at(b, 58, hdr)?;
    let shnum = u16_at(b, 60, hdr)?;
    let shstrndx = u16_at(b, 62, hdr)?;
    if ehsize != 64 {
        return Err(format!("e_ehsize is {ehsize}, not 64"));
    }
    Ok(Header {
        phoff,
        shoff,
        phentsize,
        phnum,
        shentsize,
        shnum,
        shstrndx,
    })
}

/// The section header table: 64-byte entries, at least one, inside the image and 8-byte
/// aligned.
pub(super) fn section_header_table(h: &Header, len: usize) -> R<Range<usize>> {
    let &Header {
        shoff,
        shentsize,
        shnum,
        ..
    } = h;
    if shentsize != 64 {
        return Err(format!("e_shentsize is {shentsize}, not 64"));
    }
    if shnum == 0 || shnum >= SHN_LORESERVE {
        return Err(format!(
            "e_shnum is {shnum}: extended section numbering is not supported, and a cubin has \
             sections"
        ));
    }
    let shtab = span(
        &format!("the section header table ({shnum} entries at byte {shoff})"),
        shoff,
        u64::from(shnum) * 64,
        len,
        "image",
    )?;
    if shoff % 8 != 0 {
        return Err(format!(
            "the section header table at byte {shoff} is not 8-byte aligned"
        ));
    }
    Ok(shtab)
}

/// The program header table, if there is one: 56-byte entries inside the image and 8-byte
/// aligned.
pub(super) fn program_header_table(h: &Header, len: usize) -> R<Option<Range<usize>>> {
    let &Header {
        phoff,
        phentsize,
        phnum,
        ..
    } = h;
    if phnum == 0 {
        return Ok(None);
    }
    if phentsize != 56 {
        return Err(format!("e_phentsize is {phentsize}, not 56"));
    }
    if phnum == 0xffff {
        return Err("e_phnum is 0xffff (extended numbering), not supported".into());
    }
    let r = span(
        &format!("the program header table ({phnum} entries at byte {phoff})"),
        phoff,
        u64::from(phnum) * 56,
        len,
        "image",
    )?;
    if phoff % 8 != 0 {
        return Err(format!(
            "the program header table at byte {phoff} is not 8-byte aligned"
        ));
    }
    Ok(Some(r))
}

/// Every program header: a known type, its segment inside the image, no more bytes in the
/// file than in memory, sizes and addresses at most 2^40, alignment a power of two.
pub(super) fn check_program_headers(table: &[u8], phnum: usize, len: usize) -> R {
    for n in 0..phnum {
        let at = n * 56;
        let w = "the program header table";
        let typ = u32_at(table, at, w)?;
        let offset = u64_at(table, at + 8, w)?;
        let vaddr = u64_at(table, at + 16, w)?;
        let paddr = u64_at(table, at + 24, w)?;
        let filesz = u64_at(table, at + 32, w)?;
        let memsz = u64_at(table, at + 40, w)?;
        let align = u64_at(table, at + 48, w)?;
        let what = format!("program header {n}");
        if ![PT_NULL, PT_LOAD, PT_PHDR].contains(&typ) {
            return Err(format!(
                "{what} has type {typ:#x}, not PT_NULL, PT_LOAD or PT_PHDR"
            ));
        }
        span(&format!("{what}'s segment"), offset, filesz, len, "image")?;
        if filesz > memsz {
            return Err(format!(
                "{what} has {filesz} bytes in the file but {memsz} in memory"
            ));
        }
        if vaddr > MAX_MEMORY || paddr > MAX_MEMORY {
            return Err(format!(
                "{what} has address {vaddr:#x} (physical {paddr:#x}), past 2^40"
            ));
        }
        if memsz > MAX_MEMORY {
            return Err(format!(
                "{what} reserves {memsz} bytes, more than {MAX_MEMORY}"
            ));
        }
        if align > MAX_ALIGN || (align != 0 && !align.is_power_of_two()) {
            return Err(format!(
                "{what} has alignment {align}, not a power of two up to {MAX_ALIGN}"
            ));
        }
    }
    Ok(())
}
