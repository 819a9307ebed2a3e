//! Kernel parameter lists from a cubin: the `.nv.info.<kernel>` sections'
//! `EIATTR_KPARAM_INFO` records and the parameter space.

use super::{MAX_PARAM_BYTES, ParamList, ParamTable};
use crate::image::elf::{EM_CUDA, SHT_CUDA_INFO};
use crate::image::nv_info::{Record, walk_records, words};
use crate::image::{c_str, le};

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
        match bytes_of(off, size).and_then(nv_info_params) {
            Some(list) => table.add(kernel, list),
            None => table.unknown(kernel),
        }
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
