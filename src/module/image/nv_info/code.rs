//! `.nv.info` records that point into the kernel's code: the exit and other instruction
//! offset lists, `EIATTR_MBARRIER_INSTR_OFFSETS` and `EIATTR_INDIRECT_BRANCH_TARGETS`,
//! each offset a whole instruction inside `.text.<kernel>`.

use super::InfoCheck;
use crate::module::image::R;
use crate::module::image::elf::{Elf, SHF_EXECINSTR, SHT_PROGBITS, Section};

/// The code a kernel's `.nv.info.<kernel>` points into: `.text.<kernel>`, which its
/// `sh_info` (`info`) must name; the global `.nv.info` (`kernel` `None`) names none.
pub(super) fn kernel_code<'e, 'a>(
    elf: &'e Elf<'a>,
    info: u32,
    kernel: Option<&[u8]>,
    what: &str,
) -> R<Option<&'e Section<'a>>> {
    match kernel {
        None => {
            if info != 0 {
                return Err(format!(
                    "{what} is the global .nv.info but names section {info} in sh_info"
                ));
            }
            Ok(None)
        }
        Some(k) => {
            let t = info as usize;
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
            Ok(Some(code))
        }
    }
}

impl InfoCheck<'_, '_> {
    /// Record `n` (attribute `attr`) points at byte `off` of the kernel's code: a whole
    /// instruction inside it.
    pub(super) fn code_offset(&self, n: usize, off: u32, attr: u8) -> R {
        let what = self.what;
        let size = self.text.map_or(0, |t| t.size);
        if off % 8 != 0 || u64::from(off) + 16 > size {
            return Err(format!(
                "{what}: record {n} (attribute {attr:#04x}) points at byte {off} of the kernel's \
                 {size}-byte code, not at a whole instruction inside it"
            ));
        }
        Ok(())
    }

    /// `EIATTR_MBARRIER_INSTR_OFFSETS`: 16-byte records, each starting with an instruction
    /// offset.
    pub(super) fn mbarrier_offsets(&self, n: usize, attr: u8, payload: &[u8], w: &[u32]) -> R {
        let what = self.what;
        if payload.len() % 16 != 0 {
            return Err(format!(
                "{what}: record {n} (EIATTR_MBARRIER_INSTR_OFFSETS) has {} bytes, not a \
                 multiple of 16",
                payload.len()
            ));
        }
        w.iter()
            .step_by(4)
            .try_for_each(|&off| self.code_offset(n, off, attr))
    }

    /// `EIATTR_INDIRECT_BRANCH_TARGETS`: per branch, its offset, two `u16`, a target count
    /// and that many target offsets, all inside the payload.
    pub(super) fn branch_targets(&self, n: usize, attr: u8, w: &[u32]) -> R {
        let what = self.what;
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
            self.code_offset(n, branch, attr)?;
            targets
                .iter()
                .try_for_each(|&t| self.code_offset(n, t, attr))?;
            k += 3 + targets.len();
        }
        Ok(())
    }
}
