//! The memory layer's checks made before any driver call: overlaps of an operation's
//! [`Span`]s (the leaf `crate::span`), lengths, split points, chunk sizes, ranges and
//! byte sizes.

use std::borrow::Cow;
use std::mem::size_of;
use std::ops::{Bound, RangeBounds};

use crate::driver::CUdeviceptr;
use crate::error::{Error, Invalid, Result};
use crate::span::Span;

#[cold]
#[inline(never)]
pub(crate) fn overlap_error<N: Into<Cow<'static, str>>>(
    call: &'static str,
    [first, second]: [N; 2],
    a: &Span,
    b: &Span,
) -> Error {
    Error::invalid_input(
        call,
        Invalid::Overlap {
            first: first.into(),
            first_range: (a.start, a.bytes),
            second: second.into(),
            second_range: (b.start, b.bytes),
        },
    )
}

/// `Ok` if a copy's destination `dst` and source `src` are disjoint, else the overlap error
/// of `call` naming them "the destination" and "the source" (before any driver call).
#[inline]
pub(crate) fn copy_ends_disjoint(call: &'static str, dst: &Span, src: &Span) -> Result<()> {
    if dst.overlaps(src) {
        return Err(overlap_error(
            call,
            ["the destination", "the source"],
            dst,
            src,
        ));
    }
    Ok(())
}

/// Panics with the checks' error (before any driver call): `"{call}: {invalid}"`, the
/// message of the indexing-like forms that return no `Result` (`split_at`, `chunks`).
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn fail(e: Error) -> ! {
    match e.invalid() {
        Some(invalid) => panic!("{}: {invalid}", e.call()),
        None => panic!("{e}"),
    }
}

/// The lengths check of a copy: [`Invalid::LengthMismatch`] naming `what`, the
/// destination's length as `expected` and the source's as `found`, if they differ.
#[inline]
pub(crate) fn lengths_match(what: &'static str, dst: usize, src: usize) -> Result<()> {
    if dst == src {
        return Ok(());
    }
    Err(Error::invalid_input(
        what,
        Invalid::LengthMismatch {
            expected: dst,
            found: src,
        },
    ))
}

/// The check of `split_at(mid)` on a view of `len` elements.
#[inline]
pub(super) fn split_point(what: &'static str, mid: usize, len: usize) -> Result<()> {
    if mid <= len {
        return Ok(());
    }
    Err(Error::invalid_input(
        what,
        Invalid::OutOfBounds {
            start: mid,
            end: mid,
            len,
        },
    ))
}

/// The check of `chunks(size)`.
#[inline]
pub(super) fn chunk_size(what: &'static str, size: usize) -> Result<()> {
    if size != 0 {
        return Ok(());
    }
    Err(Error::invalid_input(
        what,
        Invalid::argument("chunk size must be non-zero"),
    ))
}

pub(crate) fn bounds(range: &impl RangeBounds<usize>, len: usize) -> Option<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    (start <= end && end <= len).then_some((start, end))
}

/// The size in bytes of `len` elements of `T`, for a length that already describes memory
/// (so it cannot overflow).
#[inline(always)]
pub(crate) fn byte_len<T>(len: usize) -> usize {
    len * size_of::<T>()
}

/// The size in bytes of `len` elements of `T`, or an error naming `call` if it overflows.
#[inline]
pub(crate) fn checked_byte_len<T>(call: &'static str, len: usize) -> Result<usize> {
    len.checked_mul(size_of::<T>())
        .ok_or_else(|| too_large(call, len, size_of::<T>()))
}

/// The device address of every buffer and view of zero bytes (no elements, or zero-sized
/// ones): never allocated, never reaching the driver, aligned for `T`.
pub(crate) const fn empty_address<T>() -> CUdeviceptr {
    let align = std::mem::align_of::<T>() as CUdeviceptr;
    if align > 256 { align } else { 256 }
}

#[cold]
fn too_large(call: &'static str, len: usize, size: usize) -> Error {
    Error::invalid_input(
        call,
        Invalid::TooLarge {
            what: "the size in bytes",
            value: len as u128 * size as u128,
            max: usize::MAX as u128,
        },
    )
}
