// Rule: a cuRAND generator generates only on streams of its own context: the generator,
// the scope's stream and the output share one brand `'ctx`.
//
// Without it: `curandSetStream` would give context A's generator a stream of context B:
// the generator's state is A's memory, the kernel would run on B's queue
// (CUDA_ERROR_INVALID_HANDLE, or work ordered with the wrong queue).
//
// Fix: make a generator in each context (with its own seed or offset) and use that one
// there.
//
// Reading the error: two errors, as for every mix of two contexts. The first marks the
// mistake: `rng`, context a's generator, "declared here, outside of the closure body", on
// context b's stream. The second marks a correct line, `b.zeroed(..)`, where b's buffer got
// b's brand (the guide, chapter 9, E0521).

use cuda_brand::curand::Rng;
use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |a| {
        let rng = Rng::new(a, 42)?;
        with_context(&device, ContextFlags::default(), |b| {
            let mut out = b.zeroed::<f32>(8)?;
            // wrong: context a's generator on context b's stream
            b.new_stream()?.scope(|s| rng.uniform(s, &mut out))
        })
    })
}
