//! Parameter lists from the committed PTX, cubin and fatbin and the test kernels, PTX and
//! `.nv.info` records not understood, and mutated images and PTX.

use super::cubin::{EIATTR_KPARAM_INFO_V2, nv_info_params};
use super::ptx::ptx_entries;
use super::{MAX_PARAM_BYTES, ParamList, ParamTable, table_of_image, table_of_ptx};
use crate::module::image::c_str;

const PTX: &str = include_str!("../../../../kernels/kernels.ptx");
const CUBIN: &[u8] = include_bytes!("../../../../kernels/kernels_sm90.cubin");
const FATBIN: &[u8] = include_bytes!("../../../../kernels/kernels.fatbin");
const DERIVE_PTX: &str = include_str!("../../../../kernels/derive.ptx");
const LAUNCH_EX_PTX: &str = include_str!("../../../../kernels/launch_ex_sm90.ptx");
const DEADLINE_PTX: &str = include_str!("../../../../tests/kernels/deadline.ptx");
const GRAPHS_PTX: &str = include_str!("../../../../tests/kernels/graphs.ptx");

/// A pointer or `size_t` at each of `n` slots from `from`, 8 bytes each.
fn words8(n: usize) -> Vec<(usize, usize)> {
    (0..n).map(|i| (8 * i, 8)).collect()
}

/// The kernels of `kernels/kernels.cu` in the PTX, the cubin and the fatbin, from their C
/// signatures by hand.
fn kernels_cu() -> Vec<(&'static str, Vec<(usize, usize)>)> {
    vec![
        // bump(int by)
        ("bump", vec![(0, 4)]),
        // empty(float *p, size_t p_len)
        ("empty", words8(2)),
        // empty8(float*, size_t, float*, size_t, const float*, size_t, const float*, size_t)
        ("empty8", words8(8)),
        // scale(float *x, size_t x_len, float k)
        ("scale", vec![(0, 8), (8, 8), (16, 4)]),
        // spin(long long cycles)
        ("spin", vec![(0, 8)]),
        // sum_u64(const unsigned *in, size_t in_len, unsigned long long *out, size_t out_len)
        ("sum_u64", words8(4)),
        // vector_add(const float*, size_t, const float*, size_t, float*, size_t)
        ("vector_add", words8(6)),
        // write_wild(float *p, size_t p_len)
        ("write_wild", words8(2)),
    ]
}

/// The kernels at the end of `kernels/kernels.cu` written as NVIDIA's samples write them,
/// in the PTX only (the cubin and the fatbin predate them, `kernels/README.md`).
fn sample_style_kernels() -> Vec<(&'static str, Vec<(usize, usize)>)> {
    vec![
        // saxpy(int n, float a, const float *x, float *y)
        ("saxpy", vec![(0, 4), (4, 4), (8, 8), (16, 8)]),
        // vectorAdd(const float *A, const float *B, float *C, int numElements)
        ("vectorAdd", vec![(0, 8), (8, 8), (16, 8), (24, 4)]),
        // reduce(const float *g_idata, float *g_odata, unsigned int n)
        ("reduce", vec![(0, 8), (8, 8), (16, 4)]),
        // stencil2d(const float *in, size_t inPitch, float *out, size_t outPitch, int, int)
        (
            "stencil2d",
            vec![(0, 8), (8, 8), (16, 8), (24, 8), (32, 4), (36, 4)],
        ),
    ]
}

/// A kernel's name, count and layout, as the tests compare them.
type Row = (String, usize, Option<Vec<(usize, usize)>>);

fn table(t: &ParamTable) -> Vec<Row> {
    t.iter()
        .map(|(name, l)| {
            (
                String::from_utf8_lossy(name).into_owned(),
                l.count,
                l.layout.clone(),
            )
        })
        .collect()
}

fn expected(kernels: Vec<(&str, Vec<(usize, usize)>)>) -> Vec<Row> {
    let mut v: Vec<_> = kernels
        .into_iter()
        .map(|(name, layout)| (name.to_owned(), layout.len(), Some(layout)))
        .collect();
    v.sort();
    v
}

#[test]
fn the_committed_ptx_cubin_and_fatbin_give_the_c_signatures() {
    let in_ptx = kernels_cu()
        .into_iter()
        .chain(sample_style_kernels())
        .collect();
    assert_eq!(table(&table_of_ptx(PTX)), expected(in_ptx));
    assert_eq!(table(&table_of_image(CUBIN)), expected(kernels_cu()));
    // an sm_90 cubin and compute_75 PTX that agree
    assert_eq!(table(&table_of_image(FATBIN)), expected(kernels_cu()));
    let scale = table_of_image(CUBIN);
    let scale = scale.get(b"scale").unwrap();
    assert_eq!((scale.count, scale.bytes()), (3, Some(20)));
    assert!(table_of_image(CUBIN).get(b"no_such_kernel").is_none());
}

#[test]
fn the_test_kernels_give_their_c_signatures() {
    // derive.cu: particles_step(const Particle*, size_t, Particle*, size_t),
    // cells_sum(const Cell*, size_t, unsigned long long*, size_t)
    assert_eq!(
        table(&table_of_ptx(DERIVE_PTX)),
        expected(vec![
            ("cells_sum", words8(4)),
            ("particles_step", words8(4))
        ])
    );
    // launch_ex.cu: cluster_info(unsigned*, size_t), cluster_info_fixed(unsigned*,
    // size_t), grid_sum(const unsigned*, size_t, unsigned*, size_t), empty_ex(float*,
    // size_t)
    assert_eq!(
        table(&table_of_ptx(LAUNCH_EX_PTX)),
        expected(vec![
            ("cluster_info", words8(2)),
            ("cluster_info_fixed", words8(2)),
            ("empty_ex", words8(2)),
            ("grid_sum", words8(4)),
        ])
    );
    // deadline.cu: spin_then_fill(unsigned long long ns, unsigned *out, size_t
    // out_len, unsigned value)
    assert_eq!(
        table(&table_of_ptx(DEADLINE_PTX)),
        expected(vec![(
            "spin_then_fill",
            vec![(0, 8), (8, 8), (16, 8), (24, 4)]
        )])
    );
    // graphs.cu
    assert_eq!(
        table(&table_of_ptx(GRAPHS_PTX)),
        expected(vec![
            // add_one_f32(float*, size_t)
            ("add_one_f32", words8(2)),
            // add_u32(const unsigned*, size_t, const unsigned*, size_t, unsigned*, size_t)
            ("add_u32", words8(6)),
            // affine_u32(const unsigned*, size_t, unsigned*, size_t, unsigned a, unsigned b)
            (
                "affine_u32",
                vec![(0, 8), (8, 8), (16, 8), (24, 8), (32, 4), (36, 4)]
            ),
            // set_u32(unsigned*, size_t, unsigned v)
            ("set_u32", vec![(0, 8), (8, 8), (16, 4)]),
            // spin_cycles(unsigned long long)
            ("spin_cycles", vec![(0, 8)]),
            // square_u32(unsigned*, size_t)
            ("square_u32", words8(2)),
        ])
    );
}

#[test]
fn ptx_signatures_with_alignment_arrays_pointers_and_no_list() {
    let ptx = r#"
        .version 8.0
        .target sm_90
        .address_size 64
        .file 1 "/tmp/a .entry fake(.param .u32 x)"
        // .entry commented(.param .u32 x)
        /* .entry also_commented(
             .param .u32 x) */
        .visible .entry by_value(
            .param .u8 a,
            .param .align 8 .b8 s[12],
            .param .f16x2 h,
            .param .u64 .ptr .global .align 16 p,
            .param .u64 .ptr.const.align 4 q,
            .param .align 4 .b8 m[2][3]
        )
        .maxntid 128, 1, 1
        {
            ld.param.u8 %rs1, [a];
            ret;
        }
        .visible .entry no_params()
        { ret; }
        .entry no_list .maxntid 32
        { ret; }
        .entry no_list_at_all
        { ret; }
        .weak .entry _Z4fillIfEvPT_mS0_(.param .u64 _Z4fillIfEvPT_mS0__param_0,
            .param .u64 _Z4fillIfEvPT_mS0__param_1, .param .f32 _Z4fillIfEvPT_mS0__param_2)
        { ret; }
        .visible .func (.param .b32 r) helper(.param .b32 x) { ret; }
        .visible .entry texture(.param .texref t, .param .u32 n) { ret; }
    "#;
    let t = table_of_ptx(ptx);
    assert_eq!(
        table(&t),
        vec![
            (
                "_Z4fillIfEvPT_mS0_".to_owned(),
                3,
                Some(vec![(0, 8), (8, 8), (16, 4)])
            ),
            (
                "by_value".to_owned(),
                6,
                Some(vec![(0, 1), (8, 12), (20, 4), (24, 8), (32, 8), (40, 6)])
            ),
            ("no_list".to_owned(), 0, Some(vec![])),
            ("no_list_at_all".to_owned(), 0, Some(vec![])),
            ("no_params".to_owned(), 0, Some(vec![])),
            // a parameter of a type not sized here: counted, no layout
            ("texture".to_owned(), 2, None),
        ]
    );
    assert_eq!(t.get(b"by_value").unwrap().bytes(), Some(46));
    assert_eq!(t.get(b"texture").unwrap().bytes(), None);
}

#[test]
fn ptx_not_understood_leaves_the_kernel_without_a_list() {
    for ptx in [
        ".entry a(.param .u32 x,) {}",
        ".entry a(, .param .u32 x) {}",
        ".entry a(.reg .u32 x) {}",
        ".entry a(.param .u32) {}",
        ".entry a(.param .align 3 .b8 x[4]) {}",
        ".entry a(.param .u32 x (y)) {}",
        ".entry a(.param .u32 x",
        ".entry a;",
        ".entry a(.param .u32 x) {} .entry a(.param .u32 x, .param .u32 y) {}",
    ] {
        let t = table_of_ptx(ptx);
        assert!(t.get(b"a").is_none(), "{ptx}: {t:?}");
        assert!(t.is_empty(), "{ptx}");
    }
    // preprocessor directives: ptxas expands them, this reader cannot, so nothing of
    // the text has a list (here the signature ptxas sees has two parameters, not one)
    for ptx in [
        "#if 0\n.entry a(.param .u64 x) {}\n#else\n.visible E a(.param .u64 x, .param .u64 y) {}\n#endif",
        "#define E .entry\n.entry a(.param .u64 x) {}",
        ".entry a(.param .u64 x MORE) {}\n#define MORE , .param .u64 y",
        "   # include \"k.ptx\"\n.entry a(.param .u64 x) {}",
    ] {
        let t = table_of_ptx(ptx);
        assert!(t.get(b"a").is_none() && t.is_empty(), "{ptx}: {t:?}");
    }
    // a `#` in a comment or a string is no directive
    let t = table_of_ptx("// #if 0\n/* #define */ .file 1 \"a#b.cu\"\n.entry a(.param .u64 x) {}");
    assert_eq!(t.get(b"a").unwrap().count, 1);
    // the same kernel declared twice alike is fine
    let t = table_of_ptx(".entry a(.param .u32 x) {} .entry a(.param .u32 y) {}");
    assert_eq!(t.get(b"a").unwrap().count, 1);
    // odd dimensions: counted, no layout
    let t = table_of_ptx(".entry a(.param .b8 x[0], .param .b8 y[]) {}");
    assert_eq!(
        t.get(b"a").unwrap(),
        &ParamList {
            count: 2,
            layout: None
        }
    );
    let t = table_of_ptx(".entry a(.param .b8 x[99999999999]) {}");
    assert_eq!(
        t.get(b"a").unwrap(),
        &ParamList {
            count: 1,
            layout: None
        }
    );
}

/// The offset of `.nv.info.<kernel>`'s bytes in `CUBIN`.
fn nv_info(kernel: &str) -> std::ops::Range<usize> {
    let f = |at: usize, n: usize| {
        CUBIN[at..at + n]
            .iter()
            .rev()
            .fold(0u64, |v, &x| (v << 8) | u64::from(x)) as usize
    };
    let (shoff, shnum, shstrndx) = (f(40, 8), f(60, 2), f(62, 2));
    let names = f(shoff + shstrndx * 64 + 24, 8);
    let want = format!(".nv.info.{kernel}");
    for i in 0..shnum {
        let at = shoff + i * 64;
        let name = c_str(CUBIN, names + f(at, 4)).unwrap();
        if name == want.as_bytes() {
            let off = f(at + 24, 8);
            return off..off + f(at + 32, 8);
        }
    }
    panic!("no {want}");
}

#[test]
fn nv_info_records_that_do_not_add_up_leave_the_kernel_without_a_list() {
    let range = nv_info("scale");
    let data = &CUBIN[range.clone()];
    assert_eq!(
        nv_info_params(data),
        Some(ParamList {
            count: 3,
            layout: Some(vec![(0, 8), (8, 8), (16, 4)])
        })
    );
    // find the KPARAM_INFO records (format 4, attribute 0x17, 12 bytes)
    let kparams: Vec<usize> = (0..data.len().saturating_sub(4))
        .filter(|&p| data[p..p + 4] == [4, 0x17, 12, 0])
        .collect();
    assert_eq!(kparams.len(), 3);
    let with = |at: usize, bytes: &[u8]| {
        let mut m = data.to_vec();
        m[at..at + bytes.len()].copy_from_slice(bytes);
        nv_info_params(&m)
    };
    // an ordinal repeated (2 -> 1)
    let second = kparams[0] + 8;
    assert_eq!(data[second], 2, "the first record is parameter 2");
    assert_eq!(with(second, &[1]), None);
    // a parameter past the parameter space (offset 16 -> 40)
    assert_eq!(with(second + 2, &[40]), None);
    // a newer record format in place of one
    assert_eq!(with(kparams[0], &[4, EIATTR_KPARAM_INFO_V2]), None);
    // a record cut off
    assert_eq!(nv_info_params(&data[..data.len() - 2]), None);
    // in the whole cubin: that kernel loses its list, the others keep theirs
    let mut m = CUBIN.to_vec();
    m[range.start + second] = 1;
    let t = table_of_image(&m);
    assert!(t.get(b"scale").is_none());
    assert_eq!(t.get(b"vector_add").unwrap().count, 6);
}

/// `CUBIN`'s section `name`: its index and the byte of its header.
fn section_of(name: &str) -> (usize, usize) {
    let f = |at: usize, n: usize| {
        CUBIN[at..at + n]
            .iter()
            .rev()
            .fold(0u64, |v, &x| (v << 8) | u64::from(x)) as usize
    };
    let (shoff, shnum, shstrndx) = (f(40, 8), f(60, 2), f(62, 2));
    let names = f(shoff + shstrndx * 64 + 24, 8);
    (0..shnum)
        .map(|i| (i, shoff + i * 64))
        .find(|&(_, at)| c_str(CUBIN, names + f(at, 4)) == Some(name.as_bytes()))
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// `CUBIN`'s symbol `name`: its index and the byte of its entry.
fn symbol_of(name: &str) -> (usize, usize) {
    let f = |at: usize, n: usize| {
        CUBIN[at..at + n]
            .iter()
            .rev()
            .fold(0u64, |v, &x| (v << 8) | u64::from(x)) as usize
    };
    let (_, symtab) = section_of(".symtab");
    let (_, strtab) = section_of(".strtab");
    let (syms, size, strings) = (f(symtab + 24, 8), f(symtab + 32, 8), f(strtab + 24, 8));
    (0..size / 24)
        .map(|n| (n, syms + n * 24))
        .find(|&(_, at)| c_str(CUBIN, strings + f(at, 4)) == Some(name.as_bytes()))
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

#[test]
fn a_kernel_whose_symbol_or_code_points_elsewhere_has_no_list() {
    // the symbol `spin` moved into `scale`'s code (which is long enough for it): the
    // driver would take `scale`'s records for `spin`, so `spin` has no list; `scale`,
    // whose symbol and code are as they were, keeps its own
    let mut image = CUBIN.to_vec();
    let (_, spin) = symbol_of("spin");
    let (text_scale, _) = section_of(".text.scale");
    image[spin + 6..spin + 8].copy_from_slice(&(text_scale as u16).to_le_bytes());
    let t = table_of_image(&image);
    assert!(t.get(b"spin").is_none(), "{t:?}");
    assert_eq!(t.get(b"scale").map(|l| l.count), Some(3));
    assert_eq!(t.get(b"vector_add").map(|l| l.count), Some(6));
    // `scale`'s code naming `spin`'s symbol as its function: neither has a list
    let mut image = CUBIN.to_vec();
    let (spin, _) = symbol_of("spin");
    let (_, at) = section_of(".text.scale");
    let info = u32::from_le_bytes(image[at + 44..at + 48].try_into().unwrap());
    let info = (info & 0xff00_0000) | spin as u32;
    image[at + 44..at + 48].copy_from_slice(&info.to_le_bytes());
    let t = table_of_image(&image);
    assert!(
        t.get(b"scale").is_none() && t.get(b"spin").is_none(),
        "{t:?}"
    );
    assert_eq!(t.get(b"vector_add").map(|l| l.count), Some(6));
    // `scale`'s code naming no function (the null symbol)
    let mut image = CUBIN.to_vec();
    image[at + 44..at + 48].copy_from_slice(&(info & 0xff00_0000).to_le_bytes());
    let t = table_of_image(&image);
    assert!(t.get(b"scale").is_none(), "{t:?}");
    assert_eq!(t.get(b"spin").map(|l| l.count), Some(1));
}

#[test]
fn compressed_fatbin_entries_and_other_bytes_give_no_list() {
    assert!(table_of_image(b"").is_empty());
    assert!(table_of_image(b"\x7fELF").is_empty());
    assert!(table_of_image(PTX.as_bytes()).is_empty());
    // both entries of the fatbin marked compressed
    let mut m = FATBIN.to_vec();
    let mut p = 16;
    let f = |b: &[u8], at: usize, n: usize| {
        b[at..at + n]
            .iter()
            .rev()
            .fold(0u64, |v, &x| (v << 8) | u64::from(x)) as usize
    };
    while p < m.len() {
        let (hsize, psize) = (f(&m, p + 4, 4), f(&m, p + 8, 8));
        m[p + 41] |= 0x20; // flags |= 0x2000
        p += hsize + psize;
    }
    assert!(table_of_image(&m).is_empty());
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

/// Mutated images and PTX never panic the readers, and whatever they read is a list
/// that could be a kernel's (ordered, non-overlapping, inside the parameter limit).
#[test]
fn mutated_images_and_ptx_never_panic_and_give_plausible_lists() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let plausible = |t: &ParamTable| {
        for (name, list) in t.iter() {
            assert!(!name.is_empty());
            if let Some(layout) = &list.layout {
                assert_eq!(layout.len(), list.count);
                let mut end = 0;
                for &(offset, size) in layout {
                    assert!(offset >= end && size > 0, "{layout:?}");
                    end = offset + size;
                }
                assert!(end <= MAX_PARAM_BYTES);
            }
        }
    };
    let mut m = Vec::new();
    let mut read = [0usize; 3];
    for (k, image) in [CUBIN, FATBIN].into_iter().enumerate() {
        for _ in 0..3000 {
            m.clear();
            m.extend_from_slice(image);
            match rng.below(4) {
                0 => m.truncate(rng.below(image.len())),
                1 => {
                    for _ in 0..1 + rng.below(8) {
                        let at = rng.below(m.len());
                        m[at] = rng.next() as u8;
                    }
                }
                2 => {
                    // a header field (the first 64 bytes of the ELF or fatbin entry)
                    let at = rng.below(64.min(m.len()));
                    m[at] ^= 1 << rng.below(8);
                }
                _ => {
                    let at = rng.below(m.len().saturating_sub(8));
                    let v = [0u64, u64::MAX, m.len() as u64, rng.next()][rng.below(4)];
                    m[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            let t = table_of_image(&m);
            plausible(&t);
            read[k] += usize::from(!t.is_empty());
        }
    }
    let sources = [PTX, DERIVE_PTX, LAUNCH_EX_PTX, GRAPHS_PTX];
    let alphabet = b"().,[]{};\"/*\n .param.entry.align 8 .b8 x[4] 0x10 99999999999999999999";
    for _ in 0..3000 {
        let src = sources[rng.below(sources.len())].as_bytes();
        let mut t = src.to_vec();
        for _ in 0..1 + rng.below(16) {
            let at = rng.below(t.len());
            match rng.below(3) {
                0 => t[at] = alphabet[rng.below(alphabet.len())],
                1 => {
                    t.remove(at);
                }
                _ => t.insert(at, alphabet[rng.below(alphabet.len())]),
            }
        }
        if rng.below(4) == 0 {
            t.truncate(rng.below(t.len()));
        }
        let mut table = ParamTable::default();
        ptx_entries(&t, &mut table);
        plausible(&table);
        read[2] += usize::from(!table.is_empty());
    }
    // most mutations leave something to read: the readers ran on them, not beside them
    assert!(read.iter().all(|&n| n > 1000), "{read:?}");
}
