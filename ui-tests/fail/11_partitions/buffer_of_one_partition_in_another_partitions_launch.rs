// Rule: memory made by a partition carries the partition's brand: a kernel of partition B
// cannot be given partition A's buffer.
//
// Without it: the driver would accept the pointer (memory is device-wide), but nothing
// orders B's stream after A's: B's kernel could read the buffer while A's stream still
// writes it, or after A's partition has ended and freed it.
//
// Fix: copy the data to B through the host (`a_buf.to_vec()`, then `b.from_slice(..)`),
// or compute it in B.

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, second) = sms.split(16)?;
        first.enter(|a| {
            let mut on_a = a.zeroed::<f32>(1024)?;
            second.enter(|b| {
                let module = b.module_from_ptx(include_str!("../../../kernels/kernels.ptx"))?;
                // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
                let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
                let stream = b.new_stream()?;
                stream.scope(|s| s.launch(&scale, scale.config_for(1024)?, (&mut on_a, 2.0)))
            })
        })
    })
}
