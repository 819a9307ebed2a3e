// Rule: a cuBLAS handle queues work only on streams of its own context: the handle, the
// scope's stream and every buffer of an operation share one brand `'ctx`.
//
// Without it: `cublasSetStream_v2` would give context A's handle a stream of context B,
// and the GEMM would run with A's workspace on B's queue: memory of another context, or
// CUDA_ERROR_INVALID_HANDLE, or work ordered with the wrong queue.
//
// Fix: make a handle in each context (`Blas::new(b)`) and use that one there.
//
// Reading the error: two errors, as for every mix of two contexts. The first marks the
// mistake: `blas`, context a's handle, "declared here, outside of the closure body", on
// context b's stream. The second marks a correct line, `b.from_slice(..)`, where b's buffer
// got b's brand (the guide, chapter 9, E0521).

use cuda_brand::cublas::{Blas, Gemm};
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let blas = Blas::new(a)?;
        with_context(&device, ContextFlags::default(), |b| {
            let x = b.from_slice(&[1.0f32; 4])?;
            let y = b.from_slice(&[1.0f32; 4])?;
            let mut z = b.zeroed::<f32>(4)?;
            // wrong: context a's handle on context b's stream
            b.new_stream()?.scope(|s| blas.gemm(s, &Gemm::new(2, 2, 2), &x, &y, &mut z))
        })
    })
}
