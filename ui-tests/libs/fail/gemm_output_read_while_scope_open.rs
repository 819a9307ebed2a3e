// Rule: a GEMM borrows its output C exclusively until the scope has synchronized the
// stream: the host cannot read C while the product may still be writing it.
//
// Without it: `to_vec` would copy C while cuBLAS's kernel still writes it: zeros, partial
// sums and finished elements mixed.
//
// Fix: read C after the scope: `stream.scope(...)?; c.to_vec()?`.

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
            // wrong: the GEMM may still be writing `c`
            println!("{:?}", c.to_vec()?);
            Ok(())
        })
    })
}
