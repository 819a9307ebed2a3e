//! Every refused extent, checked without a GPU (the checks run before any driver call).

use super::*;
use crate::error::ErrorCode;

fn shape(
    ops: (Op, Op),
    (m, n, k): (usize, usize, usize),
    lds: (usize, usize, usize),
    lens: (usize, usize, usize),
) -> GemmShape {
    GemmShape {
        ops,
        m,
        n,
        k,
        lds,
        lens,
        batch: None,
    }
}

fn refused(g: &GemmShape) -> String {
    let e = gemm("Blas::gemm", g).unwrap_err();
    assert_eq!(e.call(), "Blas::gemm");
    assert_eq!(e.code(), ErrorCode::InvalidInput);
    e.invalid().unwrap().to_string()
}

#[test]
fn a_packed_gemm_of_every_transpose_passes_with_exact_lengths() {
    // op(A) 4 × 3, op(B) 3 × 2, C 4 × 2
    for (ops, lda, ldb) in [
        ((Op::N, Op::N), 4, 3),
        ((Op::T, Op::N), 3, 3),
        ((Op::N, Op::T), 4, 2),
        ((Op::T, Op::T), 3, 2),
    ] {
        let args = gemm("t", &shape(ops, (4, 2, 3), (lda, ldb, 4), (12, 6, 8))).unwrap();
        assert_eq!((args.m, args.n, args.k), (4, 2, 3));
        assert_eq!(
            (args.lda, args.ldb, args.ldc),
            (lda as c_int, ldb as c_int, 4)
        );
        // one element fewer in any buffer is refused, naming it
        for (i, name) in ["A", "B", "C"].iter().enumerate() {
            let mut lens = [12, 6, 8];
            lens[i] -= 1;
            let detail = refused(&shape(
                ops,
                (4, 2, 3),
                (lda, ldb, 4),
                (lens[0], lens[1], lens[2]),
            ));
            assert!(
                detail.starts_with(&format!("{name} has {} elements", lens[i])),
                "{detail}"
            );
        }
    }
}

#[test]
fn a_leading_dimension_below_the_stored_rows_is_refused_naming_it() {
    // A stored k × m = 3 × 4 for Op::T: lda must be ≥ 3, not m
    let detail = refused(&shape(
        (Op::T, Op::N),
        (4, 2, 3),
        (2, 3, 4),
        (100, 100, 100),
    ));
    assert!(
        detail.starts_with("lda is 2, less than max(1, rows of A) = 3"),
        "{detail}"
    );
    let detail = refused(&shape(
        (Op::N, Op::N),
        (4, 2, 3),
        (4, 2, 4),
        (100, 100, 100),
    ));
    assert!(
        detail.starts_with("ldb is 2, less than max(1, rows of B) = 3"),
        "{detail}"
    );
    let detail = refused(&shape(
        (Op::N, Op::N),
        (4, 2, 3),
        (4, 3, 3),
        (100, 100, 100),
    ));
    assert!(
        detail.starts_with("ldc is 3, less than max(1, rows of C) = 4"),
        "{detail}"
    );
    // zero rows still need a leading dimension of 1
    let detail = refused(&shape((Op::N, Op::N), (0, 2, 3), (0, 3, 1), (0, 100, 0)));
    assert!(
        detail.starts_with("lda is 0, less than max(1, rows of A) = 1"),
        "{detail}"
    );
}

#[test]
fn a_larger_leading_dimension_needs_the_strided_extent() {
    // A 4 × 3 with lda 10 spans 10 × 2 + 4 = 24 elements
    assert!(
        gemm(
            "t",
            &shape((Op::N, Op::N), (4, 2, 3), (10, 3, 4), (24, 6, 8))
        )
        .is_ok()
    );
    let detail = refused(&shape((Op::N, Op::N), (4, 2, 3), (10, 3, 4), (23, 6, 8)));
    assert_eq!(
        detail,
        "A has 23 elements, but a 4 × 3 matrix with lda = 10 needs 24"
    );
}

#[test]
fn zero_sizes_touch_nothing() {
    // k = 0: A and B are empty (C = beta C), m = 0 or n = 0: nothing at all
    assert!(gemm("t", &shape((Op::N, Op::N), (4, 2, 0), (4, 1, 4), (0, 0, 8))).is_ok());
    assert!(gemm("t", &shape((Op::N, Op::N), (0, 2, 3), (1, 3, 1), (0, 6, 0))).is_ok());
    assert!(
        gemm(
            "t",
            &shape((Op::N, Op::N), (4, 0, 3), (4, 3, 4), (12, 0, 0))
        )
        .is_ok()
    );
}

#[test]
fn dimensions_past_cublas_int_are_refused_naming_them() {
    let big = c_int::MAX as usize + 1;
    let detail = refused(&shape(
        (Op::N, Op::N),
        (big, 1, 1),
        (big, 1, big),
        (usize::MAX, 1, usize::MAX),
    ));
    assert!(
        detail.starts_with("m is 2147483648, larger than the largest allowed, 2147483647"),
        "{detail}"
    );
    let detail = refused(&shape(
        (Op::N, Op::N),
        (1, big, 1),
        (1, 1, 1),
        (1, usize::MAX, usize::MAX),
    ));
    assert!(detail.starts_with("n is 2147483648"), "{detail}");
    let detail = refused(&shape(
        (Op::N, Op::N),
        (1, 1, big),
        (1, big, 1),
        (usize::MAX, usize::MAX, 1),
    ));
    assert!(detail.starts_with("k is 2147483648"), "{detail}");
    let detail = refused(&shape((Op::N, Op::N), (1, 1, 1), (big, 1, 1), (1, 1, 1)));
    assert!(detail.starts_with("lda is 2147483648"), "{detail}");
    // a negative number passed as unsigned (`-1 as usize`) is the largest usize
    let detail = refused(&shape(
        (Op::N, Op::N),
        (1, 1, 1),
        (1, usize::MAX, 1),
        (1, 1, 1),
    ));
    assert!(
        detail.starts_with("ldb is 18446744073709551615"),
        "{detail}"
    );
}

#[test]
fn batches_need_every_matrix_and_keep_c_apart() {
    let mut g = shape((Op::N, Op::N), (2, 2, 2), (2, 2, 2), (12, 4, 12));
    // three packed 2 × 2 products, one B for all
    g.batch = Some((3, 4, 0, 4));
    let args = gemm("t", &g).unwrap();
    assert_eq!(args.batch, Some((3, 4, 0, 4)));
    // C's matrices 3 apart share an element: refused
    g.batch = Some((3, 4, 0, 3));
    let detail = refused(&g);
    assert!(
        detail.starts_with("the stride of C is 3, less than one matrix's extent, 4 elements"),
        "{detail}"
    );
    // A's matrices may overlap (read only), but the buffer must hold the last
    g.batch = Some((3, 5, 0, 4));
    let detail = refused(&g);
    assert_eq!(
        detail,
        "A has 12 elements, but a 2 × 2 matrix with lda = 2, 3 of them 5 apart, needs 14"
    );
    // a batch count past `int`, strides past `long long`, products past memory
    g.batch = Some((c_int::MAX as usize + 1, 0, 0, 4));
    assert!(refused(&g).starts_with("the batch count is 2147483648"));
    g.batch = Some((2, usize::MAX, 0, 4));
    assert!(
        refused(&g).starts_with(
            "the stride of A is 18446744073709551615, larger than the largest allowed"
        )
    );
    g.batch = Some((3, i64::MAX as usize, 0, 4));
    assert!(
        refused(&g)
            .starts_with("A spans stride × (batch count - 1) + 4 elements, more than memory holds")
    );
    // a batch of none touches nothing; one matrix needs no stride
    g.batch = Some((0, 0, 0, 0));
    g.lens = (0, 0, 0);
    assert!(gemm("t", &g).is_ok());
    g.batch = Some((1, 0, 0, 0));
    g.lens = (4, 4, 4);
    assert!(gemm("t", &g).is_ok());
}

#[test]
fn an_extent_past_memory_is_refused_not_wrapped() {
    // lda × (cols - 1) overflows usize
    let g = shape(
        (Op::N, Op::N),
        (1, 1, 3),
        (c_int::MAX as usize, 3, 1),
        (usize::MAX, 3, 1),
    );
    // fits: 2^31 - 1 × 2 + 1; a real overflow needs an extent past usize, so check the
    // arithmetic directly
    assert!(gemm("t", &g).is_ok());
    let m = Matrix {
        name: "A",
        ld_name: "lda",
        rows: 1,
        cols: usize::MAX,
        ld: 2,
        len: usize::MAX,
    };
    let e = m.check("t", None, false).unwrap_err();
    assert!(
        e.invalid()
            .unwrap()
            .to_string()
            .starts_with("A spans lda × ("),
        "{e}"
    );
}

#[test]
fn gemv_needs_x_and_y_of_the_transposed_shape() {
    assert_eq!(gemv("t", Op::N, (3, 2, 3), (6, 2, 3)).unwrap(), (3, 2, 3));
    assert_eq!(gemv("t", Op::T, (3, 2, 3), (6, 3, 2)).unwrap(), (3, 2, 3));
    let e = gemv("t", Op::T, (3, 2, 3), (6, 2, 2)).unwrap_err();
    assert_eq!(
        e.invalid().and_then(crate::error::Invalid::reason),
        Some("x has 2 elements, but op(A) of an 3 × 2 A (T) needs 3")
    );
    let e = gemv("t", Op::N, (3, 2, 3), (6, 2, 2)).unwrap_err();
    assert!(
        e.invalid()
            .unwrap()
            .to_string()
            .starts_with("y has 2 elements")
    );
    let e = gemv("t", Op::N, (3, 2, 2), (6, 2, 3)).unwrap_err();
    assert!(e.invalid().unwrap().to_string().starts_with("lda is 2"));
    let e = gemv("t", Op::N, (3, 2, 3), (5, 2, 3)).unwrap_err();
    assert!(
        e.invalid()
            .unwrap()
            .to_string()
            .starts_with("A has 5 elements")
    );
}

#[test]
fn level_one_vectors_share_one_length_within_int() {
    assert_eq!(vectors("t", &["x", "y"], &[5, 5]).unwrap(), 5);
    let e = vectors("t", &["x", "y"], &[5, 4]).unwrap_err();
    assert_eq!(
        e.invalid().and_then(crate::error::Invalid::reason),
        Some("x has 5 elements but y has 4: the operation's n is both")
    );
    let e = vectors("t", &["x"], &[c_int::MAX as usize + 1]).unwrap_err();
    assert!(
        e.invalid()
            .unwrap()
            .to_string()
            .starts_with("n (the vectors' length) is 2147483648")
    );
    assert!(one_result("t", 1).is_ok());
    assert_eq!(
        one_result("t", 2)
            .unwrap_err()
            .invalid()
            .and_then(crate::error::Invalid::reason),
        Some("the result has 2 elements: cuBLAS writes exactly one")
    );
}
