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
//!
//! The PTX reader is in `ptx`, the cubin's in `cubin` and the fatbin's in `fatbin`.

mod cubin;
mod fatbin;
mod ptx;
#[cfg(test)]
mod tests;

use super::{ELF_MAGIC, FATBIN_MAGIC};
use cubin::elf_entries;
use fatbin::fatbin_entries;
use ptx::ptx_entries;

pub(crate) use crate::launch::{ParamList, ParamTable};

/// The kernels of PTX text.
pub(crate) fn table_of_ptx(text: &str) -> ParamTable {
    let mut table = ParamTable::default();
    ptx_entries(text.as_bytes(), &mut table);
    table
}

/// The kernels of a cubin or fatbin image; empty for anything else or anything that
/// cannot be read.
pub(crate) fn table_of_image(image: &[u8]) -> ParamTable {
    let mut table = ParamTable::default();
    match image.get(..4) {
        Some(m) if m == ELF_MAGIC => elf_entries(image, &mut table),
        Some(m) if m == FATBIN_MAGIC => fatbin_entries(image, &mut table),
        _ => {}
    }
    table
}

/// The largest parameter space a kernel can have (CUDA 12.1 on Volta or newer: 32 764
/// bytes); anything larger is not a kernel signature.
const MAX_PARAM_BYTES: usize = 32_764;
