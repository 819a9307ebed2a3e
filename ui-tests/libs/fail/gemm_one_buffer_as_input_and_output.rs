// Rule: a GEMM takes its inputs A and B shared and its output C exclusive, so C cannot
// also be A or B: `C = A B` with C one of its own factors is refused.
//
// Without it: cuBLAS's kernel would overwrite elements of C that it has yet to read as
// elements of A: the product of a half-overwritten matrix. (cuBLAS documents no in-place
// GEMM; two views of one buffer bound in a scope are refused at run time, naming the
// argument, since the borrow checker cannot see them.)
//
// Fix: write the product to another buffer, then copy it back if it must replace A.

use cuda_brand::cublas::{Blas, Gemm};
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let blas = Blas::new(ctx)?;
        let mut a = ctx.from_slice(&[1.0f32; 4])?;
        let b = ctx.from_slice(&[1.0f32; 4])?;
        // wrong: `a` as the input A and the output C
        ctx.new_stream()?.scope(|s| blas.gemm(s, &Gemm::new(2, 2, 2), &a, &b, &mut a))
    })
}
