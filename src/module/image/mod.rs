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
//!
//! # Where each check lives
//!
//! This file holds the entry point ([`check`]) and the bounded reads every check uses; a
//! cubin's checks run in order from `cubin`; the ELF container (header, section and program
//! header tables) is checked in `elf` and `sections`, the symbol table in `symbols`, relocations and `.nv.rel.action` in
//! `relocations`, `.nv.info` records in `nv_info` (split by record kind), `.nv.callgraph`
//! in `callgraph`, notes in `notes`, `.debug_frame` in `debug_frame`, and fatbins in
//! `fatbin`. `params` reads each kernel's parameter list from an image or PTX text.

#![forbid(unsafe_code)]

use std::fmt;
use std::ops::Range;

mod callgraph;
mod cubin;
mod debug_frame;
mod elf;
mod fatbin;
mod notes;
mod nv_info;
mod params;
mod relocations;
mod sections;
mod symbols;
#[cfg(test)]
mod tests;

pub(crate) use params::{table_of_image, table_of_ptx};

/// What [`check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageKind {
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
pub(crate) fn check(image: &[u8]) -> Result<ImageKind, ImageError> {
    let kind = match image.get(..4) {
        Some(m) if m == ELF_MAGIC => {
            cubin::check_elf(image).map_err(ImageError)?;
            ImageKind::Cubin
        }
        Some(m) if m == FATBIN_MAGIC => {
            fatbin::check_fatbin(image).map_err(ImageError)?;
            ImageKind::Fatbin
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
