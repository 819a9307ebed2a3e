//! `.debug_frame`: the one debug section accepted.

use std::collections::HashSet;

use super::{R, c_str, le};

/// Every CIE and FDE length lies inside the section, every CIE has its augmentation string,
/// and every FDE points at a CIE before it.
pub(super) fn check_debug_frame(d: &[u8], what: &str) -> R {
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
