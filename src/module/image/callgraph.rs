//! `.nv.callgraph`: 8-byte entries of symbol indices.

use super::R;
use super::elf::Elf;
use super::nv_info::words;

/// Every entry names a symbol of the image, or is one of the markers
/// `0xfffffffc..=0xffffffff`.
pub(super) fn check_callgraph(elf: &Elf<'_>, i: usize) -> R {
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
