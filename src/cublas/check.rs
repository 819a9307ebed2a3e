//! The checks made before any cuBLAS call: every dimension, leading dimension, batch count
//! and stride against `int` and `long long` limits and against the lengths of the buffers
//! given, with overflow-checked arithmetic. cuBLAS takes raw pointers and trusts all of
//! them; a wrong `m`, `k` or `lda` there reads or writes out of bounds on the GPU. Here each
//! is an error naming the argument (`ErrorCode::InvalidInput`, the operation as the call),
//! made before cuBLAS, or the driver, sees anything.
//!
//! The rules (column-major, as cuBLAS stores matrices): a `rows × cols` matrix with leading
//! dimension `ld` needs `ld ≥ max(1, rows)` and touches `ld × (cols - 1) + rows` elements
//! (none if `rows` or `cols` is 0); a batch of `count` such matrices `stride` apart touches
//! `stride × (count - 1)` more, and a batch that is written needs `stride ≥` the matrix's
//! extent, so that no two of its matrices share an element.

use std::ffi::{c_int, c_longlong};

use super::Op;
use crate::error::{Error, Invalid, Result};

#[cold]
fn invalid(what: &'static str, detail: String) -> Error {
    Error::invalid_input(what, Invalid::argument(detail))
}

/// `value` as cuBLAS's `int`, or an [`Invalid::TooLarge`] naming `name`.
pub(crate) fn int(what: &'static str, name: &'static str, value: usize) -> Result<c_int> {
    c_int::try_from(value).map_err(|_| too_large(what, name, value, c_int::MAX as u128))
}

/// `value` as cuBLAS's `long long`, or an [`Invalid::TooLarge`] naming `name`.
fn long(what: &'static str, name: &'static str, value: usize) -> Result<c_longlong> {
    c_longlong::try_from(value).map_err(|_| too_large(what, name, value, c_longlong::MAX as u128))
}

#[cold]
fn too_large(what: &'static str, name: &'static str, value: usize, max: u128) -> Error {
    Error::invalid_input(
        what,
        Invalid::TooLarge {
            what: name,
            value: value as u128,
            max,
        },
    )
}

/// One matrix argument as cuBLAS reads or writes it: `rows × cols` stored column-major with
/// leading dimension `ld`, in a buffer of `len` elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Matrix {
    /// The argument's name in errors: `"A"`, `"B"`, `"C"`.
    pub(crate) name: &'static str,
    /// The name of its leading dimension: `"lda"`.
    pub(crate) ld_name: &'static str,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) ld: usize,
    pub(crate) len: usize,
}

impl Matrix {
    /// The stored shape of an operand of `op`, `rows × cols` after the operation.
    pub(crate) fn stored(op: Op, rows: usize, cols: usize) -> (usize, usize) {
        match op {
            Op::N => (rows, cols),
            Op::T => (cols, rows),
        }
    }

    /// The elements one matrix spans: `ld × (cols - 1) + rows`, 0 if it is empty.
    fn extent(&self, what: &'static str) -> Result<usize> {
        if self.rows == 0 || self.cols == 0 {
            return Ok(0);
        }
        self.ld
            .checked_mul(self.cols - 1)
            .and_then(|e| e.checked_add(self.rows))
            .ok_or_else(|| {
                invalid(
                    what,
                    format!(
                        "{} spans {} × ({} - 1) + {} elements, more than memory holds",
                        self.name, self.ld_name, self.cols, self.rows
                    ),
                )
            })
    }

    /// Checks the leading dimension and, with `batch` = `(count, stride)`, the stride and
    /// the length; returns `ld` as an `int`. `written`: the batch's matrices must not
    /// overlap.
    pub(crate) fn check(
        &self,
        what: &'static str,
        batch: Option<(usize, usize)>,
        written: bool,
    ) -> Result<c_int> {
        let ld = int(what, self.ld_name, self.ld)?;
        if self.ld < self.rows.max(1) {
            return Err(invalid(
                what,
                format!(
                    "{} is {}, less than max(1, rows of {}) = {}: {} is stored with {} rows",
                    self.ld_name,
                    self.ld,
                    self.name,
                    self.rows.max(1),
                    self.name,
                    self.rows
                ),
            ));
        }
        let extent = self.extent(what)?;
        let needed = match batch {
            None => extent,
            Some((0, _)) => 0,
            Some(_) if extent == 0 => 0,
            Some((count, stride)) => {
                if written && count > 1 && stride < extent {
                    return Err(invalid(
                        what,
                        format!(
                            "the stride of {} is {stride}, less than one matrix's extent, {extent} \
                             elements ({} × (cols - 1) + rows): the batch's matrices would \
                             overlap, and cuBLAS would write elements twice at once",
                            self.name, self.ld_name
                        ),
                    ));
                }
                stride
                    .checked_mul(count - 1)
                    .and_then(|s| s.checked_add(extent))
                    .ok_or_else(|| {
                        invalid(
                            what,
                            format!(
                                "{} spans stride × (batch count - 1) + {extent} elements, \
                                 more than memory holds",
                                self.name
                            ),
                        )
                    })?
            }
        };
        if self.len < needed {
            return Err(invalid(
                what,
                format!(
                    "{} has {} elements, but a {} × {} matrix with {} = {}{} needs {needed}",
                    self.name,
                    self.len,
                    self.rows,
                    self.cols,
                    self.ld_name,
                    self.ld,
                    match batch {
                        Some((count, stride)) => format!(", {count} of them {stride} apart,"),
                        None => String::new(),
                    }
                ),
            ));
        }
        Ok(ld)
    }
}

/// A GEMM's arguments after the checks, as cuBLAS takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GemmArgs {
    pub(crate) m: c_int,
    pub(crate) n: c_int,
    pub(crate) k: c_int,
    pub(crate) lda: c_int,
    pub(crate) ldb: c_int,
    pub(crate) ldc: c_int,
    /// `(count, stride_a, stride_b, stride_c)` of a strided batch.
    pub(crate) batch: Option<(c_int, c_longlong, c_longlong, c_longlong)>,
}

/// The shape of a GEMM, `C = alpha op(A) op(B) + beta C` with `op(A)` `m × k`, `op(B)`
/// `k × n`, `C` `m × n`, and the lengths of the buffers given.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmShape {
    pub(crate) ops: (Op, Op),
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) lds: (usize, usize, usize),
    pub(crate) lens: (usize, usize, usize),
    /// `(count, stride_a, stride_b, stride_c)` of a strided batch.
    pub(crate) batch: Option<(usize, usize, usize, usize)>,
}

/// Checks a GEMM (every extent, before cuBLAS).
pub(crate) fn gemm(what: &'static str, g: &GemmShape) -> Result<GemmArgs> {
    let (m, n, k) = (
        int(what, "m", g.m)?,
        int(what, "n", g.n)?,
        int(what, "k", g.k)?,
    );
    let (a_rows, a_cols) = Matrix::stored(g.ops.0, g.m, g.k);
    let (b_rows, b_cols) = Matrix::stored(g.ops.1, g.k, g.n);
    let a = Matrix {
        name: "A",
        ld_name: "lda",
        rows: a_rows,
        cols: a_cols,
        ld: g.lds.0,
        len: g.lens.0,
    };
    let b = Matrix {
        name: "B",
        ld_name: "ldb",
        rows: b_rows,
        cols: b_cols,
        ld: g.lds.1,
        len: g.lens.1,
    };
    let c = Matrix {
        name: "C",
        ld_name: "ldc",
        rows: g.m,
        cols: g.n,
        ld: g.lds.2,
        len: g.lens.2,
    };
    let batch = match g.batch {
        None => None,
        Some((count, sa, sb, sc)) => Some((
            int(what, "the batch count", count)?,
            long(what, "the stride of A", sa)?,
            long(what, "the stride of B", sb)?,
            long(what, "the stride of C", sc)?,
        )),
    };
    let per =
        |stride: fn(&(usize, usize, usize, usize)) -> usize| g.batch.map(|b| (b.0, stride(&b)));
    let lda = a.check(what, per(|b| b.1), false)?;
    let ldb = b.check(what, per(|b| b.2), false)?;
    let ldc = c.check(what, per(|b| b.3), true)?;
    Ok(GemmArgs {
        m,
        n,
        k,
        lda,
        ldb,
        ldc,
        batch,
    })
}

/// Checks a GEMV, `y = alpha op(A) x + beta y` with `A` stored `m × n`; returns `(m, n,
/// lda)` as `int`s.
pub(crate) fn gemv(
    what: &'static str,
    op: Op,
    (m, n, lda): (usize, usize, usize),
    (a_len, x_len, y_len): (usize, usize, usize),
) -> Result<(c_int, c_int, c_int)> {
    let (mi, ni) = (int(what, "m", m)?, int(what, "n", n)?);
    let a = Matrix {
        name: "A",
        ld_name: "lda",
        rows: m,
        cols: n,
        ld: lda,
        len: a_len,
    };
    let lda = a.check(what, None, false)?;
    let (x_needs, y_needs) = match op {
        Op::N => (n, m),
        Op::T => (m, n),
    };
    for (name, len, needs) in [("x", x_len, x_needs), ("y", y_len, y_needs)] {
        if len < needs {
            return Err(invalid(
                what,
                format!(
                    "{name} has {len} elements, but op(A) of an {m} × {n} A ({op:?}) needs {needs}"
                ),
            ));
        }
    }
    Ok((mi, ni, lda))
}

/// Checks a level-1 operation on vectors of `lens` (all equal, the operation's `n`);
/// returns `n` as an `int`.
pub(crate) fn vectors(what: &'static str, names: &[&str], lens: &[usize]) -> Result<c_int> {
    let n = lens[0];
    for (name, &len) in names.iter().zip(lens).skip(1) {
        if len != n {
            return Err(invalid(
                what,
                format!(
                    "{} has {n} elements but {name} has {len}: the operation's n is both",
                    names[0]
                ),
            ));
        }
    }
    int(what, "n (the vectors' length)", n)
}

/// Checks that a result buffer holds exactly one element.
pub(crate) fn one_result(what: &'static str, len: usize) -> Result<()> {
    if len == 1 {
        return Ok(());
    }
    Err(invalid(
        what,
        format!("the result has {len} elements: cuBLAS writes exactly one"),
    ))
}

#[cfg(test)]
mod tests;
