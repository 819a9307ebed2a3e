//! The image check against the committed cubin and fatbin: both pass, every truncation and
//! every offset or size pushed past the end fails, symbols of other kinds are refused,
//! messages name the structure, and mutations it accepts pass an independent re-walk.

use std::ops::Range;

use super::elf::{SHT_CUDA_INFO, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_SYMTAB};
use super::fatbin::FATBIN_ELF;
use super::{ELF_MAGIC, FATBIN_MAGIC, ImageKind, check};

const CUBIN: &[u8] = include_bytes!("../../../kernels/kernels_sm90.cubin");
const FATBIN: &[u8] = include_bytes!("../../../kernels/kernels.fatbin");

// -- reading the committed images, independently of the checker ----------------------

fn get(b: &[u8], at: usize, width: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(width)?)?;
    Some(s.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
}

fn put(b: &mut [u8], at: usize, width: usize, value: u64) {
    for (k, byte) in b[at..at + width].iter_mut().enumerate() {
        *byte = (value >> (8 * k)) as u8;
    }
}

/// A header or table field of an image: where it is, how wide, and whether it is an
/// offset or size that the "past the end" test should push out of the image.
#[derive(Clone, Debug)]
struct Field {
    at: usize,
    width: usize,
    what: String,
    bound: bool,
}

/// The fields of an image, and the byte ranges of section contents (where flips keep
/// the image plausible). `base` is where the ELF starts (inside a fatbin).
#[derive(Default)]
struct Layout {
    fields: Vec<Field>,
    contents: Vec<Range<usize>>,
}

impl Layout {
    fn field(&mut self, at: usize, width: usize, what: impl Into<String>, bound: bool) {
        self.fields.push(Field {
            at,
            width,
            what: what.into(),
            bound,
        });
    }
}

fn elf_layout(b: &[u8], base: usize, l: &mut Layout) {
    let e = &b[base..];
    let r = |at, w| get(e, at, w).unwrap() as usize;
    l.field(base + 32, 8, "e_phoff", true);
    l.field(base + 40, 8, "e_shoff", true);
    l.field(base + 56, 2, "e_phnum", true);
    l.field(base + 60, 2, "e_shnum", true);
    l.field(base + 62, 2, "e_shstrndx", false);
    let (phoff, phnum, shoff, shnum) = (r(32, 8), r(56, 2), r(40, 8), r(60, 2));
    for n in 0..phnum {
        let at = phoff + n * 56;
        l.field(base + at + 8, 8, format!("phdr {n} p_offset"), true);
        l.field(base + at + 32, 8, format!("phdr {n} p_filesz"), true);
        l.field(base + at + 40, 8, format!("phdr {n} p_memsz"), false);
    }
    let sh = |i: usize, at: usize, w: usize| r(shoff + i * 64 + at, w);
    for i in 1..shnum {
        let at = base + shoff + i * 64;
        let typ = sh(i, 4, 4) as u32;
        let nobits = typ == SHT_NOBITS;
        l.field(at, 4, format!("section {i} sh_name"), true);
        l.field(at + 4, 4, format!("section {i} sh_type"), false);
        l.field(at + 24, 8, format!("section {i} sh_offset"), !nobits);
        l.field(at + 32, 8, format!("section {i} sh_size"), !nobits);
        l.field(at + 40, 4, format!("section {i} sh_link"), false);
        l.field(at + 44, 4, format!("section {i} sh_info"), false);
        l.field(at + 56, 8, format!("section {i} sh_entsize"), false);
        let (off, size) = (sh(i, 24, 8), sh(i, 32, 8));
        if nobits || size == 0 {
            continue;
        }
        l.contents.push(base + off..base + off + size);
        match typ {
            SHT_SYMTAB => {
                for n in 1..size / 24 {
                    let at = base + off + n * 24;
                    l.field(at, 4, format!("symbol {n} st_name"), false);
                    l.field(at + 6, 2, format!("symbol {n} st_shndx"), false);
                    l.field(at + 8, 8, format!("symbol {n} st_value"), false);
                    l.field(at + 16, 8, format!("symbol {n} st_size"), false);
                }
            }
            SHT_RELA | SHT_REL => {
                let es = if typ == SHT_RELA { 24 } else { 16 };
                for n in 0..size / es {
                    let at = base + off + n * es;
                    l.field(at, 8, format!("section {i} r_offset {n}"), false);
                    l.field(at + 12, 4, format!("section {i} r_sym {n}"), false);
                }
            }
            SHT_CUDA_INFO => {
                let mut p = 0;
                while p + 4 <= size {
                    let at = base + off + p;
                    l.field(at + 2, 2, format!("section {i} record size at {p}"), false);
                    let (fmt, v) = (b[at], r(off + p + 2, 2));
                    if fmt == 4 {
                        for k in (0..v).step_by(4) {
                            l.field(at + 4 + k, 4, format!("section {i} record word"), false);
                        }
                        p += 4 + v;
                    } else {
                        p += 4;
                    }
                }
            }
            _ => {}
        }
    }
}

fn layout(b: &[u8]) -> Layout {
    let mut l = Layout::default();
    if b[..4] == ELF_MAGIC {
        elf_layout(b, 0, &mut l);
        return l;
    }
    l.field(8, 8, "fatbin size", true);
    let mut p = 16;
    while p < b.len() {
        let (hs, size) = (
            get(b, p + 4, 4).unwrap() as usize,
            get(b, p + 8, 8).unwrap() as usize,
        );
        l.field(p, 2, "entry kind", false);
        l.field(p + 4, 4, "entry header size", true);
        l.field(p + 8, 8, "entry payload size", true);
        l.field(p + 16, 4, "entry compressed size", false);
        l.field(p + 20, 4, "entry options reference", false);
        l.field(p + 32, 4, "entry name offset", false);
        l.field(p + 36, 4, "entry name length", false);
        l.field(p + 40, 8, "entry flags", false);
        if get(b, p, 2) == Some(u64::from(FATBIN_ELF)) {
            elf_layout(b, p + hs, &mut l);
        } else {
            l.contents.push(p + hs..p + hs + size);
        }
        p += hs + size;
    }
    l
}

// -- an independent, simpler walk of what `check` relies on ---------------------------

fn rewalk(b: &[u8]) -> Result<(), String> {
    if b.get(..4) == Some(&FATBIN_MAGIC[..]) {
        return rewalk_fatbin(b);
    }
    rewalk_elf(b)
}

/// Reads `w` bytes at `at` of `b`, or says it is out of bounds.
fn read_at(b: &[u8], at: u128, w: usize) -> Result<u128, String> {
    usize::try_from(at)
        .ok()
        .and_then(|at| get(b, at, w))
        .map(u128::from)
        .ok_or_else(|| format!("read of {w} bytes at {at} out of bounds"))
}

/// The fatbin's entries inside it, each ELF re-walked and each PTX holding a NUL.
fn rewalk_fatbin(b: &[u8]) -> Result<(), String> {
    let len = b.len() as u128;
    let rd = |at: u128, w: usize| read_at(b, at, w);
    let mut p = 16u128;
    let end = 16 + rd(8, 8)?;
    if end > len {
        return Err("fatbin size past the end".into());
    }
    while p < end {
        let (kind, hs, size) = (rd(p, 2)?, rd(p + 4, 4)?, rd(p + 8, 8)?);
        if p + hs + size > end {
            return Err(format!("entry at {p} past the end"));
        }
        let payload = &b[(p + hs) as usize..(p + hs + size) as usize];
        if kind == 2 {
            rewalk(payload).map_err(|m| format!("entry at {p}: {m}"))?;
        } else if !payload.contains(&0) {
            return Err(format!("PTX at {p} without NUL"));
        }
        p += hs + size;
    }
    Ok(())
}

/// A section header's `(type, offset, size, link, info)`.
type SectionFields = (u128, u128, u128, u128, u128);

/// Section `i`'s header fields, from the section header table at `shoff` of the ELF `b`.
fn section_fields(b: &[u8], shoff: u128, i: u128) -> Result<SectionFields, String> {
    let rd = |at: u128, w: usize| read_at(b, at, w);
    let at = shoff + 64 * i;
    Ok((
        rd(at + 4, 4)?,
        rd(at + 24, 8)?,
        rd(at + 32, 8)?,
        rd(at + 40, 4)?,
        rd(at + 44, 4)?,
    ))
}

/// The ELF's header tables, segments and sections inside it, then each section's contents.
fn rewalk_elf(b: &[u8]) -> Result<(), String> {
    let len = b.len() as u128;
    let rd = |at: u128, w: usize| read_at(b, at, w);
    let (phoff, phnum, shoff, shnum) = (rd(32, 8)?, rd(56, 2)?, rd(40, 8)?, rd(60, 2)?);
    if phoff + 56 * phnum > len || shoff + 64 * shnum > len {
        return Err("header table past the end".into());
    }
    for n in 0..phnum {
        let at = phoff + 56 * n;
        if rd(at + 8, 8)? + rd(at + 32, 8)? > len {
            return Err(format!("segment {n} past the end"));
        }
    }
    let sec = |i: u128| section_fields(b, shoff, i);
    let shstrndx = rd(62, 2)?;
    if shstrndx >= shnum {
        return Err("e_shstrndx out of range".into());
    }
    let shstrsize = sec(shstrndx)?.2;
    for i in 0..shnum {
        let (typ, off, size, _, _) = sec(i)?;
        if rd(shoff + 64 * i, 4)? >= shstrsize {
            return Err(format!("section {i} name outside .shstrtab"));
        }
        if typ != u128::from(SHT_NOBITS) && off + size > len {
            return Err(format!("section {i} past the end"));
        }
        rewalk_contents(b, shoff, shnum, i)?;
    }
    Ok(())
}

/// Section `i`'s symbols, relocations or `.nv.info` records inside what they point into.
fn rewalk_contents(b: &[u8], shoff: u128, shnum: u128, i: u128) -> Result<(), String> {
    let rd = |at: u128, w: usize| read_at(b, at, w);
    let sec = |i: u128| section_fields(b, shoff, i);
    let (typ, off, size, link, info) = sec(i)?;
    match typ as u32 {
        SHT_SYMTAB => {
            let strsize = sec(link)?.2;
            for n in 0..size / 24 {
                let at = off + 24 * n;
                let shndx = rd(at + 6, 2)?;
                if rd(at, 4)? >= strsize {
                    return Err(format!("symbol {n} name outside .strtab"));
                }
                if shndx >= shnum && shndx < 0xff00 {
                    return Err(format!("symbol {n} in a missing section"));
                }
                if shndx > 0 && shndx < shnum {
                    let s = sec(shndx)?;
                    if rd(at + 8, 8)? + rd(at + 16, 8)? > s.2 {
                        return Err(format!("symbol {n} outside its section"));
                    }
                }
            }
        }
        SHT_RELA | SHT_REL => {
            let es = if typ == u128::from(SHT_RELA) { 24 } else { 16 };
            let nsyms = sec(link)?.2 / 24;
            let target = sec(info)?.2;
            for n in 0..size / es {
                let at = off + es * n;
                if rd(at + 12, 4)? >= nsyms {
                    return Err(format!("relocation {n} of section {i}: bad symbol"));
                }
                if rd(at, 8)? + 8 > target {
                    return Err(format!("relocation {n} of section {i} past its target"));
                }
            }
        }
        SHT_CUDA_INFO => {
            let mut p = 0;
            while p < size {
                let next = p
                    + 4
                    + if rd(off + p, 1)? == 4 {
                        rd(off + p + 2, 2)?
                    } else {
                        0
                    };
                if next > size {
                    return Err(format!("record at {p} of section {i} past its end"));
                }
                p = next;
            }
        }
        _ => {}
    }
    Ok(())
}

// -- tests ---------------------------------------------------------------------------

#[test]
fn committed_images_pass() {
    assert_eq!(check(CUBIN), Ok(ImageKind::Cubin));
    assert_eq!(check(FATBIN), Ok(ImageKind::Fatbin));
    rewalk(CUBIN).unwrap();
    rewalk(FATBIN).unwrap();
}

#[test]
fn every_truncation_fails() {
    for image in [CUBIN, FATBIN] {
        for n in 0..image.len() {
            assert!(
                check(&image[..n]).is_err(),
                "accepted {n} of {} bytes",
                image.len()
            );
        }
    }
}

#[test]
fn offsets_and_sizes_past_the_end_fail() {
    for image in [CUBIN, FATBIN] {
        let len = image.len() as u64;
        let l = layout(image);
        let bound: Vec<&Field> = l.fields.iter().filter(|f| f.bound).collect();
        assert!(bound.len() > 50, "{} fields", bound.len());
        for f in bound {
            let max = if f.width == 8 {
                u64::MAX
            } else {
                (1 << (8 * f.width)) - 1
            };
            for value in [len + 1, len + 8, len * 2, u64::from(u32::MAX), u64::MAX] {
                let value = value.min(max);
                let mut m = image.to_vec();
                put(&mut m, f.at, f.width, value);
                assert!(
                    check(&m).is_err(),
                    "{} (byte {}) = {value:#x} accepted",
                    f.what,
                    f.at
                );
            }
        }
    }
}

/// The symbols of `image`: the offset of each 24-byte entry, from the first ELF in it.
fn symbol_entries(image: &[u8]) -> Vec<usize> {
    let elf_at = image.windows(4).position(|w| w == ELF_MAGIC).unwrap();
    let elf = &image[elf_at..];
    let field = |at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&elf[at..at + n]);
        u64::from_le_bytes(b) as usize
    };
    let (shoff, shnum) = (field(0x28, 8), field(0x3c, 2));
    let symtab = (0..shnum)
        .map(|i| shoff + i * 64)
        .find(|&o| field(o + 4, 4) == SHT_SYMTAB as usize)
        .unwrap();
    let (off, size) = (field(symtab + 24, 8), field(symtab + 32, 8));
    (1..size / 24).map(|n| elf_at + off + n * 24).collect()
}

/// The fatbin fuzz's crashes on an H100 (driver 580): one byte, the `st_info` of the
/// data symbol `table`, from 0x01 (local object) to 0x4b (binding 4, type 11), crashed
/// `cuModuleGetFunction("bump")` (seed 54324596601450509, mutation 5364); the function
/// symbol `spin` moved to `SHN_ABS` (0xfff1) crashed `cuModuleLoadData` (seed 2,
/// mutation 7224). Every such kind of every symbol is refused.
#[test]
fn symbols_of_other_kinds_or_outside_the_sections_are_refused() {
    for image in [CUBIN, FATBIN] {
        let entries = symbol_entries(image);
        assert!(entries.len() > 20);
        for (i, &at) in entries.iter().enumerate() {
            let n = i + 1;
            let info = image[at + 4];
            let mut bad_infos = vec![0x40 | (info & 0xf), 0x30 | (info & 0xf)];
            bad_infos.extend([0xb, 0x4, 0xa, 0xd].map(|typ| (info & 0xf0) | typ));
            if info & 0xf == 2 {
                bad_infos.push((info & 0xf0) | 1); // a function made an object in code
            }
            for bad in bad_infos {
                let mut m = image.to_vec();
                m[at + 4] = bad;
                let e = check(&m).unwrap_err().to_string();
                assert!(e.contains(&format!("symbol {n} ")), "{bad:#x}: {e}");
            }
            for shndx in [0xfff1u16, 0xfff2, 0xff00] {
                let mut m = image.to_vec();
                m[at + 6..at + 8].copy_from_slice(&shndx.to_le_bytes());
                let e = check(&m).unwrap_err().to_string();
                assert!(e.contains(&format!("symbol {n} ")), "{shndx:#x}: {e}");
            }
        }
    }
}

#[test]
fn messages_name_the_structure() {
    let mut m = CUBIN.to_vec();
    let l = layout(CUBIN);
    let f = l
        .fields
        .iter()
        .find(|f| f.what == "section 7 sh_size")
        .unwrap();
    put(&mut m, f.at, 8, 100_000);
    let e = check(&m).unwrap_err().to_string();
    assert!(
        e.starts_with("section 7 (.nv.info") && e.contains(") ends at byte"),
        "{e}"
    );
    assert!(
        e.ends_with(&format!("past the end of the {}-byte image", CUBIN.len())),
        "{e}"
    );
    let e = check(&FATBIN[..100]).unwrap_err().to_string();
    assert!(
        e.contains("fatbin header says 23752 bytes follow it"),
        "{e}"
    );
}

#[test]
fn compressed_and_foreign_images_are_refused() {
    // The PTX entry's flags: set the compression bit.
    let mut m = FATBIN.to_vec();
    let ptx = 16 + 64 + get(FATBIN, 16 + 8, 8).unwrap() as usize;
    put(&mut m, ptx + 40, 8, 0x2011);
    assert!(check(&m).unwrap_err().to_string().contains("--no-compress"));
    // A host ELF (x86-64).
    let mut m = CUBIN.to_vec();
    put(&mut m, 18, 2, 62);
    assert!(
        check(&m)
            .unwrap_err()
            .to_string()
            .contains("not a CUDA cubin")
    );
    assert!(check(b"//\n.version 8.0\n").is_err());
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut XorShift, image: &[u8], l: &Layout, m: &mut Vec<u8>) {
    m.clear();
    m.extend_from_slice(image);
    let len = image.len() as u64;
    match rng.below(10) {
        0 => m.truncate(rng.below(image.len())),
        1..=3 => {
            let f = &l.fields[rng.below(l.fields.len())];
            let old = get(m, f.at, f.width).unwrap();
            let delta = 1 + rng.next() % 16;
            let value = match rng.below(9) {
                0 => rng.next(),
                1 => len,
                2 => len - 1,
                3 => len + 1,
                4 => 0,
                5 => u64::from(u32::MAX),
                6 => u64::MAX,
                7 => old.wrapping_add(delta),
                _ => old.wrapping_sub(delta),
            };
            put(m, f.at, f.width, value);
        }
        4..=5 => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(m.len());
                m[at] ^= 1 << rng.below(8);
            }
        }
        _ => {
            let r = &l.contents[rng.below(l.contents.len())];
            for _ in 0..1 + rng.below(4) {
                let at = r.start + rng.below(r.len());
                m[at] = rng.next() as u8;
            }
        }
    }
}

#[test]
fn accepted_mutations_stay_in_bounds() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut m = Vec::new();
    let mut accepted = [0usize; 2];
    for (k, image) in [CUBIN, FATBIN].into_iter().enumerate() {
        let l = layout(image);
        for n in 0..10_000 {
            mutate(&mut rng, image, &l, &mut m);
            if check(&m).is_ok() {
                accepted[k] += 1;
                if let Err(e) = rewalk(&m) {
                    panic!("mutation {n} of image {k} passed the check but not the re-walk: {e}");
                }
            }
        }
    }
    eprintln!(
        "accepted mutations: cubin {}, fatbin {}",
        accepted[0], accepted[1]
    );
    assert!(accepted.iter().all(|&a| a > 500), "{accepted:?}");
}

/// Prints the verdict on other images: `CUDA_BRAND_CHECK_IMAGES=a.cubin:b.fatbin cargo
/// test --lib image::tests::verdicts -- --nocapture`. Does nothing without the variable.
#[test]
fn verdicts() {
    let Ok(list) = std::env::var("CUDA_BRAND_CHECK_IMAGES") else {
        return;
    };
    for path in list.split(':') {
        let image = std::fs::read(path).unwrap();
        println!("{path}: {:?}", check(&image));
    }
}
