// Rule: a stream made during the setup phase is `Stream<'ctx, Preallocated>`: its scopes
// copy, fill and launch, and take scratch memory only from a pool made during setup
// (`alloc_in`, `alloc_zeroed_in`); `alloc`, `alloc_zeroed` and `alloc_from_slice`, which
// draw from the crate's unbounded pool, do not exist there.
//
// Without it: every scope of the run phase could grow the program's memory without bound.
//
// Fix: make a bounded pool in setup (`MemoryPool::with_max_size`) and use
// `s.alloc_zeroed_in(&pool, n)`.

use cuda_brand::{with_phases, ContextFlags, Device, Error};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let (stream, _run) = phases.setup(|ctx| ctx.new_stream())?;
        stream.scope(|s| {
            let scratch = s.alloc_zeroed::<f32>(1024)?;
            s.fill(scratch, 1.0)
        })?;
        Ok::<_, Error>(())
    })
}
