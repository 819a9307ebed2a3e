//! Fatbins: the container header, then every entry's header, strings and payload (an ELF
//! payload checked as a cubin). The layout is in the module docs of `image`.

use std::ops::Range;

use super::cubin::check_elf;
use super::{R, le, span, u16_at, u32_at, u64_at};

pub(super) const FATBIN_PTX: u16 = 1;
pub(super) const FATBIN_ELF: u16 = 2;
const FATBIN_FLAG_64BIT: u64 = 0x1;
const FATBIN_FLAG_DEBUG: u64 = 0x2;
const FATBIN_FLAG_LINUX: u64 = 0x10;
const FATBIN_FLAG_WINDOWS: u64 = 0x40;
pub(super) const FATBIN_FLAG_COMPRESS: u64 = 0x2000;

/// Checks a fatbin: its header, then its entries back to back up to its end, at least one.
pub(super) fn check_fatbin(b: &[u8]) -> R {
    check_fatbin_header(b)?;
    let mut p = 16;
    let mut n = 0;
    while p < b.len() {
        n += 1;
        p = check_entry(b, p, n)?;
    }
    if n == 0 {
        return Err("the fatbin holds no entries".into());
    }
    Ok(())
}

/// The 16-byte header: version 1, header size 16, and the size of what follows exactly the
/// rest of the image.
fn check_fatbin_header(b: &[u8]) -> R {
    let len = b.len();
    let hdr = "the fatbin header";
    if len < 16 {
        return Err(format!(
            "the image has {len} bytes, fewer than a fatbin header's 16"
        ));
    }
    let version = u16_at(b, 4, hdr)?;
    let header_size = u16_at(b, 6, hdr)?;
    let size = u64_at(b, 8, hdr)?;
    if version != 1 {
        return Err(format!("fatbin version {version} is not 1"));
    }
    if header_size != 16 {
        return Err(format!("the fatbin header size is {header_size}, not 16"));
    }
    if Some(size) != (len as u64).checked_sub(16) {
        return Err(format!(
            "the fatbin header says {size} bytes follow it, but the image has {} after its \
             16-byte header",
            len - 16
        ));
    }
    Ok(())
}

/// The fields of an entry's header that this check reads.
struct EntryHeader {
    kind: u16,
    version: u16,
    hsize: u32,
    psize: u64,
    compressed: u32,
    options: u32,
    arch: u32,
    name_off: u32,
    name_len: u32,
    flags: u64,
    zero: u64,
    uncompressed: u64,
}

/// Checks entry `n`, which starts at byte `p`; returns where the next one starts.
fn check_entry(b: &[u8], p: usize, n: usize) -> R<usize> {
    let len = b.len();
    let what = format!("fatbin entry {n} (at byte {p})");
    if len - p < 64 {
        return Err(format!(
            "{what}: its 64-byte header is cut off by the end of the {len}-byte image"
        ));
    }
    let e = read_entry_header(&b[p..], &what)?;
    check_entry_header(&e, &what)?;
    let (hsize, psize) = (e.hsize, e.psize);
    let header = &b[span(
        &format!("{what}'s header"),
        p as u64,
        u64::from(hsize),
        len,
        "image",
    )?];
    let payload = span(
        &format!("{what}'s {psize}-byte payload"),
        (p as u64) + u64::from(hsize),
        psize,
        len,
        "image",
    )?;
    check_entry_encoding(&e, &what)?;
    check_entry_strings(header, &e, &what)?;
    check_entry_payload(&b[payload.clone()], &payload, &e, &what)?;
    Ok(payload.end)
}

/// The 64 fixed bytes of an entry's header (`e` holds at least 64 bytes).
fn read_entry_header(e: &[u8], what: &str) -> R<EntryHeader> {
    Ok(EntryHeader {
        kind: u16_at(e, 0, what)?,
        version: u16_at(e, 2, what)?,
        hsize: u32_at(e, 4, what)?,
        psize: u64_at(e, 8, what)?,
        compressed: u32_at(e, 16, what)?,
        options: u32_at(e, 20, what)?,
        arch: u32_at(e, 28, what)?,
        name_off: u32_at(e, 32, what)?,
        name_len: u32_at(e, 36, what)?,
        flags: u64_at(e, 40, what)?,
        zero: u64_at(e, 48, what)?,
        uncompressed: u64_at(e, 56, what)?,
    })
}

/// Kind PTX or ELF, version 0x0101, a header of at least 64 bytes in multiples of 8.
fn check_entry_header(e: &EntryHeader, what: &str) -> R {
    let &EntryHeader {
        kind,
        version,
        hsize,
        ..
    } = e;
    if kind != FATBIN_PTX && kind != FATBIN_ELF {
        return Err(format!("{what} has kind {kind}, not PTX (1) or ELF (2)"));
    }
    if version != 0x0101 {
        return Err(format!("{what} has version {version:#06x}, not 0x0101"));
    }
    if hsize < 64 || hsize % 8 != 0 {
        return Err(format!(
            "{what} has a {hsize}-byte header, not a multiple of 8 of at least 64"
        ));
    }
    Ok(())
}

/// A payload of whole 8-byte words, not compressed, for 64-bit code, with known flags and
/// the zero field zero.
fn check_entry_encoding(e: &EntryHeader, what: &str) -> R {
    let &EntryHeader {
        psize,
        compressed,
        flags,
        zero,
        uncompressed,
        ..
    } = e;
    if psize % 8 != 0 {
        return Err(format!(
            "{what}'s payload has {psize} bytes, not a multiple of 8"
        ));
    }
    if flags & FATBIN_FLAG_COMPRESS != 0 || compressed != 0 || uncompressed != 0 {
        return Err(format!(
            "{what} is compressed, and its stream cannot be bounded without decompressing \
             it; build the fatbin with nvcc --no-compress"
        ));
    }
    let known = FATBIN_FLAG_64BIT | FATBIN_FLAG_DEBUG | FATBIN_FLAG_LINUX | FATBIN_FLAG_WINDOWS;
    if flags & !known != 0 {
        return Err(format!(
            "{what} has flags {flags:#x}, with bits this check does not know"
        ));
    }
    if flags & FATBIN_FLAG_64BIT == 0 {
        return Err(format!("{what} is for 32-bit code"));
    }
    if zero != 0 {
        return Err(format!(
            "{what} has {zero:#x} in a header field that is always zero"
        ));
    }
    Ok(())
}

/// The file name and the compiler options the entry's `header` points to.
fn check_entry_strings(header: &[u8], e: &EntryHeader, what: &str) -> R {
    let &EntryHeader {
        hsize,
        options,
        name_off,
        name_len,
        ..
    } = e;
    header_string(header, name_off, name_len, &format!("{what}'s file name"))?;
    if options != 0 {
        if options < 64 || options % 4 != 0 {
            return Err(format!(
                "{what} puts its compiler options at byte {options} of its header, not after \
                 the first 64 bytes"
            ));
        }
        let at = options as usize;
        let (Some(off), Some(olen)) = (
            le::<4>(header, at).map(u32::from_le_bytes),
            le::<4>(header, at + 4).map(u32::from_le_bytes),
        ) else {
            return Err(format!(
                "{what}'s compiler-options reference at byte {options} is past the end of its \
                 {hsize}-byte header"
            ));
        };
        header_string(header, off, olen, &format!("{what}'s compiler options"))?;
    }
    Ok(())
}

/// The entry's payload (`body`, at `payload` in the image): an ELF checked as a cubin, or
/// PTX with a NUL.
fn check_entry_payload(body: &[u8], payload: &Range<usize>, e: &EntryHeader, what: &str) -> R {
    let &EntryHeader {
        kind, psize, arch, ..
    } = e;
    match kind {
        FATBIN_ELF => check_elf(body).map_err(|m| {
            format!(
                "{what}, an ELF for sm_{arch} at bytes {}..{}: {m}",
                payload.start, payload.end
            )
        })?,
        _ => {
            if !body.contains(&0) {
                return Err(format!(
                    "{what}: its PTX has no NUL before the end of its {psize}-byte payload"
                ));
            }
        }
    }
    Ok(())
}

/// A string that an entry header points to: after the fixed 64 bytes, NUL-terminated
/// inside the header. `(0, 0)` is no string.
fn header_string(header: &[u8], off: u32, len: u32, what: &str) -> R {
    if off == 0 && len == 0 {
        return Ok(());
    }
    let end = u64::from(off) + u64::from(len);
    if off < 64 || end >= header.len() as u64 || header[end as usize] != 0 {
        return Err(format!(
            "{what} (bytes {off}..{end} of the {}-byte entry header) is not a NUL-terminated \
             string inside the header",
            header.len()
        ));
    }
    Ok(())
}
