//! Relocation tables (`SHT_REL`, `SHT_RELA`) and the relocation-action table
//! (`.nv.rel.action`): every relocation writes inside its target section.

use super::elf::{Elf, SHF_EXECINSTR, SHT_PROGBITS, SHT_RELA, Section};
use super::{R, u32_at, u64_at};

/// A relocation table: its entry size, its target (a `PROGBITS` section), and every entry's
/// symbol and the bytes it writes.
pub(super) fn check_relocations(elf: &Elf<'_>, i: usize) -> R {
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
pub(super) fn check_relocation_actions(s: &Section<'_>, what: &str) -> R {
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
