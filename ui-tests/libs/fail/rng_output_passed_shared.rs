// Rule: a generation writes its output, so it takes it exclusively (`&mut buf`, or a
// `DeviceMut` of the scope), never through a shared borrow.
//
// Without it: two holders of `&buf` could have it written by cuRAND while the other reads
// it (the host, or another stream of the scope), with no order between them.
//
// Fix: `rng.uniform(s, &mut out)`.

use cuda_brand::curand::Rng;
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let rng = Rng::new(ctx, 42)?;
        let out = ctx.zeroed::<f32>(8)?;
        // wrong: `&out` is a shared borrow
        ctx.new_stream()?.scope(|s| rng.uniform(s, &out))
    })
}
