//! [`Invalid`]: what was wrong with an input the crate refused before any driver call.

use std::borrow::Cow;
use std::fmt;

/// What was wrong with an input that the crate refused before the driver, or a library,
/// saw it: the error's code is then [`ErrorCode::InvalidInput`](crate::ErrorCode::InvalidInput)
/// and [`Error::invalid`](crate::Error::invalid) gives this value (made by
/// [`Error::invalid_input`](crate::Error::invalid_input)), so a program can tell a
/// length mismatch from an out-of-bounds range, an overlap or a misalignment without reading
/// text. The driver's own `CUDA_ERROR_INVALID_VALUE` is
/// [`ErrorCode::InvalidValue`](crate::ErrorCode::InvalidValue), with no `Invalid`.
///
/// Lengths are in elements of the operation's type unless the variant says bytes. New
/// variants may come in a minor version.
///
/// ```
/// use cuda_brand::{Error, ErrorCode, Invalid};
/// let e = Error::invalid_input(
///     "DeviceSlice::copy_from_host",
///     Invalid::LengthMismatch { expected: 4, found: 3 },
/// );
/// assert_eq!(e.code(), ErrorCode::InvalidInput);
/// assert!(matches!(e.invalid(), Some(Invalid::LengthMismatch { expected: 4, found: 3 })));
/// assert_eq!(
///     e.to_string(),
///     "DeviceSlice::copy_from_host failed: CUDA_BRAND_INVALID_INPUT (invalid input, \
///      refused before the driver saw it): the lengths differ: 4 expected, 3 found"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Invalid {
    /// Two lengths that must be equal are not: the destination's (`expected`) and the
    /// source's (`found`), for a copy.
    LengthMismatch {
        /// The length the operation needed (a copy's destination).
        expected: usize,
        /// The length it was given (a copy's source).
        found: usize,
    },
    /// Two shapes that must be equal are not (`[width, height, depth]` in elements; a 2D
    /// shape has depth 1).
    ShapeMismatch {
        /// The shape the operation needed (a copy's destination).
        expected: [usize; 3],
        /// The shape it was given (a copy's source).
        found: [usize; 3],
    },
    /// A box of elements (a copy's region) does not lie inside a 3D shape.
    RegionOutOfBounds {
        /// Which region (e.g. `"the source region"`).
        what: &'static str,
        /// The box's first element, `[x, y, z]`.
        origin: [usize; 3],
        /// The box's `[width, height, depth]`.
        extent: [usize; 3],
        /// The shape it must lie inside.
        shape: [usize; 3],
    },
    /// The range `start..end` does not lie within `0..len`, or `start > end`.
    OutOfBounds {
        /// The range's first index.
        start: usize,
        /// The range's end (exclusive).
        end: usize,
        /// The length the range must lie within.
        len: usize,
    },
    /// Two memory ranges that must be disjoint overlap (device addresses, in bytes).
    Overlap {
        /// What the first range is (e.g. `"the source of Grouped::send"`).
        first: Cow<'static, str>,
        /// Its start address and length in bytes.
        first_range: (u64, u64),
        /// What the second range is.
        second: Cow<'static, str>,
        /// Its start address and length in bytes.
        second_range: (u64, u64),
    },
    /// An address (or length) is not a multiple of the alignment the operation needs.
    Misaligned {
        /// What is misaligned (e.g. `"the output"`).
        what: &'static str,
        /// The address or byte length.
        value: u64,
        /// The alignment needed, in bytes.
        align: usize,
    },
    /// A value of one context was given where another's was needed.
    WrongContext {
        /// What was given (e.g. `"the source buffer"`).
        what: &'static str,
        /// The context needed, as its raw handle's address.
        expected: u64,
        /// The context of what was given.
        found: u64,
    },
    /// A number is larger than the operation, or the library's integer type, allows.
    TooLarge {
        /// What the number is (e.g. `"m"`, `"the rank"`).
        what: &'static str,
        /// Its value.
        value: u128,
        /// The largest allowed.
        max: u128,
    },
    /// Any other rule of the operation that an argument breaks, with the reason in words
    /// (a kernel's parameter list that differs from its declaration, a stream of the
    /// wrong kind, a name with a NUL byte, ...).
    Argument {
        /// Which rule, and what was given.
        reason: Box<str>,
    },
}

impl Invalid {
    /// The reason of an [`Invalid::Argument`]; `None` for the other variants, whose
    /// fields say what was wrong.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Invalid::Argument { reason } => Some(reason),
            _ => None,
        }
    }

    /// [`Invalid::Argument`] with `reason`.
    pub fn argument(reason: impl Into<String>) -> Invalid {
        Invalid::Argument {
            reason: reason.into().into_boxed_str(),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::LengthMismatch { expected, found } => {
                write!(f, "the lengths differ: {expected} expected, {found} found")
            }
            Invalid::ShapeMismatch { expected, found } => {
                write!(
                    f,
                    "the shapes differ: {expected:?} expected, {found:?} found"
                )
            }
            Invalid::RegionOutOfBounds {
                what,
                origin,
                extent,
                shape,
            } => write!(
                f,
                "{what} (origin {origin:?}, extent {extent:?}) is not inside the buffer's shape {shape:?}"
            ),
            Invalid::OutOfBounds { start, end, len } => {
                write!(
                    f,
                    "the range {start}..{end} is out of bounds for length {len}"
                )
            }
            Invalid::Overlap {
                first,
                first_range: (a, an),
                second,
                second_range: (b, bn),
            } => write!(
                f,
                "{first} ({an} bytes at {a:#x}) and {second} ({bn} bytes at {b:#x}) overlap"
            ),
            Invalid::Misaligned { what, value, align } => {
                write!(f, "{what} ({value:#x}) is not aligned to {align} bytes")
            }
            Invalid::WrongContext {
                what,
                expected,
                found,
            } => write!(
                f,
                "{what} is of context {found:#x}, not of this one ({expected:#x})"
            ),
            Invalid::TooLarge { what, value, max } => {
                write!(
                    f,
                    "{what} is {value}, larger than the largest allowed, {max}"
                )
            }
            Invalid::Argument { reason } => f.write_str(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_prints_its_fields() {
        let cases = [
            (
                Invalid::LengthMismatch {
                    expected: 4,
                    found: 3,
                },
                "the lengths differ: 4 expected, 3 found",
            ),
            (
                Invalid::ShapeMismatch {
                    expected: [3, 2, 1],
                    found: [2, 3, 1],
                },
                "the shapes differ: [3, 2, 1] expected, [2, 3, 1] found",
            ),
            (
                Invalid::RegionOutOfBounds {
                    what: "the source region",
                    origin: [1, 0, 0],
                    extent: [4, 1, 1],
                    shape: [4, 3, 2],
                },
                "the source region (origin [1, 0, 0], extent [4, 1, 1]) is not inside the buffer's shape [4, 3, 2]",
            ),
            (
                Invalid::OutOfBounds {
                    start: 2,
                    end: 9,
                    len: 4,
                },
                "the range 2..9 is out of bounds for length 4",
            ),
            (
                Invalid::Overlap {
                    first: "the source".into(),
                    first_range: (0x1000, 8),
                    second: "the destination".into(),
                    second_range: (0x1004, 8),
                },
                "the source (8 bytes at 0x1000) and the destination (8 bytes at 0x1004) overlap",
            ),
            (
                Invalid::Misaligned {
                    what: "the output",
                    value: 0x1002,
                    align: 8,
                },
                "the output (0x1002) is not aligned to 8 bytes",
            ),
            (
                Invalid::WrongContext {
                    what: "the source",
                    expected: 0x10,
                    found: 0x20,
                },
                "the source is of context 0x20, not of this one (0x10)",
            ),
            (
                Invalid::TooLarge {
                    what: "m",
                    value: 1 << 31,
                    max: i32::MAX as u128,
                },
                "m is 2147483648, larger than the largest allowed, 2147483647",
            ),
            (Invalid::argument("a reason"), "a reason"),
        ];
        assert_eq!(Invalid::argument("why").reason(), Some("why"));
        assert_eq!(cases[0].0.reason(), None);
        for (invalid, text) in cases {
            assert_eq!(invalid.to_string(), text);
        }
    }
}
