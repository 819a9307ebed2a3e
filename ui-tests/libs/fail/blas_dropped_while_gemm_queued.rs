// Rule: an operation borrows its cuBLAS handle until the scope has synchronized the
// stream: the handle cannot be dropped while work it queued may still run.
//
// Without it: `cublasDestroy_v2` would free the handle's workspace while the queued GEMM
// still uses it as scratch memory.
//
// Fix: let the handle live past the scope.
//
// Reading the error: two errors. The first, E0597 "`blas` does not live long enough", marks
// the correct GEMM line, which borrows `blas` for the whole scope (`'1`); the second,
// E0505, marks the mistake, the `drop(blas)` inside the scope.

use cuda_brand::cublas::{Blas, Gemm};
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let blas = Blas::new(ctx)?;
        let a = ctx.from_slice(&[1.0f32; 4])?;
        let b = ctx.from_slice(&[1.0f32; 4])?;
        let mut c = ctx.zeroed::<f32>(4)?;
        ctx.new_stream()?.scope(|s| {
            blas.gemm(s, &Gemm::new(2, 2, 2), &a, &b, &mut c)?;
            // wrong: the GEMM may still be running
            drop(blas);
            Ok(())
        })
    })
}
