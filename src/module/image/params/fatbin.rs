//! Kernel parameter lists from a fatbin: those of every uncompressed cubin and PTX entry.

use super::ParamTable;
use super::cubin::elf_entries;
use super::ptx::ptx_entries;
use crate::module::image::fatbin::{FATBIN_ELF, FATBIN_FLAG_COMPRESS, FATBIN_PTX};

/// Every uncompressed entry of a fatbin (see the module docs of `image`), into `table`;
/// walks the entries with every offset checked, stopping at the first that does not fit.
pub(super) fn fatbin_entries(b: &[u8], table: &mut ParamTable) {
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
