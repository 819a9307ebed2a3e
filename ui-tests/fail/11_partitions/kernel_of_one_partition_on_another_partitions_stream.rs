// Rule: each SM partition is a brand of its own: a kernel loaded in partition A cannot be
// launched on a stream of partition B.
//
// Without it: the kernel is A's code, loaded with A's context current; on B's stream it
// either fails at run time (a function of another context: CUDA_ERROR_INVALID_HANDLE) or
// runs on B's SMs work that the program meant for A, and the split no longer says which
// workload may use which SMs.
//
// Fix: load the module in each partition that launches it (`b.module_from_ptx(...)`).

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, second) = sms.split(16)?;
        first.enter(|a| {
            second.enter(|b| {
                let module = a.module_from_ptx(include_str!("../../../kernels/kernels.ptx"))?;
                // SAFETY: spin(long long cycles) touches no memory.
                let spin = unsafe { module.kernel::<(i64,)>("spin") }?;
                let on_b = b.new_stream()?;
                on_b.scope(|s| s.launch(&spin, LaunchConfig::linear(8, 256), (1_000,)))
            })
        })
    })
}
