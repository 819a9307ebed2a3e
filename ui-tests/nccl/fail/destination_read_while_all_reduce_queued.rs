// Rule: a collective borrows its buffers until the scope has synchronized the stream,
// like any asynchronous work: the host cannot read the destination while the all-reduce
// may still be writing it.
//
// Without it: `to_vec` would copy the destination while NCCL's kernel (and, with direct
// peer writes, the other ranks' kernels) still writes it: a mix of old and reduced values.
//
// Fix: read it after the scope: `stream.scope(...)?; dst.to_vec()?`.

use cuda_brand::nccl::{Clique, ReduceOp};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        let src = ctx.from_slice(&[1.0f32; 4])?;
        let mut dst = ctx.zeroed::<f32>(4)?;
        ctx.new_stream()?.scope(|s| {
            comm.all_reduce(s, &mut dst, &src, ReduceOp::Sum)?;
            // wrong: the all-reduce may still be writing `dst`
            println!("{:?}", dst.to_vec()?);
            Ok(())
        })
    })
}
