//! Bounds checks for module images (cubin and fatbin) before they reach the driver.
//!
//! `cuModuleLoadDataEx` takes a pointer and no length: the driver finds the image's extent
//! in its headers, and follows every offset, size and index in them. An ELF whose section
//! header offset points past its bytes kills the process inside the driver. [`check`] walks
//! everything the driver could follow and accepts an image only when all of it lies inside
//! the slice. What it cannot check precisely it rejects: an image nvcc would produce but
//! that uses a structure unknown here (a new `.nv.info` attribute, a compressed fatbin
//! entry, debug sections other than `.debug_frame`) is refused with a message naming it,
//! and can still be loaded through the `unsafe` unchecked loader.
//!
//! # Cubin (ELF64, little-endian, `EM_CUDA`)
//!
//! - ELF header: magic, class 64, LSB, identification version 1, CUDA OS/ABI (0x29, 0x33 or 0x41) and
//!   ABI version (7 or 8), `ET_EXEC`, `EM_CUDA` (190), `e_ehsize` 64; the section header
//!   table (`e_shentsize` 64) and program header table (`e_phentsize` 56) 8-byte aligned
//!   and inside the slice (overflow-checked), `e_shstrndx` a string table.
//! - Every section: a known type; file bytes inside the slice unless `SHT_NOBITS` (whose
//!   size is capped at 2^40, and which must be a `.nv.global`, `.nv.shared.*` or
//!   `.nv.local.*` data section, not code); offset aligned to `sh_addralign` (a power of
//!   two up to 2^20) and tables to their natural alignment; `sh_addr` at most 2^40; a
//!   unique name inside the section-name string table; `sh_link`/`sh_info` in range for
//!   what they name (for code, `sh_info`'s low 24 bits are the function's symbol); names
//!   and types that agree (`.nv.info*`, `.nv.callgraph`, `.nv.compat`, `.nv.rel.action`,
//!   `.note*`, `.symtab`); constant banks named `.nv.constant<0-17>[.<kernel>]`; no
//!   sections known to be parsed but not checked here (`.debug_*` other than
//!   `.debug_frame`, `.nv_debug*`, `.nv.merc*`, `.nv.capmerc*`, `.nv.resolvedrela`,
//!   `.nv.prototype`, `.nv.uft*`).
//! - String tables: start and end with NUL.
//! - The one symbol table: `sh_entsize` 24, size a multiple of it, linked to `.strtab`;
//!   every symbol's `st_name` inside it, `st_shndx` a section (or `SHN_UNDEF` for an untyped
//!   symbol), and `st_value + st_size` inside its section for every defined symbol; its
//!   binding local, global or weak, and its type none, object (outside code), function (in
//!   code) or section (the driver trusts both: other kinds crashed it in the fuzz run).
//! - Relocation tables (`SHT_REL` 16-byte, `SHT_RELA` 24-byte entries): linked to the
//!   symbol table, applied to a `PROGBITS` section; every entry's symbol index in range and
//!   `r_offset` plus 8 bytes (data relocation types 1-4 in data) or 16 bytes (any other
//!   type, and anything in code: one instruction) inside the target section. The
//!   relocation-action table (`.nv.rel.action`, nvcc 11.8 writes it for sm_70-sm_89) may
//!   define how types are applied: every bit it writes must fall inside those widths.
//! - `.nv.info` and `.nv.info.<kernel>` (`SHT_CUDA_INFO`): records of a format byte
//!   (`EIFMT_NVAL` 1, `EIFMT_BVAL` 2, `EIFMT_HVAL` 3: 4 bytes in all; `EIFMT_SVAL` 4: 4 bytes
//!   then a `u16`-sized payload, a multiple of 4 here), each ending inside the section; only
//!   attributes whose payload is known are accepted, and their contents are checked: symbol
//!   indices (`EIATTR_REGCOUNT`, `_FRAME_SIZE`, `_MIN/MAX_STACK_SIZE`, `_EXTERNS`,
//!   `_PARAM_CBANK`), instruction offsets (`EIATTR_EXIT_INSTR_OFFSETS` and the other offset
//!   lists, `EIATTR_INDIRECT_BRANCH_TARGETS`) inside the kernel's `.text.<kernel>` (which
//!   `sh_info` must name), the parameter bank (`EIATTR_PARAM_CBANK`) inside
//!   `.nv.constant0.<kernel>`, every parameter (`EIATTR_KPARAM_INFO`) inside
//!   `EIATTR_CBANK_PARAM_SIZE` with ordinals `0..n`. Record formats: public descriptions of
//!   ptxas's `EIATTR` table (the "EIATTR Attribute Catalog" of ptxas 13.0.88, reprospect's
//!   `NvInfo` parser), checked against `nvdisasm` / `cuobjdump -elf` of nvcc 11.8 cubins
//!   for sm_50 to sm_90 and of the committed CUDA 13 cubin.
//! - `.nv.compat`: the same record walk. `.nv.callgraph`: 8-byte entries of symbol indices
//!   (or the markers `0xfffffffc..=0xffffffff`). Notes: every note inside its section, and
//!   NVIDIA's `cuinfo`/`tkinfo` descriptors (string offsets NUL-terminated inside the note).
//!   `.debug_frame`: every CIE/FDE length inside the section, every FDE's CIE pointer at a CIE.
//! - Program headers (`PT_NULL`, `PT_LOAD`, `PT_PHDR`): `p_offset + p_filesz` inside the
//!   slice, `p_filesz <= p_memsz <= 2^40`, addresses at most 2^40, alignment a power of two.
//!
//! # Fatbin
//!
//! Layout (from `nvcc -fatbin` output read here, `cuobjdump -lelf -lptx`, and public
//! descriptions: NVIDIA's `fatbinary_section.h`, the reverse-engineered fatbin notes of
//! nvopen-tools and the `fatbinary` crate's Kaitai description): a 16-byte header
//! (`u32` magic 0xBA55ED50, `u16` version 1, `u16` header size 16, `u64` size of what
//! follows, which must be the rest of the slice), then entries back to back, each a header
//! and its payload:
//!
//! | at | field |
//! |---|---|
//! | 0 | `u16` kind: 1 PTX, 2 ELF |
//! | 2 | `u16` version, 0x0101 |
//! | 4 | `u32` header size (at least 64, a multiple of 8) |
//! | 8 | `u64` payload size (a multiple of 8), the payload following the header |
//! | 16 | `u32` compressed size (0 unless compressed) |
//! | 20 | `u32` offset in the header of an (offset, length) pair naming the compiler options, or 0 |
//! | 24 | `u16` minor, `u16` major: code version (PTX ISA for PTX) |
//! | 28 | `u32` architecture (90 for sm_90) |
//! | 32 | `u32` offset, `u32` length of the source file name in the header, or 0, 0 |
//! | 40 | `u64` flags: 0x1 64-bit, 0x2 debug, 0x10 Linux, 0x40 Windows, 0x2000 compressed |
//! | 48 | `u64` zero |
//! | 56 | `u64` uncompressed size (0 unless compressed) |
//!
//! Every entry lies inside the fatbin; strings the header points to end with a NUL inside
//! the header; an ELF payload is checked as a cubin (above) and a PTX payload must hold a
//! NUL. Compressed entries are rejected: their streams cannot be bounded without
//! decompressing them here. Build fatbins with `nvcc -fatbin --no-compress` (nvcc compresses
//! PTX by default). A host object holding a fatbin in its `.nv_fatbin` section, and the
//! `__fatBinC_Wrapper_t` that points to one, are rejected: extract the fatbin first.
//!
//! Offsets are checked for alignment relative to the start of the slice; the loader hands
//! the driver an 8-byte-aligned copy, so these are the alignments the driver sees.

#![forbid(unsafe_code)]
// `Module::from_binary` is the caller; until it is wired in only the tests use this.

use std::collections::HashSet;
use std::fmt;
use std::ops::Range;

mod params;

pub(crate) use params::ParamTable;

/// What [`check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A CUDA ELF image.
    Cubin,
    /// A fatbin container.
    Fatbin,
}

/// Why [`check`] refused an image: a sentence naming the offending structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageError(String);

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ImageError {}

type R<T = ()> = Result<T, String>;

const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
const FATBIN_MAGIC: [u8; 4] = 0xBA55_ED50u32.to_le_bytes();
const FATBIN_WRAPPER_MAGIC: [u8; 4] = 0x4662_43B1u32.to_le_bytes();

/// Checks that every offset and size the driver could follow in `image` lies inside it.
pub(crate) fn check(image: &[u8]) -> Result<Kind, ImageError> {
    let kind = match image.get(..4) {
        Some(m) if m == ELF_MAGIC => {
            check_elf(image).map_err(ImageError)?;
            Kind::Cubin
        }
        Some(m) if m == FATBIN_MAGIC => {
            check_fatbin(image).map_err(ImageError)?;
            Kind::Fatbin
        }
        Some(m) if m == FATBIN_WRAPPER_MAGIC => {
            return Err(ImageError(
                "a __fatBinC_Wrapper_t (magic 0x466243b1) holds a pointer to a fatbin, not an \
                 image: pass the fatbin it points to"
                    .into(),
            ));
        }
        _ => {
            return Err(ImageError(
                "not a cubin (ELF) or fatbin image; use Module::from_ptx for PTX text".into(),
            ));
        }
    };
    Ok(kind)
}

// ---------------------------------------------------------------------------------------
// Little-endian reads that never panic.

fn le<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn cut(what: &str, at: usize, width: usize, len: usize) -> String {
    format!("{what}: a {width}-byte field at byte {at} lies past its end ({len} bytes)")
}

fn u16_at(b: &[u8], at: usize, what: &str) -> R<u16> {
    le(b, at)
        .map(u16::from_le_bytes)
        .ok_or_else(|| cut(what, at, 2, b.len()))
}

fn u32_at(b: &[u8], at: usize, what: &str) -> R<u32> {
    le(b, at)
        .map(u32::from_le_bytes)
        .ok_or_else(|| cut(what, at, 4, b.len()))
}

fn u64_at(b: &[u8], at: usize, what: &str) -> R<u64> {
    le(b, at)
        .map(u64::from_le_bytes)
        .ok_or_else(|| cut(what, at, 8, b.len()))
}

/// `off..off + size` as a range of a `len`-byte buffer, or a message saying where it ends.
fn span(what: &dyn fmt::Display, off: u64, size: u64, len: usize, of: &str) -> R<Range<usize>> {
    let Some(end) = off.checked_add(size) else {
        return Err(format!(
            "{what} has offset {off} and size {size}, whose sum overflows"
        ));
    };
    if end > len as u64 {
        return Err(format!(
            "{what} ends at byte {end}, past the end of the {len}-byte {of}"
        ));
    }
    Ok(off as usize..end as usize)
}

/// Bytes up to (not including) the first NUL at or after `at`, if there is one.
fn c_str(b: &[u8], at: usize) -> Option<&[u8]> {
    let rest = b.get(at..)?;
    rest.iter().position(|&c| c == 0).map(|n| &rest[..n])
}

// ---------------------------------------------------------------------------------------
// ELF

const SHT_NULL: u32 = 0;
const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_RELA: u32 = 4;
const SHT_NOTE: u32 = 7;
const SHT_NOBITS: u32 = 8;
const SHT_REL: u32 = 9;
const SHT_CUDA_INFO: u32 = 0x7000_0000;
const SHT_CUDA_CALLGRAPH: u32 = 0x7000_0001;
const SHT_CUDA_RELOCINFO: u32 = 0x7000_000b;
const SHT_CUDA_COMPAT: u32 = 0x7000_0086;

const SHF_EXECINSTR: u64 = 0x4;

const SHN_UNDEF: u16 = 0;
const SHN_LORESERVE: u16 = 0xff00;

const PT_NULL: u32 = 0;
const PT_LOAD: u32 = 1;
const PT_PHDR: u32 = 6;

const EM_CUDA: u16 = 190;
const ET_EXEC: u16 = 2;
const ET_REL: u16 = 1;

/// No section or segment occupies more memory than this (1 TiB): far beyond any GPU's, and
/// small enough that the driver's sums of sizes cannot overflow.
const MAX_MEMORY: u64 = 1 << 40;
/// Largest `sh_addralign` / `p_align` accepted.
const MAX_ALIGN: u64 = 1 << 20;

struct Section<'a> {
    name: &'a [u8],
    typ: u32,
    flags: u64,
    size: u64,
    link: u32,
    info: u32,
    entsize: u64,
    /// The section's bytes (empty for `SHT_NOBITS`).
    data: &'a [u8],
}

struct Symbol {
    name: u32,
    shndx: u16,
    value: u64,
    size: u64,
}

struct Elf<'a> {
    sections: Vec<Section<'a>>,
    symtab: usize,
    symbols: Vec<Symbol>,
}

impl Elf<'_> {
    /// `section 7 (.nv.info.scale)`, for messages.
    fn describe(&self, i: usize) -> String {
        match self.sections.get(i) {
            Some(s) => format!("section {i} ({})", String::from_utf8_lossy(s.name)),
            None => format!("section {i}"),
        }
    }

    fn nsyms(&self) -> usize {
        self.symbols.len()
    }
}

/// Checks a cubin; the ELF may be followed by unrelated bytes (a fatbin's padding).
fn check_elf(b: &[u8]) -> R {
    let len = b.len();
    if len < 64 {
        return Err(format!(
            "the image has {len} bytes, fewer than an ELF header's 64"
        ));
    }
    let hdr = "the ELF header";
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

    // Section header table.
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

    // Program header table.
    let phtab = if phnum == 0 {
        None
    } else {
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
        Some(r)
    };

    // Raw section headers.
    struct Raw {
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
    let table = &b[shtab];
    let mut raw = Vec::with_capacity(usize::from(shnum));
    for i in 0..usize::from(shnum) {
        let at = i * 64;
        let w = "the section header table";
        raw.push(Raw {
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

    // The section-name string table, then every name.
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
    let mut elf = Elf {
        sections,
        symtab: 0,
        symbols: Vec::new(),
    };

    // Every section's bytes, type, alignment and name.
    let mut seen = HashSet::new();
    for (i, s) in raw.iter().enumerate().skip(1) {
        let what = elf.describe(i);
        let natural = match s.typ {
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
        };
        if s.align > MAX_ALIGN || (s.align != 0 && !s.align.is_power_of_two()) {
            return Err(format!(
                "{what} has alignment {}, not a power of two up to {MAX_ALIGN}",
                s.align
            ));
        }
        if s.addr > MAX_MEMORY {
            return Err(format!("{what} has address {:#x}, past 2^40", s.addr));
        }
        if s.typ == SHT_NOBITS {
            if s.size > MAX_MEMORY {
                return Err(format!(
                    "{what} reserves {} bytes, more than {MAX_MEMORY}",
                    s.size
                ));
            }
            // Memory without file bytes: only shared, local and global variables. A section
            // the driver reads (code, constants) must not pretend to have no bytes.
            let name = elf.sections[i].name;
            let memory = name == b".nv.global"
                || name.starts_with(b".nv.shared.")
                || name.starts_with(b".nv.local.");
            if !memory || s.flags & SHF_EXECINSTR != 0 {
                return Err(format!(
                    "{what} has no bytes in the file (SHT_NOBITS) but is not a .nv.global, \
                     .nv.shared.* or .nv.local.* data section"
                ));
            }
        } else {
            let r = span(&what, s.offset, s.size, len, "image")?;
            if s.offset % s.align.max(natural) != 0 {
                return Err(format!(
                    "{what} at byte {} is not aligned to {}",
                    s.offset,
                    s.align.max(natural)
                ));
            }
            elf.sections[i].data = &b[r];
        }
        let name = elf.sections[i].name;
        if !seen.insert(name) {
            return Err(format!("{what} has the same name as another section"));
        }
        check_name_and_type(name, s.typ, &what)?;
        if usize::try_from(s.link).map_or(true, |l| l >= raw.len()) {
            return Err(format!(
                "{what} links to section {}, but there are {shnum} sections",
                s.link
            ));
        }
    }

    // String tables.
    for (i, s) in elf.sections.iter().enumerate() {
        if s.typ == SHT_STRTAB {
            check_strtab(s.data, &elf.describe(i))?;
        }
    }

    check_symbols(&mut elf)?;

    for i in 1..elf.sections.len() {
        check_section(&elf, i)?;
    }

    if let Some(phtab) = phtab {
        check_program_headers(&b[phtab], usize::from(phnum), len)?;
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
        // `.nv.constant<bank>` or `.nv.constant<bank>.<kernel>`: the bank indexes the GPU's
        // constant banks (18 of them).
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        let bank = std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|d| d.parse::<u32>().ok());
        let tail = &rest[digits..];
        if digits > 2
            || bank.is_none_or(|b| b >= 18)
            || !(tail.is_empty() || tail.starts_with(b"."))
        {
            return Err(format!(
                "{what} is named like a constant bank, but not .nv.constant<0-17>[.<kernel>]"
            ));
        }
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

fn check_symbols(elf: &mut Elf<'_>) -> R {
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

/// The type-specific links and contents of section `i`.
fn check_section(elf: &Elf<'_>, i: usize) -> R {
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

fn check_relocations(elf: &Elf<'_>, i: usize) -> R {
    let s = &elf.sections[i];
    let what = elf.describe(i);
    let entsize = if s.typ == SHT_RELA { 24 } else { 16 };
    if s.entsize != entsize {
        return Err(format!(
            "{what} has entry size {}, not {entsize}",
            s.entsize
        ));
    }
    if s.size % entsize != 0 {
        return Err(format!(
            "{what} has {} bytes, not a multiple of its {entsize}-byte entries",
            s.size
        ));
    }
    let t = s.info as usize;
    let Some(target) = elf.sections.get(t).filter(|_| t != 0) else {
        return Err(format!(
            "{what} applies to section {t}, which does not exist"
        ));
    };
    if target.typ != SHT_PROGBITS {
        return Err(format!(
            "{what} applies to {}, which is not a PROGBITS section",
            elf.describe(t)
        ));
    }
    let code = target.flags & SHF_EXECINSTR != 0;
    for (n, e) in s.data.chunks_exact(entsize as usize).enumerate() {
        let offset = u64_at(e, 0, &what)?;
        let r_info = u64_at(e, 8, &what)?;
        let (sym, typ) = (r_info >> 32, r_info & 0xffff_ffff);
        // What a relocation writes: the data relocations R_CUDA_32, _64, _G32, _G64 (types
        // 1-4) at most 8 bytes; every other type bits of one instruction, at most 16 bytes
        // (one sm_70+ instruction, two older ones). In code, always a whole instruction.
        let width = if !code && (1..=4).contains(&typ) {
            8
        } else {
            16
        };
        if sym >= elf.nsyms() as u64 {
            return Err(format!(
                "{what}: relocation {n} names symbol {sym}, but there are {} symbols",
                elf.nsyms()
            ));
        }
        if offset.checked_add(width).is_none_or(|e| e > target.size) {
            return Err(format!(
                "{what}: relocation {n} writes {width} bytes at byte {offset} of {}, which has \
                 {} bytes",
                elf.describe(t),
                target.size
            ));
        }
    }
    Ok(())
}

/// `.nv.rel.action`: an 8-byte header (`u32` first relocation type it defines, `u32` 0),
/// then one 8-byte entry per relocation type from that one on: symbol kind, addend shift,
/// and two (source bit, length, destination bit) triples saying which bits of the
/// relocated word are written. They must stay inside one 128-bit instruction, and inside 64
/// bits for the data types 1-4 (see `check_relocations`).
fn check_relocation_actions(s: &Section<'_>, what: &str) -> R {
    if s.entsize != 8 || s.size < 8 || s.size % 8 != 0 {
        return Err(format!(
            "{what} has {} bytes in entries of {}, not an 8-byte header and 8-byte entries",
            s.size, s.entsize
        ));
    }
    let base = u64::from(u32_at(s.data, 0, what)?);
    if u32_at(s.data, 4, what)? != 0 {
        return Err(format!("{what}'s header has a nonzero second word"));
    }
    for (n, e) in s.data[8..].chunks_exact(8).enumerate() {
        let typ = base + n as u64;
        let limit = if (1..=4).contains(&typ) { 64 } else { 128 };
        for (len, dst) in [(e[3], e[4]), (e[6], e[7])] {
            if u16::from(len) + u16::from(dst) > limit {
                return Err(format!(
                    "{what}: relocation type {typ} writes bits {dst}..{} of the relocated word, \
                     past bit {limit}",
                    u16::from(dst) + u16::from(len)
                ));
            }
        }
    }
    Ok(())
}

/// Walks `.nv.info`-style records (format byte, attribute byte, `u16` value or payload
/// size, then for `EIFMT_SVAL` the payload), calling `f(record index, format, attribute,
/// value or payload)`; the records must end exactly at the section's end.
fn walk_records<'a>(
    data: &'a [u8],
    what: &str,
    mut f: impl FnMut(usize, u8, u8, Record<'a>) -> R,
) -> R {
    let mut p = 0;
    let mut n = 0;
    while p < data.len() {
        let (Some(&fmt), Some(&attr), Some(v)) =
            (data.get(p), data.get(p + 1), le::<2>(data, p + 2))
        else {
            return Err(format!(
                "{what}: record {n} at byte {p} is cut off by the section's end ({} bytes)",
                data.len()
            ));
        };
        let v = u16::from_le_bytes(v);
        let (record, next) = match fmt {
            1..=3 => (Record::Value(v), p + 4),
            4 => {
                if v % 4 != 0 {
                    return Err(format!(
                        "{what}: record {n} (attribute {attr:#04x}) has a {v}-byte payload, not \
                         a multiple of 4"
                    ));
                }
                let end = p + 4 + usize::from(v);
                let Some(payload) = data.get(p + 4..end) else {
                    return Err(format!(
                        "{what}: record {n} (attribute {attr:#04x}) ends at byte {end}, past the \
                         end of the {}-byte section",
                        data.len()
                    ));
                };
                (Record::Payload(payload), end)
            }
            _ => {
                return Err(format!(
                    "{what}: record {n} at byte {p} has format {fmt:#04x}, not one of \
                     EIFMT_NVAL/BVAL/HVAL/SVAL (1-4)"
                ));
            }
        };
        f(n, fmt, attr, record)?;
        p = next;
        n += 1;
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Record<'a> {
    /// `EIFMT_NVAL`, `EIFMT_BVAL`, `EIFMT_HVAL`: the 16-bit value in the record header.
    Value(u16),
    /// `EIFMT_SVAL`: the payload.
    Payload(&'a [u8]),
}

fn words(payload: &[u8]) -> impl Iterator<Item = u32> + '_ {
    payload
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

/// `.nv.info` attributes whose payload this check understands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Attr {
    /// A number in the record header (NVAL/BVAL/HVAL): nothing to follow.
    Flag,
    /// `EIATTR_CBANK_PARAM_SIZE` (HVAL).
    CbankParamSize,
    /// `n` plain 32-bit numbers.
    Words(usize),
    /// `[symbol index][value]` (global `.nv.info`).
    SymbolValue,
    /// `EIATTR_EXTERNS`: symbol indices.
    Externs,
    /// Offsets of instructions in the kernel's code, one `u32` each.
    Offsets,
    /// `EIATTR_MBARRIER_INSTR_OFFSETS`: 16-byte records starting with an instruction offset.
    MbarrierOffsets,
    /// `EIATTR_INDIRECT_BRANCH_TARGETS`: records of a branch's offset, two `u16`, a target
    /// count and that many target offsets.
    BranchTargets,
    /// `EIATTR_KPARAM_INFO`: index, ordinal, offset, flags (size in bits 18..32).
    KparamInfo,
    /// `EIATTR_PARAM_CBANK`: the constant bank's section symbol, `u16` offset, `u16` size.
    ParamCbank,
}

fn attribute(global: bool, fmt: u8, attr: u8) -> Option<Attr> {
    use Attr::*;
    Some(match (global, fmt == 4, attr) {
        // EIATTR_REGCOUNT, _FRAME_SIZE, _MIN_STACK_SIZE, _MAX_STACK_SIZE
        (true, true, 0x2f | 0x11 | 0x12 | 0x23) => SymbolValue,
        // EIATTR_CUDA_API_VERSION, _SW_WAR, _CRS_STACK_SIZE
        (false, true, 0x37 | 0x36 | 0x1e) => Words(1),
        // EIATTR_MAX_THREADS, _REQNTID, _CTA_PER_CLUSTER
        (false, true, 0x05 | 0x10 | 0x3d) => Words(3),
        (false, true, 0x17) => KparamInfo,
        (false, true, 0x0a) => ParamCbank,
        (false, true, 0x0f) => Externs,
        // EIATTR_EXIT_, _S2RCTAID_, _LD_CACHEMOD_, _ATOM_SYS_, _COOP_GROUP_,
        // _INT_WARP_WIDE_INSTR_OFFSETS
        (false, true, 0x1c | 0x1d | 0x25 | 0x27 | 0x28 | 0x31) => Offsets,
        (false, true, 0x39) => MbarrierOffsets,
        (false, true, 0x34) => BranchTargets,
        (false, false, 0x19) if fmt == 3 => CbankParamSize,
        // Numbers and flags in the record header: EIATTR_CTAIDZ_USED, _MAXREG_COUNT,
        // _NEED_CNP_WRAPPER, _NEED_CNP_PATCH, _EXPLICIT_CACHING, _ISTYPEP_USED, _SUQ_USED,
        // _SW1850030_WAR, _WMMA_USED, _HAS_PRE_V10_OBJECT, _SW2393858_WAR, _SW2861232_WAR,
        // _NUM_MBARRIERS, _EXPLICIT_CLUSTER, _RESERVED_SMEM_USED, _NUM_BARRIERS,
        // _TEXMODE_INDEPENDENT, _SPARSE_MMA_MASK, _TCGEN05_1CTA_USED, _TCGEN05_2CTA_USED,
        // _GEN_ERRBAR_AT_EXIT, _BLOCKS_ARE_CLUSTERS, _SANITIZE, _MERCURY_ISA_VERSION
        (
            _,
            false,
            0x04 | 0x1b | 0x1f | 0x20 | 0x21 | 0x22 | 0x24 | 0x2a | 0x2b | 0x2c | 0x30 | 0x35
            | 0x38 | 0x3e | 0x41 | 0x4c | 0x4d | 0x50 | 0x51 | 0x52 | 0x53 | 0x5b | 0x5c | 0x5f,
        ) => Flag,
        _ => return None,
    })
}

/// Names of `.nv.info` attributes, for messages (codes from public descriptions of
/// ptxas 13.0's table).
fn attribute_name(attr: u8) -> Option<&'static str> {
    const NAMES: [&str; 0x60] = [
        "ERROR",
        "PAD",
        "IMAGE_SLOT",
        "JUMPTABLE_RELOCS",
        "CTAIDZ_USED",
        "MAX_THREADS",
        "IMAGE_OFFSET",
        "IMAGE_SIZE",
        "TEXTURE_NORMALIZED",
        "SAMPLER_INIT",
        "PARAM_CBANK",
        "SMEM_PARAM_OFFSETS",
        "CBANK_PARAM_OFFSETS",
        "SYNC_STACK",
        "TEXID_SAMPID_MAP",
        "EXTERNS",
        "REQNTID",
        "FRAME_SIZE",
        "MIN_STACK_SIZE",
        "SAMPLER_FORCE_UNNORMALIZED",
        "BINDLESS_IMAGE_OFFSETS",
        "BINDLESS_TEXTURE_BANK",
        "BINDLESS_SURFACE_BANK",
        "KPARAM_INFO",
        "SMEM_PARAM_SIZE",
        "CBANK_PARAM_SIZE",
        "QUERY_NUMATTRIB",
        "MAXREG_COUNT",
        "EXIT_INSTR_OFFSETS",
        "S2RCTAID_INSTR_OFFSETS",
        "CRS_STACK_SIZE",
        "NEED_CNP_WRAPPER",
        "NEED_CNP_PATCH",
        "EXPLICIT_CACHING",
        "ISTYPEP_USED",
        "MAX_STACK_SIZE",
        "SUQ_USED",
        "LD_CACHEMOD_INSTR_OFFSETS",
        "LOAD_CACHE_REQUEST",
        "ATOM_SYS_INSTR_OFFSETS",
        "COOP_GROUP_INSTR_OFFSETS",
        "COOP_GROUP_MASK_REGIDS",
        "SW1850030_WAR",
        "WMMA_USED",
        "HAS_PRE_V10_OBJECT",
        "ATOMF16_EMUL_INSTR_OFFSETS",
        "ATOM16_EMUL_INSTR_REG_MAP",
        "REGCOUNT",
        "SW2393858_WAR",
        "INT_WARP_WIDE_INSTR_OFFSETS",
        "SHARED_SCRATCH",
        "STATISTICS",
        "INDIRECT_BRANCH_TARGETS",
        "SW2861232_WAR",
        "SW_WAR",
        "CUDA_API_VERSION",
        "NUM_MBARRIERS",
        "MBARRIER_INSTR_OFFSETS",
        "COROUTINE_RESUME_OFFSETS",
        "SAM_REGION_STACK_SIZE",
        "PER_REG_TARGET_PERF_STATS",
        "CTA_PER_CLUSTER",
        "EXPLICIT_CLUSTER",
        "MAX_CLUSTER_RANK",
        "INSTR_REG_MAP",
        "RESERVED_SMEM_USED",
        "RESERVED_SMEM_0_SIZE",
        "UCODE_SECTION_DATA",
        "UNUSED_LOAD_BYTE_OFFSET",
        "KPARAM_INFO_V2",
        "SYSCALL_OFFSETS",
        "SW_WAR_MEMBAR_SYS_INSTR_OFFSETS",
        "GRAPHICS_GLOBAL_CBANK",
        "SHADER_TYPE",
        "VRC_CTA_INIT_COUNT",
        "TOOLS_PATCH_FUNC",
        "NUM_BARRIERS",
        "TEXMODE_INDEPENDENT",
        "PERF_STATISTICS",
        "AT_ENTRY_FRAGEMENTS",
        "SPARSE_MMA_MASK",
        "TCGEN05_1CTA_USED",
        "TCGEN05_2CTA_USED",
        "GEN_ERRBAR_AT_EXIT",
        "REG_RECONFIG",
        "ANNOTATIONS",
        "UNKNOWN",
        "STACK_CANARY_TRAP_OFFSETS",
        "STUB_FUNCTION_KIND",
        "LOCAL_CTA_ASYNC_STORE_OFFSETS",
        "MERCURY_FINALIZER_OPTIONS",
        "BLOCKS_ARE_CLUSTERS",
        "SANITIZE",
        "SYSCALLS_FALLBACK",
        "CUDA_REQ",
        "MERCURY_ISA_VERSION",
    ];
    NAMES.get(usize::from(attr)).copied()
}

fn check_nv_info(elf: &Elf<'_>, i: usize) -> R {
    let s = &elf.sections[i];
    let what = elf.describe(i);
    let nsyms = elf.nsyms();
    let kernel = s.name.strip_prefix(b".nv.info.");
    let global = kernel.is_none();

    // A kernel's attributes point into its code, `.text.<kernel>`, which sh_info names.
    let text = match kernel {
        None => {
            if s.info != 0 {
                return Err(format!(
                    "{what} is the global .nv.info but names section {} in sh_info",
                    s.info
                ));
            }
            None
        }
        Some(k) => {
            let t = s.info as usize;
            let code = elf.sections.get(t).filter(|c| {
                t != 0
                    && c.typ == SHT_PROGBITS
                    && c.flags & SHF_EXECINSTR != 0
                    && c.name.strip_prefix(b".text.") == Some(k)
            });
            let Some(code) = code else {
                return Err(format!(
                    "{what} names {} in sh_info, not the kernel's code section .text.{}",
                    elf.describe(t),
                    String::from_utf8_lossy(k)
                ));
            };
            Some(code)
        }
    };

    let symbol = |n: usize, idx: u32, attr: u8| -> R {
        if idx as usize >= nsyms {
            return Err(format!(
                "{what}: record {n} (attribute {attr:#04x}) names symbol {idx}, but there are \
                 {nsyms} symbols"
            ));
        }
        Ok(())
    };
    let code_offset = |n: usize, off: u32, attr: u8| -> R {
        let size = text.map_or(0, |t| t.size);
        if off % 8 != 0 || u64::from(off) + 16 > size {
            return Err(format!(
                "{what}: record {n} (attribute {attr:#04x}) points at byte {off} of the kernel's \
                 {size}-byte code, not at a whole instruction inside it"
            ));
        }
        Ok(())
    };

    let mut params: Vec<(u32, u64)> = Vec::new(); // (ordinal, end of the parameter)
    let mut cbank_param_size: Option<u64> = None;
    let mut param_cbank: Option<u64> = None;
    walk_records(s.data, &what, |n, fmt, attr, record| {
        let Some(kind) = attribute(global, fmt, attr) else {
            return Err(format!(
                "{what}: record {n} is attribute {attr:#04x}{} in format {fmt}, which this check \
                 does not know how to bound in {} .nv.info",
                attribute_name(attr).map_or(String::new(), |a| format!(" (EIATTR_{a})")),
                if global { "the global" } else { "a kernel's" }
            ));
        };
        let payload = match record {
            Record::Payload(p) => p,
            Record::Value(v) => {
                if kind == Attr::CbankParamSize && cbank_param_size.replace(u64::from(v)).is_some()
                {
                    return Err(format!("{what}: EIATTR_CBANK_PARAM_SIZE appears twice"));
                }
                return Ok(());
            }
        };
        let exact = |want: usize| -> R {
            if payload.len() == want {
                Ok(())
            } else {
                Err(format!(
                    "{what}: record {n} (attribute {attr:#04x}) has {} bytes, not {want}",
                    payload.len()
                ))
            }
        };
        let w: Vec<u32> = words(payload).collect();
        match kind {
            Attr::Flag | Attr::CbankParamSize => unreachable_format(&what, n),
            Attr::Words(k) => exact(4 * k),
            Attr::SymbolValue => {
                exact(8)?;
                symbol(n, w[0], attr)
            }
            Attr::Externs => w.iter().try_for_each(|&idx| symbol(n, idx, attr)),
            Attr::Offsets => w.iter().try_for_each(|&off| code_offset(n, off, attr)),
            Attr::MbarrierOffsets => {
                if payload.len() % 16 != 0 {
                    return Err(format!(
                        "{what}: record {n} (EIATTR_MBARRIER_INSTR_OFFSETS) has {} bytes, not a \
                         multiple of 16",
                        payload.len()
                    ));
                }
                w.iter()
                    .step_by(4)
                    .try_for_each(|&off| code_offset(n, off, attr))
            }
            Attr::BranchTargets => {
                let mut k = 0;
                while k < w.len() {
                    let (Some(&branch), Some(&count)) = (w.get(k), w.get(k + 2)) else {
                        return Err(format!(
                            "{what}: record {n} (EIATTR_INDIRECT_BRANCH_TARGETS) has a branch \
                             cut off by its end"
                        ));
                    };
                    let targets = w.get(k + 3..).and_then(|t| t.get(..count as usize));
                    let Some(targets) = targets else {
                        return Err(format!(
                            "{what}: record {n} (EIATTR_INDIRECT_BRANCH_TARGETS) lists {count} \
                             targets past its end"
                        ));
                    };
                    code_offset(n, branch, attr)?;
                    targets.iter().try_for_each(|&t| code_offset(n, t, attr))?;
                    k += 3 + targets.len();
                }
                Ok(())
            }
            Attr::KparamInfo => {
                exact(12)?;
                let ordinal = w[1] & 0xffff;
                let offset = u64::from(w[1] >> 16);
                let size = u64::from(w[2] >> 18);
                params.push((ordinal, offset + size));
                Ok(())
            }
            Attr::ParamCbank => {
                exact(8)?;
                symbol(n, w[0], attr)?;
                let sym = &elf.symbols[w[0] as usize];
                let sec = usize::from(sym.shndx);
                let bank = elf
                    .sections
                    .get(sec)
                    .filter(|b| sec != 0 && b.typ == SHT_PROGBITS)
                    .filter(|b| {
                        kernel.is_some_and(|k| b.name.strip_prefix(b".nv.constant0.") == Some(k))
                    });
                let Some(bank) = bank else {
                    return Err(format!(
                        "{what}: EIATTR_PARAM_CBANK names symbol {}, which is not in the kernel's \
                         .nv.constant0 section",
                        w[0]
                    ));
                };
                let (offset, size) = (u64::from(w[1] & 0xffff), u64::from(w[1] >> 16));
                if offset + size > bank.size {
                    return Err(format!(
                        "{what}: EIATTR_PARAM_CBANK puts {size} bytes of parameters at byte \
                         {offset} of {}, which has {} bytes",
                        elf.describe(sec),
                        bank.size
                    ));
                }
                if param_cbank.replace(size).is_some() {
                    return Err(format!("{what}: EIATTR_PARAM_CBANK appears twice"));
                }
                Ok(())
            }
        }
    })?;

    // Parameters: ordinals 0..n once each, every one inside the parameter space.
    let space = match (cbank_param_size, param_cbank) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!(
                "{what}: EIATTR_CBANK_PARAM_SIZE ({a}) and EIATTR_PARAM_CBANK's size ({b}) differ"
            ));
        }
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => 0,
    };
    let mut seen = vec![false; params.len()];
    for &(ordinal, end) in &params {
        match seen.get_mut(ordinal as usize) {
            Some(slot) if !*slot => *slot = true,
            _ => {
                return Err(format!(
                    "{what}: parameter ordinal {ordinal} is repeated or not below the {} \
                     parameters",
                    params.len()
                ));
            }
        }
        if end > space {
            return Err(format!(
                "{what}: parameter {ordinal} ends at byte {end} of a {space}-byte parameter space"
            ));
        }
    }
    Ok(())
}

fn unreachable_format(what: &str, n: usize) -> R {
    // `attribute` gives Flag and CbankParamSize only for formats without a payload.
    Err(format!("{what}: record {n} has an unexpected format"))
}

fn check_callgraph(elf: &Elf<'_>, i: usize) -> R {
    let s = &elf.sections[i];
    let what = elf.describe(i);
    if s.size % 8 != 0 {
        return Err(format!(
            "{what} has {} bytes, not a multiple of its 8-byte entries",
            s.size
        ));
    }
    for (n, idx) in words(s.data).enumerate() {
        if idx < 0xffff_fffc && idx as usize >= elf.nsyms() {
            return Err(format!(
                "{what}: entry {} names symbol {idx}, but there are {} symbols",
                n / 2,
                elf.nsyms()
            ));
        }
    }
    Ok(())
}

fn check_notes(data: &[u8], what: &str) -> R {
    let mut p = 0;
    let mut n = 0;
    let pad4 = |x: usize| x.div_ceil(4) * 4;
    while p < data.len() {
        let (Some(namesz), Some(descsz), Some(typ)) = (
            le::<4>(data, p).map(u32::from_le_bytes),
            le::<4>(data, p + 4).map(u32::from_le_bytes),
            le::<4>(data, p + 8).map(u32::from_le_bytes),
        ) else {
            return Err(format!(
                "{what}: note {n} at byte {p} is cut off by the section's end"
            ));
        };
        let name_at = p + 12;
        let desc_at = name_at + pad4(namesz as usize);
        let end = desc_at.checked_add(pad4(descsz as usize));
        let Some(end) = end.filter(|&e| e <= data.len()) else {
            return Err(format!(
                "{what}: note {n} ({namesz}-byte name, {descsz}-byte descriptor) ends past the \
                 end of the {}-byte section",
                data.len()
            ));
        };
        let name = &data[name_at..name_at + namesz as usize];
        let desc = &data[desc_at..desc_at + descsz as usize];
        if name != b"NVIDIA Corp\0" {
            return Err(format!(
                "{what}: note {n} is not an NVIDIA note, and its contents are not checked"
            ));
        }
        match typ {
            // cuinfo: u16 version, u16 virtual SM, u32 toolkit version.
            1000 if desc.len() == 8 => {}
            // tkinfo: u32 version, then five u32 offsets of strings that follow at byte 24.
            2000 if desc.len() >= 24 => {
                let strings = &desc[24..];
                for (k, off) in words(&desc[4..24]).enumerate() {
                    if c_str(strings, off as usize).is_none() {
                        return Err(format!(
                            "{what}: note {n}'s string {k} at offset {off} has no NUL inside the \
                             {}-byte string area",
                            strings.len()
                        ));
                    }
                }
            }
            _ => {
                return Err(format!(
                    "{what}: NVIDIA note {n} has type {typ} and a {descsz}-byte descriptor, which \
                     this check does not know"
                ));
            }
        }
        p = end;
        n += 1;
    }
    Ok(())
}

fn check_debug_frame(d: &[u8], what: &str) -> R {
    let mut cies = HashSet::new();
    let mut p = 0;
    while p < d.len() {
        let cutoff = || format!("{what}: the entry at byte {p} is cut off by the section's end");
        let l32 = le::<4>(d, p).map(u32::from_le_bytes).ok_or_else(cutoff)?;
        let (header, length, id_size) = match l32 {
            0xffff_ffff => {
                let l = le::<8>(d, p + 4)
                    .map(u64::from_le_bytes)
                    .ok_or_else(cutoff)?;
                (12, l, 8)
            }
            0xffff_fff0.. => {
                return Err(format!(
                    "{what}: the entry at byte {p} has the reserved length {l32:#x}"
                ));
            }
            l => (4, u64::from(l), 4),
        };
        if length == 0 {
            p += header;
            continue;
        }
        let body = p + header;
        let end = (body as u64).checked_add(length);
        let Some(end) = end.filter(|&e| e <= d.len() as u64).map(|e| e as usize) else {
            return Err(format!(
                "{what}: the entry at byte {p} has length {length}, past the end of the {}-byte \
                 section",
                d.len()
            ));
        };
        if length < id_size as u64 {
            return Err(format!(
                "{what}: the entry at byte {p} is too short for its CIE pointer"
            ));
        }
        let id = if id_size == 8 {
            le::<8>(d, body).map(u64::from_le_bytes)
        } else {
            le::<4>(d, body).map(|w| u64::from(u32::from_le_bytes(w)))
        }
        .ok_or_else(cutoff)?;
        let all_ones = if id_size == 8 { u64::MAX } else { 0xffff_ffff };
        if id == all_ones {
            // CIE: version byte, then a NUL-terminated augmentation string.
            let aug = body + id_size + 1;
            if c_str(&d[..end], aug).is_none() {
                return Err(format!(
                    "{what}: the CIE at byte {p} has no NUL-terminated augmentation string"
                ));
            }
            cies.insert(p as u64);
        } else {
            if !cies.contains(&id) {
                return Err(format!(
                    "{what}: the FDE at byte {p} points at byte {id}, which is not a CIE before it"
                ));
            }
            // Initial location and address range, 8 bytes each.
            if length < id_size as u64 + 16 {
                return Err(format!(
                    "{what}: the FDE at byte {p} is too short for its address range"
                ));
            }
        }
        p = end;
    }
    Ok(())
}

fn check_program_headers(table: &[u8], phnum: usize, len: usize) -> R {
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

// ---------------------------------------------------------------------------------------
// Fatbin

const FATBIN_PTX: u16 = 1;
const FATBIN_ELF: u16 = 2;
const FATBIN_FLAG_64BIT: u64 = 0x1;
const FATBIN_FLAG_DEBUG: u64 = 0x2;
const FATBIN_FLAG_LINUX: u64 = 0x10;
const FATBIN_FLAG_WINDOWS: u64 = 0x40;
const FATBIN_FLAG_COMPRESS: u64 = 0x2000;

fn check_fatbin(b: &[u8]) -> R {
    let len = b.len();
    let hdr = "the fatbin header";
    if len < 16 {
        return Err(format!(
            "the image has {len} bytes, fewer than a fatbin header's 16"
        ));
    }
    let version = u16_at(b, 4, hdr)?;
    let header_size = u16_at(b, 6, hdr)?;
    let size = u64_at(b, 8, hdr)?;
    if version != 1 {
        return Err(format!("fatbin version {version} is not 1"));
    }
    if header_size != 16 {
        return Err(format!("the fatbin header size is {header_size}, not 16"));
    }
    if Some(size) != (len as u64).checked_sub(16) {
        return Err(format!(
            "the fatbin header says {size} bytes follow it, but the image has {} after its \
             16-byte header",
            len - 16
        ));
    }
    let mut p = 16;
    let mut n = 0;
    while p < len {
        n += 1;
        let what = format!("fatbin entry {n} (at byte {p})");
        if len - p < 64 {
            return Err(format!(
                "{what}: its 64-byte header is cut off by the end of the {len}-byte image"
            ));
        }
        let e = &b[p..];
        let kind = u16_at(e, 0, &what)?;
        let version = u16_at(e, 2, &what)?;
        let hsize = u32_at(e, 4, &what)?;
        let psize = u64_at(e, 8, &what)?;
        let compressed = u32_at(e, 16, &what)?;
        let options = u32_at(e, 20, &what)?;
        let arch = u32_at(e, 28, &what)?;
        let name_off = u32_at(e, 32, &what)?;
        let name_len = u32_at(e, 36, &what)?;
        let flags = u64_at(e, 40, &what)?;
        let zero = u64_at(e, 48, &what)?;
        let uncompressed = u64_at(e, 56, &what)?;
        if kind != FATBIN_PTX && kind != FATBIN_ELF {
            return Err(format!("{what} has kind {kind}, not PTX (1) or ELF (2)"));
        }
        if version != 0x0101 {
            return Err(format!("{what} has version {version:#06x}, not 0x0101"));
        }
        if hsize < 64 || hsize % 8 != 0 {
            return Err(format!(
                "{what} has a {hsize}-byte header, not a multiple of 8 of at least 64"
            ));
        }
        let header = &b[span(
            &format!("{what}'s header"),
            p as u64,
            u64::from(hsize),
            len,
            "image",
        )?];
        let payload = span(
            &format!("{what}'s {psize}-byte payload"),
            (p as u64) + u64::from(hsize),
            psize,
            len,
            "image",
        )?;
        if psize % 8 != 0 {
            return Err(format!(
                "{what}'s payload has {psize} bytes, not a multiple of 8"
            ));
        }
        if flags & FATBIN_FLAG_COMPRESS != 0 || compressed != 0 || uncompressed != 0 {
            return Err(format!(
                "{what} is compressed, and its stream cannot be bounded without decompressing \
                 it; build the fatbin with nvcc --no-compress"
            ));
        }
        let known = FATBIN_FLAG_64BIT | FATBIN_FLAG_DEBUG | FATBIN_FLAG_LINUX | FATBIN_FLAG_WINDOWS;
        if flags & !known != 0 {
            return Err(format!(
                "{what} has flags {flags:#x}, with bits this check does not know"
            ));
        }
        if flags & FATBIN_FLAG_64BIT == 0 {
            return Err(format!("{what} is for 32-bit code"));
        }
        if zero != 0 {
            return Err(format!(
                "{what} has {zero:#x} in a header field that is always zero"
            ));
        }
        header_string(header, name_off, name_len, &format!("{what}'s file name"))?;
        if options != 0 {
            if options < 64 || options % 4 != 0 {
                return Err(format!(
                    "{what} puts its compiler options at byte {options} of its header, not after \
                     the first 64 bytes"
                ));
            }
            let at = options as usize;
            let (Some(off), Some(olen)) = (
                le::<4>(header, at).map(u32::from_le_bytes),
                le::<4>(header, at + 4).map(u32::from_le_bytes),
            ) else {
                return Err(format!(
                    "{what}'s compiler-options reference at byte {options} is past the end of its \
                     {hsize}-byte header"
                ));
            };
            header_string(header, off, olen, &format!("{what}'s compiler options"))?;
        }
        let body = &b[payload.clone()];
        match kind {
            FATBIN_ELF => check_elf(body).map_err(|m| {
                format!(
                    "{what}, an ELF for sm_{arch} at bytes {}..{}: {m}",
                    payload.start, payload.end
                )
            })?,
            _ => {
                if !body.contains(&0) {
                    return Err(format!(
                        "{what}: its PTX has no NUL before the end of its {psize}-byte payload"
                    ));
                }
            }
        }
        p = payload.end;
    }
    if n == 0 {
        return Err("the fatbin holds no entries".into());
    }
    Ok(())
}

/// A string that an entry header points to: after the fixed 64 bytes, NUL-terminated
/// inside the header. `(0, 0)` is no string.
fn header_string(header: &[u8], off: u32, len: u32, what: &str) -> R {
    if off == 0 && len == 0 {
        return Ok(());
    }
    let end = u64::from(off) + u64::from(len);
    if off < 64 || end >= header.len() as u64 || header[end as usize] != 0 {
        return Err(format!(
            "{what} (bytes {off}..{end} of the {}-byte entry header) is not a NUL-terminated \
             string inside the header",
            header.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUBIN: &[u8] = include_bytes!("../../kernels/kernels_sm90.cubin");
    const FATBIN: &[u8] = include_bytes!("../../kernels/kernels.fatbin");

    // -- reading the committed images, independently of the checker ----------------------

    fn get(b: &[u8], at: usize, width: usize) -> Option<u64> {
        let s = b.get(at..at.checked_add(width)?)?;
        Some(s.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
    }

    fn put(b: &mut [u8], at: usize, width: usize, value: u64) {
        for (k, byte) in b[at..at + width].iter_mut().enumerate() {
            *byte = (value >> (8 * k)) as u8;
        }
    }

    /// A header or table field of an image: where it is, how wide, and whether it is an
    /// offset or size that the "past the end" test should push out of the image.
    #[derive(Clone, Debug)]
    struct Field {
        at: usize,
        width: usize,
        what: String,
        bound: bool,
    }

    /// The fields of an image, and the byte ranges of section contents (where flips keep
    /// the image plausible). `base` is where the ELF starts (inside a fatbin).
    #[derive(Default)]
    struct Layout {
        fields: Vec<Field>,
        contents: Vec<Range<usize>>,
    }

    impl Layout {
        fn field(&mut self, at: usize, width: usize, what: impl Into<String>, bound: bool) {
            self.fields.push(Field {
                at,
                width,
                what: what.into(),
                bound,
            });
        }
    }

    fn elf_layout(b: &[u8], base: usize, l: &mut Layout) {
        let e = &b[base..];
        let r = |at, w| get(e, at, w).unwrap() as usize;
        l.field(base + 32, 8, "e_phoff", true);
        l.field(base + 40, 8, "e_shoff", true);
        l.field(base + 56, 2, "e_phnum", true);
        l.field(base + 60, 2, "e_shnum", true);
        l.field(base + 62, 2, "e_shstrndx", false);
        let (phoff, phnum, shoff, shnum) = (r(32, 8), r(56, 2), r(40, 8), r(60, 2));
        for n in 0..phnum {
            let at = phoff + n * 56;
            l.field(base + at + 8, 8, format!("phdr {n} p_offset"), true);
            l.field(base + at + 32, 8, format!("phdr {n} p_filesz"), true);
            l.field(base + at + 40, 8, format!("phdr {n} p_memsz"), false);
        }
        let sh = |i: usize, at: usize, w: usize| r(shoff + i * 64 + at, w);
        for i in 1..shnum {
            let at = base + shoff + i * 64;
            let typ = sh(i, 4, 4) as u32;
            let nobits = typ == SHT_NOBITS;
            l.field(at, 4, format!("section {i} sh_name"), true);
            l.field(at + 4, 4, format!("section {i} sh_type"), false);
            l.field(at + 24, 8, format!("section {i} sh_offset"), !nobits);
            l.field(at + 32, 8, format!("section {i} sh_size"), !nobits);
            l.field(at + 40, 4, format!("section {i} sh_link"), false);
            l.field(at + 44, 4, format!("section {i} sh_info"), false);
            l.field(at + 56, 8, format!("section {i} sh_entsize"), false);
            let (off, size) = (sh(i, 24, 8), sh(i, 32, 8));
            if nobits || size == 0 {
                continue;
            }
            l.contents.push(base + off..base + off + size);
            match typ {
                SHT_SYMTAB => {
                    for n in 1..size / 24 {
                        let at = base + off + n * 24;
                        l.field(at, 4, format!("symbol {n} st_name"), false);
                        l.field(at + 6, 2, format!("symbol {n} st_shndx"), false);
                        l.field(at + 8, 8, format!("symbol {n} st_value"), false);
                        l.field(at + 16, 8, format!("symbol {n} st_size"), false);
                    }
                }
                SHT_RELA | SHT_REL => {
                    let es = if typ == SHT_RELA { 24 } else { 16 };
                    for n in 0..size / es {
                        let at = base + off + n * es;
                        l.field(at, 8, format!("section {i} r_offset {n}"), false);
                        l.field(at + 12, 4, format!("section {i} r_sym {n}"), false);
                    }
                }
                SHT_CUDA_INFO => {
                    let mut p = 0;
                    while p + 4 <= size {
                        let at = base + off + p;
                        l.field(at + 2, 2, format!("section {i} record size at {p}"), false);
                        let (fmt, v) = (b[at], r(off + p + 2, 2));
                        if fmt == 4 {
                            for k in (0..v).step_by(4) {
                                l.field(at + 4 + k, 4, format!("section {i} record word"), false);
                            }
                            p += 4 + v;
                        } else {
                            p += 4;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn layout(b: &[u8]) -> Layout {
        let mut l = Layout::default();
        if b[..4] == ELF_MAGIC {
            elf_layout(b, 0, &mut l);
            return l;
        }
        l.field(8, 8, "fatbin size", true);
        let mut p = 16;
        while p < b.len() {
            let (hs, size) = (
                get(b, p + 4, 4).unwrap() as usize,
                get(b, p + 8, 8).unwrap() as usize,
            );
            l.field(p, 2, "entry kind", false);
            l.field(p + 4, 4, "entry header size", true);
            l.field(p + 8, 8, "entry payload size", true);
            l.field(p + 16, 4, "entry compressed size", false);
            l.field(p + 20, 4, "entry options reference", false);
            l.field(p + 32, 4, "entry name offset", false);
            l.field(p + 36, 4, "entry name length", false);
            l.field(p + 40, 8, "entry flags", false);
            if get(b, p, 2) == Some(u64::from(FATBIN_ELF)) {
                elf_layout(b, p + hs, &mut l);
            } else {
                l.contents.push(p + hs..p + hs + size);
            }
            p += hs + size;
        }
        l
    }

    // -- an independent, simpler walk of what `check` relies on ---------------------------

    fn rewalk(b: &[u8]) -> Result<(), String> {
        let len = b.len() as u128;
        let rd = |at: u128, w: usize| -> Result<u128, String> {
            usize::try_from(at)
                .ok()
                .and_then(|at| get(b, at, w))
                .map(u128::from)
                .ok_or_else(|| format!("read of {w} bytes at {at} out of bounds"))
        };
        if b.get(..4) == Some(&FATBIN_MAGIC[..]) {
            let mut p = 16u128;
            let end = 16 + rd(8, 8)?;
            if end > len {
                return Err("fatbin size past the end".into());
            }
            while p < end {
                let (kind, hs, size) = (rd(p, 2)?, rd(p + 4, 4)?, rd(p + 8, 8)?);
                if p + hs + size > end {
                    return Err(format!("entry at {p} past the end"));
                }
                let payload = &b[(p + hs) as usize..(p + hs + size) as usize];
                if kind == 2 {
                    rewalk(payload).map_err(|m| format!("entry at {p}: {m}"))?;
                } else if !payload.contains(&0) {
                    return Err(format!("PTX at {p} without NUL"));
                }
                p += hs + size;
            }
            return Ok(());
        }
        let (phoff, phnum, shoff, shnum) = (rd(32, 8)?, rd(56, 2)?, rd(40, 8)?, rd(60, 2)?);
        if phoff + 56 * phnum > len || shoff + 64 * shnum > len {
            return Err("header table past the end".into());
        }
        for n in 0..phnum {
            let at = phoff + 56 * n;
            if rd(at + 8, 8)? + rd(at + 32, 8)? > len {
                return Err(format!("segment {n} past the end"));
            }
        }
        let sec = |i: u128| -> Result<(u128, u128, u128, u128, u128), String> {
            let at = shoff + 64 * i;
            Ok((
                rd(at + 4, 4)?,
                rd(at + 24, 8)?,
                rd(at + 32, 8)?,
                rd(at + 40, 4)?,
                rd(at + 44, 4)?,
            ))
        };
        let shstrndx = rd(62, 2)?;
        if shstrndx >= shnum {
            return Err("e_shstrndx out of range".into());
        }
        let shstrsize = sec(shstrndx)?.2;
        for i in 0..shnum {
            let (typ, off, size, link, info) = sec(i)?;
            if rd(shoff + 64 * i, 4)? >= shstrsize {
                return Err(format!("section {i} name outside .shstrtab"));
            }
            if typ != u128::from(SHT_NOBITS) && off + size > len {
                return Err(format!("section {i} past the end"));
            }
            match typ as u32 {
                SHT_SYMTAB => {
                    let strsize = sec(link)?.2;
                    for n in 0..size / 24 {
                        let at = off + 24 * n;
                        let shndx = rd(at + 6, 2)?;
                        if rd(at, 4)? >= strsize {
                            return Err(format!("symbol {n} name outside .strtab"));
                        }
                        if shndx >= shnum && shndx < 0xff00 {
                            return Err(format!("symbol {n} in a missing section"));
                        }
                        if shndx > 0 && shndx < shnum {
                            let s = sec(shndx)?;
                            if rd(at + 8, 8)? + rd(at + 16, 8)? > s.2 {
                                return Err(format!("symbol {n} outside its section"));
                            }
                        }
                    }
                }
                SHT_RELA | SHT_REL => {
                    let es = if typ == u128::from(SHT_RELA) { 24 } else { 16 };
                    let nsyms = sec(link)?.2 / 24;
                    let target = sec(info)?.2;
                    for n in 0..size / es {
                        let at = off + es * n;
                        if rd(at + 12, 4)? >= nsyms {
                            return Err(format!("relocation {n} of section {i}: bad symbol"));
                        }
                        if rd(at, 8)? + 8 > target {
                            return Err(format!("relocation {n} of section {i} past its target"));
                        }
                    }
                }
                SHT_CUDA_INFO => {
                    let mut p = 0;
                    while p < size {
                        let next = p
                            + 4
                            + if rd(off + p, 1)? == 4 {
                                rd(off + p + 2, 2)?
                            } else {
                                0
                            };
                        if next > size {
                            return Err(format!("record at {p} of section {i} past its end"));
                        }
                        p = next;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    // -- tests ---------------------------------------------------------------------------

    #[test]
    fn committed_images_pass() {
        assert_eq!(check(CUBIN), Ok(Kind::Cubin));
        assert_eq!(check(FATBIN), Ok(Kind::Fatbin));
        rewalk(CUBIN).unwrap();
        rewalk(FATBIN).unwrap();
    }

    #[test]
    fn every_truncation_fails() {
        for image in [CUBIN, FATBIN] {
            for n in 0..image.len() {
                assert!(
                    check(&image[..n]).is_err(),
                    "accepted {n} of {} bytes",
                    image.len()
                );
            }
        }
    }

    #[test]
    fn offsets_and_sizes_past_the_end_fail() {
        for image in [CUBIN, FATBIN] {
            let len = image.len() as u64;
            let l = layout(image);
            let bound: Vec<&Field> = l.fields.iter().filter(|f| f.bound).collect();
            assert!(bound.len() > 50, "{} fields", bound.len());
            for f in bound {
                let max = if f.width == 8 {
                    u64::MAX
                } else {
                    (1 << (8 * f.width)) - 1
                };
                for value in [len + 1, len + 8, len * 2, u64::from(u32::MAX), u64::MAX] {
                    let value = value.min(max);
                    let mut m = image.to_vec();
                    put(&mut m, f.at, f.width, value);
                    assert!(
                        check(&m).is_err(),
                        "{} (byte {}) = {value:#x} accepted",
                        f.what,
                        f.at
                    );
                }
            }
        }
    }

    /// The symbols of `image`: the offset of each 24-byte entry, from the first ELF in it.
    fn symbol_entries(image: &[u8]) -> Vec<usize> {
        let elf_at = image.windows(4).position(|w| w == ELF_MAGIC).unwrap();
        let elf = &image[elf_at..];
        let field = |at: usize, n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&elf[at..at + n]);
            u64::from_le_bytes(b) as usize
        };
        let (shoff, shnum) = (field(0x28, 8), field(0x3c, 2));
        let symtab = (0..shnum)
            .map(|i| shoff + i * 64)
            .find(|&o| field(o + 4, 4) == SHT_SYMTAB as usize)
            .unwrap();
        let (off, size) = (field(symtab + 24, 8), field(symtab + 32, 8));
        (1..size / 24).map(|n| elf_at + off + n * 24).collect()
    }

    /// The fatbin fuzz's crashes on an H100 (driver 580): one byte, the `st_info` of the
    /// data symbol `table`, from 0x01 (local object) to 0x4b (binding 4, type 11), crashed
    /// `cuModuleGetFunction("bump")` (seed 54324596601450509, mutation 5364); the function
    /// symbol `spin` moved to `SHN_ABS` (0xfff1) crashed `cuModuleLoadData` (seed 2,
    /// mutation 7224). Every such kind of every symbol is refused.
    #[test]
    fn symbols_of_other_kinds_or_outside_the_sections_are_refused() {
        for image in [CUBIN, FATBIN] {
            let entries = symbol_entries(image);
            assert!(entries.len() > 20);
            for (i, &at) in entries.iter().enumerate() {
                let n = i + 1;
                let info = image[at + 4];
                let mut bad_infos = vec![0x40 | (info & 0xf), 0x30 | (info & 0xf)];
                bad_infos.extend([0xb, 0x4, 0xa, 0xd].map(|typ| (info & 0xf0) | typ));
                if info & 0xf == 2 {
                    bad_infos.push((info & 0xf0) | 1); // a function made an object in code
                }
                for bad in bad_infos {
                    let mut m = image.to_vec();
                    m[at + 4] = bad;
                    let e = check(&m).unwrap_err().to_string();
                    assert!(e.contains(&format!("symbol {n} ")), "{bad:#x}: {e}");
                }
                for shndx in [0xfff1u16, 0xfff2, 0xff00] {
                    let mut m = image.to_vec();
                    m[at + 6..at + 8].copy_from_slice(&shndx.to_le_bytes());
                    let e = check(&m).unwrap_err().to_string();
                    assert!(e.contains(&format!("symbol {n} ")), "{shndx:#x}: {e}");
                }
            }
        }
    }

    #[test]
    fn messages_name_the_structure() {
        let mut m = CUBIN.to_vec();
        let l = layout(CUBIN);
        let f = l
            .fields
            .iter()
            .find(|f| f.what == "section 7 sh_size")
            .unwrap();
        put(&mut m, f.at, 8, 100_000);
        let e = check(&m).unwrap_err().to_string();
        assert!(
            e.starts_with("section 7 (.nv.info") && e.contains(") ends at byte"),
            "{e}"
        );
        assert!(
            e.ends_with(&format!("past the end of the {}-byte image", CUBIN.len())),
            "{e}"
        );
        let e = check(&FATBIN[..100]).unwrap_err().to_string();
        assert!(
            e.contains("fatbin header says 23752 bytes follow it"),
            "{e}"
        );
    }

    #[test]
    fn compressed_and_foreign_images_are_refused() {
        // The PTX entry's flags: set the compression bit.
        let mut m = FATBIN.to_vec();
        let ptx = 16 + 64 + get(FATBIN, 16 + 8, 8).unwrap() as usize;
        put(&mut m, ptx + 40, 8, 0x2011);
        assert!(check(&m).unwrap_err().to_string().contains("--no-compress"));
        // A host ELF (x86-64).
        let mut m = CUBIN.to_vec();
        put(&mut m, 18, 2, 62);
        assert!(
            check(&m)
                .unwrap_err()
                .to_string()
                .contains("not a CUDA cubin")
        );
        assert!(check(b"//\n.version 8.0\n").is_err());
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

    fn mutate(rng: &mut XorShift, image: &[u8], l: &Layout, m: &mut Vec<u8>) {
        m.clear();
        m.extend_from_slice(image);
        let len = image.len() as u64;
        match rng.below(10) {
            0 => m.truncate(rng.below(image.len())),
            1..=3 => {
                let f = &l.fields[rng.below(l.fields.len())];
                let old = get(m, f.at, f.width).unwrap();
                let delta = 1 + rng.next() % 16;
                let value = match rng.below(9) {
                    0 => rng.next(),
                    1 => len,
                    2 => len - 1,
                    3 => len + 1,
                    4 => 0,
                    5 => u64::from(u32::MAX),
                    6 => u64::MAX,
                    7 => old.wrapping_add(delta),
                    _ => old.wrapping_sub(delta),
                };
                put(m, f.at, f.width, value);
            }
            4..=5 => {
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(m.len());
                    m[at] ^= 1 << rng.below(8);
                }
            }
            _ => {
                let r = &l.contents[rng.below(l.contents.len())];
                for _ in 0..1 + rng.below(4) {
                    let at = r.start + rng.below(r.len());
                    m[at] = rng.next() as u8;
                }
            }
        }
    }

    #[test]
    fn accepted_mutations_stay_in_bounds() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut m = Vec::new();
        let mut accepted = [0usize; 2];
        for (k, image) in [CUBIN, FATBIN].into_iter().enumerate() {
            let l = layout(image);
            for n in 0..10_000 {
                mutate(&mut rng, image, &l, &mut m);
                if check(&m).is_ok() {
                    accepted[k] += 1;
                    if let Err(e) = rewalk(&m) {
                        panic!(
                            "mutation {n} of image {k} passed the check but not the re-walk: {e}"
                        );
                    }
                }
            }
        }
        eprintln!(
            "accepted mutations: cubin {}, fatbin {}",
            accepted[0], accepted[1]
        );
        assert!(accepted.iter().all(|&a| a > 500), "{accepted:?}");
    }

    /// Prints the verdict on other images: `CUDA_BRAND_CHECK_IMAGES=a.cubin:b.fatbin cargo
    /// test --lib image::tests::verdicts -- --nocapture`. Does nothing without the variable.
    #[test]
    fn verdicts() {
        let Ok(list) = std::env::var("CUDA_BRAND_CHECK_IMAGES") else {
            return;
        };
        for path in list.split(':') {
            let image = std::fs::read(path).unwrap();
            println!("{path}: {:?}", check(&image));
        }
    }
}
