//! `.nv.info` records about a kernel's parameters: `EIATTR_CBANK_PARAM_SIZE`,
//! `EIATTR_PARAM_CBANK` (inside the kernel's `.nv.constant0.<kernel>`) and
//! `EIATTR_KPARAM_INFO`; once every record is read, each parameter lies inside the
//! parameter space and the ordinals are `0..n`.

use super::InfoCheck;
use crate::module::image::R;
use crate::module::image::elf::SHT_PROGBITS;

impl InfoCheck<'_, '_> {
    /// `EIATTR_CBANK_PARAM_SIZE` (value `v`), at most once.
    pub(super) fn cbank_param_size(&mut self, v: u16) -> R {
        let what = self.what;
        if self.cbank_param_size.replace(u64::from(v)).is_some() {
            return Err(format!("{what}: EIATTR_CBANK_PARAM_SIZE appears twice"));
        }
        Ok(())
    }

    /// `EIATTR_KPARAM_INFO`: index, ordinal and offset, flags with the size in bits 18..32.
    pub(super) fn kparam_info(&mut self, n: usize, attr: u8, payload: &[u8], w: &[u32]) -> R {
        self.exact(n, attr, payload, 12)?;
        let ordinal = w[1] & 0xffff;
        let offset = u64::from(w[1] >> 16);
        let size = u64::from(w[2] >> 18);
        self.params.push((ordinal, offset + size));
        Ok(())
    }

    /// `EIATTR_PARAM_CBANK`: the symbol of the kernel's `.nv.constant0.<kernel>`, and the
    /// parameters' offset and size inside it; at most once.
    pub(super) fn param_cbank(&mut self, n: usize, attr: u8, payload: &[u8], w: &[u32]) -> R {
        let what = self.what;
        let elf = self.elf;
        let kernel = self.kernel;
        self.exact(n, attr, payload, 8)?;
        self.symbol(n, w[0], attr)?;
        let sym = &elf.symbols[w[0] as usize];
        let sec = usize::from(sym.shndx);
        let bank = elf
            .sections
            .get(sec)
            .filter(|b| sec != 0 && b.typ == SHT_PROGBITS)
            .filter(|b| kernel.is_some_and(|k| b.name.strip_prefix(b".nv.constant0.") == Some(k)));
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
        if self.param_cbank.replace(size).is_some() {
            return Err(format!("{what}: EIATTR_PARAM_CBANK appears twice"));
        }
        Ok(())
    }

    /// Parameters: ordinals 0..n once each, every one inside the parameter space.
    pub(super) fn parameters(&self) -> R {
        let what = self.what;
        let params = &self.params;
        let space = match (self.cbank_param_size, self.param_cbank) {
            (Some(a), Some(b)) if a != b => {
                return Err(format!(
                    "{what}: EIATTR_CBANK_PARAM_SIZE ({a}) and EIATTR_PARAM_CBANK's size ({b}) \
                     differ"
                ));
            }
            (Some(a), _) | (None, Some(a)) => a,
            (None, None) => 0,
        };
        let mut seen = vec![false; params.len()];
        for &(ordinal, end) in params {
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
                    "{what}: parameter {ordinal} ends at byte {end} of a {space}-byte parameter \
                     space"
                ));
            }
        }
        Ok(())
    }
}
