// Rule: a cuBLAS handle cannot outlive its context: `Blas<'ctx>` carries the brand of the
// context it was created in, and nothing branded leaves the `with_context` closure.
//
// Without it: the handle would be used (or destroyed, in its `Drop`: `cublasDestroy_v2`)
// after its context has been destroyed: cuBLAS's workspace and the streams and events it
// keeps belong to that context.
//
// Fix: create and use the handle inside the closure, and return plain results.

use cuda_brand::cublas::Blas;
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    // wrong: the handle escapes its context's closure
    let blas = with_context(&device, ContextFlags::default(), |ctx| Blas::new(ctx))?;
    println!("{blas:?}");
    Ok(())
}
