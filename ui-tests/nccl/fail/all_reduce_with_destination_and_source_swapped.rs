// Rule: a collective takes the destination first, then the source, as every copy of the
// crate (NCCL's C API has the source first); the source takes only shared views
// (`&buffer`, `&buffer[range]`, a `DeviceRef`), the destination only exclusive ones.
//
// `all_reduce`'s source is `impl IntoDeviceRef<'scope, 'ctx, T>`, which `&mut
// DeviceBuffer` does not implement, so a call written in the C API's order with both
// buffers `&mut` does not compile.
//
// Without it: every rank's input is overwritten by the reduction of the ranks' outputs
// (zeros here), and the gradients are lost; NCCL cannot tell.
//
// Fix: `comm.all_reduce(s, &mut sum, &grads, ReduceOp::Sum)`.

use cuda_brand::nccl::{Clique, ReduceOp};
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        let mut grads = ctx.from_slice(&[1.0f32; 4])?;
        let mut sum = ctx.zeroed::<f32>(4)?;
        // wrong: the source first, as `ncclAllReduce(sendbuff, recvbuff, ..)`
        ctx.new_stream()?.scope(|s| comm.all_reduce(s, &mut grads, &mut sum, ReduceOp::Sum))
    })
}
