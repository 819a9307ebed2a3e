//! A plan's layout and every check made before cuFFT sees a call: the shape and batch when
//! the plan is made, the lengths, alignments and overlap of a transform's buffers when it
//! is queued. Pure functions of numbers, tested without a GPU.

#![forbid(unsafe_code)]

use crate::driver::CUdeviceptr;
use crate::error::{Error, Invalid, Result};
use crate::memory::overlap_error;
use crate::span::Span;

/// Which side of a transform is complex with its last extent halved (`n / 2 + 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sides {
    /// Complex to complex: both sides hold the whole shape.
    C2C,
    /// Real to complex: the output is halved.
    R2C,
    /// Complex to real: the input is halved.
    C2R,
}

/// The most extents cuFFT plans over.
const MAX_RANK: usize = 3;

/// A plan's shape, batch and the element counts of its two sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    shape: [usize; MAX_RANK],
    rank: usize,
    pub(crate) batch: usize,
    /// Elements the transform reads.
    pub(crate) input: usize,
    /// Elements it writes.
    pub(crate) output: usize,
}

fn invalid(what: &'static str, detail: String) -> Error {
    Error::invalid_input(what, Invalid::argument(detail))
}

impl Layout {
    /// Checks `shape` (1 to 3 extents, none zero) and `batch` (not zero), and that every
    /// count, and its bytes (`in_size`, `out_size` per element), fits `i64` (cuFFT's
    /// `long long`) and `usize`.
    pub(crate) fn new(
        shape: &[usize],
        batch: usize,
        sides: Sides,
        (in_size, out_size): (usize, usize),
        what: &'static str,
    ) -> Result<Layout> {
        if shape.is_empty() || shape.len() > MAX_RANK {
            return Err(invalid(
                what,
                format!(
                    "shape has {} extents: cuFFT plans have 1, 2 or 3",
                    shape.len()
                ),
            ));
        }
        if let Some(i) = shape.iter().position(|&n| n == 0) {
            return Err(invalid(
                what,
                format!("shape[{i}] is 0: every extent is at least 1"),
            ));
        }
        if batch == 0 {
            return Err(invalid(
                what,
                "batch is 0: a plan runs at least one transform".into(),
            ));
        }
        let last = shape[shape.len() - 1];
        let halved = last / 2 + 1;
        let overflow = || {
            invalid(
                what,
                format!(
                    "shape {shape:?} times batch {batch} overflows the sizes cuFFT and memory can hold"
                ),
            )
        };
        let outer = shape[..shape.len() - 1]
            .iter()
            .try_fold(batch, |acc, &n| acc.checked_mul(n))
            .ok_or_else(overflow)?;
        let full = outer.checked_mul(last).ok_or_else(overflow)?;
        let half = outer.checked_mul(halved).ok_or_else(overflow)?;
        let (input, output) = match sides {
            Sides::C2C => (full, full),
            Sides::R2C => (full, half),
            Sides::C2R => (half, full),
        };
        let fits = |count: usize, size: usize| {
            count
                .checked_mul(size)
                .is_some_and(|bytes| i64::try_from(bytes).is_ok())
        };
        if !fits(input, in_size) || !fits(output, out_size) {
            return Err(overflow());
        }
        let mut padded = [1; MAX_RANK];
        padded[..shape.len()].copy_from_slice(shape);
        Ok(Layout {
            shape: padded,
            rank: shape.len(),
            batch,
            input,
            output,
        })
    }

    /// The shape, as given.
    pub(crate) fn shape(&self) -> &[usize] {
        &self.shape[..self.rank]
    }

    /// "batch 2 of shape [8, 8]", for errors.
    fn describe(&self) -> String {
        format!("batch {} of shape {:?}", self.batch, self.shape())
    }
}

/// One buffer of a transform: its name in errors, address, length in elements, element
/// size and the alignment cuFFT needs, and whether the transform writes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arg {
    pub(crate) name: &'static str,
    pub(crate) ptr: CUdeviceptr,
    pub(crate) len: usize,
    pub(crate) size: usize,
    pub(crate) align: usize,
    pub(crate) write: bool,
}

impl Arg {
    fn span(&self) -> Span {
        Span {
            start: self.ptr,
            bytes: (self.len * self.size) as u64,
            write: self.write,
        }
    }

    fn aligned(&self, what: &'static str) -> Result<()> {
        if self.ptr % self.align as CUdeviceptr == 0 {
            Ok(())
        } else {
            Err(invalid(
                what,
                format!(
                    "{} starts at {:#x}, not a multiple of {} bytes: cuFFT requires both pointers of a transform aligned to the plan's complex type",
                    self.name, self.ptr, self.align
                ),
            ))
        }
    }

    fn holds(&self, len: usize, verb: &str, layout: &Layout, what: &'static str) -> Result<()> {
        if self.len == len {
            Ok(())
        } else {
            Err(invalid(
                what,
                format!(
                    "{} has {} elements, but the plan {verb} {len} ({})",
                    self.name,
                    self.len,
                    layout.describe()
                ),
            ))
        }
    }
}

/// Checks an out-of-place transform: `input` of the plan's input length, `output` of its
/// output length, both aligned, not overlapping. Returns the spans it touches.
pub(crate) fn out_of_place(
    layout: &Layout,
    input: Arg,
    output: Arg,
    what: &'static str,
) -> Result<[Span; 2]> {
    input.holds(layout.input, "reads", layout, what)?;
    output.holds(layout.output, "writes", layout, what)?;
    input.aligned(what)?;
    output.aligned(what)?;
    let spans = [input.span(), output.span()];
    if spans[0].overlaps(&spans[1]) {
        return Err(overlap_error(
            what,
            [input.name, output.name],
            &spans[0],
            &spans[1],
        ));
    }
    Ok(spans)
}

/// Checks an in-place complex-to-complex transform of `buf`.
pub(crate) fn in_place(layout: &Layout, buf: Arg, what: &'static str) -> Result<Span> {
    buf.holds(layout.input, "transforms", layout, what)?;
    buf.aligned(what)?;
    Ok(buf.span())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    const W: &str = "FftPlan::exec";

    fn detail(e: Error) -> String {
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        e.invalid().unwrap().to_string()
    }

    fn arg(name: &'static str, ptr: u64, len: usize, size: usize, write: bool) -> Arg {
        Arg {
            name,
            ptr,
            len,
            size,
            align: size.min(16),
            write,
        }
    }

    #[test]
    fn lengths_of_each_kind_and_rank() {
        let c2c = Layout::new(&[8, 4, 6], 2, Sides::C2C, (8, 8), W).unwrap();
        assert_eq!((c2c.input, c2c.output), (384, 384));
        assert_eq!(c2c.shape(), [8, 4, 6]);
        // the last extent is halved on the complex side: 6 / 2 + 1 = 4, 7 / 2 + 1 = 4
        let r2c = Layout::new(&[8, 4, 6], 2, Sides::R2C, (4, 8), W).unwrap();
        assert_eq!((r2c.input, r2c.output), (384, 2 * 8 * 4 * 4));
        let c2r = Layout::new(&[5, 7], 3, Sides::C2R, (8, 4), W).unwrap();
        assert_eq!((c2r.input, c2r.output), (3 * 5 * 4, 3 * 5 * 7));
        let one = Layout::new(&[1], 1, Sides::R2C, (4, 8), W).unwrap();
        assert_eq!((one.input, one.output), (1, 1));
    }

    #[test]
    fn bad_shapes_and_batches_are_refused_naming_the_argument() {
        let e = |shape: &[usize], batch| {
            detail(Layout::new(shape, batch, Sides::C2C, (8, 8), "FftPlan::new").unwrap_err())
        };
        assert_eq!(e(&[], 1), "shape has 0 extents: cuFFT plans have 1, 2 or 3");
        assert!(e(&[2, 2, 2, 2], 1).starts_with("shape has 4 extents"));
        assert_eq!(e(&[4, 0], 1), "shape[1] is 0: every extent is at least 1");
        assert_eq!(e(&[4], 0), "batch is 0: a plan runs at least one transform");
        // products that overflow usize, or bytes beyond i64 (cuFFT's long long)
        assert!(e(&[usize::MAX, 2], 1).contains("overflows"));
        assert!(e(&[1 << 40, 1 << 30], 1).contains("overflows"));
        assert!(e(&[1 << 31], 1 << 30).contains("overflows"));
        assert!(e(&[usize::MAX], 1).contains("overflows"), "bytes overflow");
        // negative sizes reach Rust as huge usize values: refused the same way
        assert!(e(&[-1i64 as usize], 1).contains("overflows"));
        assert!(e(&[4], -1i64 as usize).contains("overflows"));
    }

    #[test]
    fn transforms_need_exact_lengths_aligned_and_apart() {
        let l = Layout::new(&[8], 1, Sides::R2C, (4, 8), W).unwrap();
        let input = arg("input", 0x1000, 8, 4, false);
        let output = arg("output", 0x2000, 5, 8, true);
        let spans = out_of_place(&l, input, output, W).unwrap();
        assert_eq!(spans[1].bytes, 40);
        assert!(spans[1].write && !spans[0].write);
        let short = Arg { len: 4, ..output };
        assert_eq!(
            detail(out_of_place(&l, input, short, W).unwrap_err()),
            "output has 4 elements, but the plan writes 5 (batch 1 of shape [8])"
        );
        let long = Arg { len: 9, ..input };
        assert_eq!(
            detail(out_of_place(&l, long, output, W).unwrap_err()),
            "input has 9 elements, but the plan reads 8 (batch 1 of shape [8])"
        );
        let crooked = Arg {
            ptr: 0x2004,
            ..output
        };
        assert!(
            detail(out_of_place(&l, input, crooked, W).unwrap_err())
                .starts_with("output starts at 0x2004, not a multiple of 8 bytes")
        );
        // the output overlapping the input's last element
        let over = Arg {
            ptr: 0x1000 + 24,
            ..output
        };
        let text = out_of_place(&l, input, over, W).unwrap_err().to_string();
        assert!(text.contains("input") && text.contains("output"), "{text}");
        assert!(text.starts_with("FftPlan::exec failed"), "{text}");
    }

    #[test]
    fn in_place_checks_the_one_buffer() {
        let l = Layout::new(&[4, 4], 2, Sides::C2C, (8, 8), W).unwrap();
        let buf = arg("buf", 0x1000, 32, 8, true);
        assert_eq!(in_place(&l, buf, W).unwrap().bytes, 256);
        assert_eq!(
            detail(in_place(&l, Arg { len: 31, ..buf }, W).unwrap_err()),
            "buf has 31 elements, but the plan transforms 32 (batch 2 of shape [4, 4])"
        );
    }
}
