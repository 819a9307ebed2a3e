// Rule: a module (and every function and kernel of it) cannot leave its context's closure.
//
// Without it: the module would outlive the context that holds its code. The driver unloads
// every module of a context when the context is destroyed; a function handle of it then
// names freed driver state, and launching it is use-after-free inside libcuda (the same
// class as `cuStreamSynchronize` on a stream of a destroyed context, which killed the
// process: docs/c/destroyed_context.out, docs/c/facts/destroyed_stream_repeated.out).

use cuda_brand::{ContextFlags, Device, Module, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let module = with_context(&device, ContextFlags::default(), |ctx| {
        Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))
    })?;
    // the context, and with it the module's code, is gone here
    println!("{:?}", module.function("scale")?.max_threads_per_block());
    Ok(())
}
