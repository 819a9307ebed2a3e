//! Note sections (`SHT_NOTE`): every note inside its section, and NVIDIA's `cuinfo` and
//! `tkinfo` descriptors.

use super::nv_info::words;
use super::{R, c_str, le};

/// Every note lies inside `data`; only NVIDIA's `cuinfo` (type 1000) and `tkinfo` (type
/// 2000, whose string offsets must be NUL-terminated inside the note) are accepted.
pub(super) fn check_notes(data: &[u8], what: &str) -> R {
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
