//! `.nv.info` and `.nv.info.<kernel>` sections (`SHT_CUDA_INFO`): the record walk (which
//! `.nv.compat` shares), then each record by its kind: the attributes known here
//! (`attributes`), symbol indices and payload sizes (here), instruction offsets into the
//! kernel's code (`code`), and the kernel's parameters (`param_space`).

mod attributes;
mod code;
mod param_space;

use super::elf::{Elf, Section};
use super::{R, le};
use attributes::{Attr, attribute, attribute_name};

/// Walks `.nv.info`-style records (format byte, attribute byte, `u16` value or payload
/// size, then for `EIFMT_SVAL` the payload), calling `f(record index, format, attribute,
/// value or payload)`; the records must end exactly at the section's end.
pub(super) fn walk_records<'a>(
    data: &'a [u8],
    what: &str,
    mut f: impl FnMut(usize, u8, u8, Record<'a>) -> R,
) -> R {
    let mut p = 0;
    let mut n = 0;
    while p < data.len() {
        let (Some(&fmt), Some(&attr), Some(v)) =
            (data.get(p), data.get(p + 1), le::<2>(data, p + 2))
        else {
            return Err(format!(
                "{what}: record {n} at byte {p} is cut off by the section's end ({} bytes)",
                data.len()
            ));
        };
        let v = u16::from_le_bytes(v);
        let (record, next) = match fmt {
            1..=3 => (Record::Value(v), p + 4),
            4 => {
                if v % 4 != 0 {
                    return Err(format!(
                        "{what}: record {n} (attribute {attr:#04x}) has a {v}-byte payload, not \
                         a multiple of 4"
                    ));
                }
                let end = p + 4 + usize::from(v);
                let Some(payload) = data.get(p + 4..end) else {
                    return Err(format!(
                        "{what}: record {n} (attribute {attr:#04x}) ends at byte {end}, past the \
                         end of the {}-byte section",
                        data.len()
                    ));
                };
                (Record::Payload(payload), end)
            }
            _ => {
                return Err(format!(
                    "{what}: record {n} at byte {p} has format {fmt:#04x}, not one of \
                     EIFMT_NVAL/BVAL/HVAL/SVAL (1-4)"
                ));
            }
        };
        f(n, fmt, attr, record)?;
        p = next;
        n += 1;
    }
    Ok(())
}

/// One record's contents.
#[derive(Clone, Copy)]
pub(super) enum Record<'a> {
    /// `EIFMT_NVAL`, `EIFMT_BVAL`, `EIFMT_HVAL`: the 16-bit value in the record header.
    Value(u16),
    /// `EIFMT_SVAL`: the payload.
    Payload(&'a [u8]),
}

/// The little-endian 32-bit words of a payload (a trailing partial word is dropped).
pub(super) fn words(payload: &[u8]) -> impl Iterator<Item = u32> + '_ {
    payload
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

/// The check of one `.nv.info` section's records, and what they say about the kernel's
/// parameters, checked once every record is read.
struct InfoCheck<'e, 'a> {
    elf: &'e Elf<'a>,
    /// `section 7 (.nv.info.scale)`, for messages.
    what: &'e str,
    /// The kernel of `.nv.info.<kernel>`; `None` for the global `.nv.info`.
    kernel: Option<&'a [u8]>,
    /// The kernel's code, `.text.<kernel>`, which the section's `sh_info` names.
    text: Option<&'e Section<'a>>,
    /// `(ordinal, end of the parameter)` of every `EIATTR_KPARAM_INFO`.
    params: Vec<(u32, u64)>,
    /// `EIATTR_CBANK_PARAM_SIZE`, once seen.
    cbank_param_size: Option<u64>,
    /// The size in `EIATTR_PARAM_CBANK`, once seen.
    param_cbank: Option<u64>,
}

/// Section `i`, an `.nv.info` or `.nv.info.<kernel>`: its `sh_info`, every record, and the
/// kernel's parameters.
pub(super) fn check_nv_info(elf: &Elf<'_>, i: usize) -> R {
    let s = &elf.sections[i];
    let what = elf.describe(i);
    let kernel = s.name.strip_prefix(b".nv.info.");
    // A kernel's attributes point into its code, `.text.<kernel>`, which sh_info names.
    let text = code::kernel_code(elf, s.info, kernel, &what)?;
    let mut check = InfoCheck {
        elf,
        what: &what,
        kernel,
        text,
        params: Vec::new(),
        cbank_param_size: None,
        param_cbank: None,
    };
    walk_records(s.data, &what, |n, fmt, attr, record| {
        check.record(n, fmt, attr, record)
    })?;
    check.parameters()
}

impl InfoCheck<'_, '_> {
    /// Record `n`: an attribute known here, and its contents by kind.
    fn record(&mut self, n: usize, fmt: u8, attr: u8, record: Record<'_>) -> R {
        let what = self.what;
        let global = self.kernel.is_none();
        let Some(kind) = attribute(global, fmt, attr) else {
            return Err(format!(
                "{what}: record {n} is attribute {attr:#04x}{} in format {fmt}, which this check \
                 does not know how to bound in {} .nv.info",
                attribute_name(attr).map_or(String::new(), |a| format!(" (EIATTR_{a})")),
                if global { "the global" } else { "a kernel's" }
            ));
        };
        let payload = match record {
            Record::Payload(p) => p,
            Record::Value(v) => {
                if kind == Attr::CbankParamSize {
                    self.cbank_param_size(v)?;
                }
                return Ok(());
            }
        };
        let w: Vec<u32> = words(payload).collect();
        match kind {
            Attr::Flag | Attr::CbankParamSize => unreachable_format(what, n),
            Attr::Words(k) => self.exact(n, attr, payload, 4 * k),
            Attr::SymbolValue => {
                self.exact(n, attr, payload, 8)?;
                self.symbol(n, w[0], attr)
            }
            Attr::Externs => w.iter().try_for_each(|&idx| self.symbol(n, idx, attr)),
            Attr::Offsets => w.iter().try_for_each(|&off| self.code_offset(n, off, attr)),
            Attr::MbarrierOffsets => self.mbarrier_offsets(n, attr, payload, &w),
            Attr::BranchTargets => self.branch_targets(n, attr, &w),
            Attr::KparamInfo => self.kparam_info(n, attr, payload, &w),
            Attr::ParamCbank => self.param_cbank(n, attr, payload, &w),
        }
    }

    /// Record `n` (attribute `attr`) names symbol `idx`: one of the image's.
    fn symbol(&self, n: usize, idx: u32, attr: u8) -> R {
        let what = self.what;
        let nsyms = self.elf.nsyms();
        if idx as usize >= nsyms {
            return Err(format!(
                "{what}: record {n} (attribute {attr:#04x}) names symbol {idx}, but there are \
                 {nsyms} symbols"
            ));
        }
        Ok(())
    }

    /// Record `n`'s payload has exactly `want` bytes.
    fn exact(&self, n: usize, attr: u8, payload: &[u8], want: usize) -> R {
        let what = self.what;
        if payload.len() == want {
            Ok(())
        } else {
            Err(format!(
                "{what}: record {n} (attribute {attr:#04x}) has {} bytes, not {want}",
                payload.len()
            ))
        }
    }
}

fn unreachable_format(what: &str, n: usize) -> R {
    // `attribute` gives Flag and CbankParamSize only for formats without a payload.
    Err(format!("{what}: record {n} has an unexpected format"))
}
