// Rule: a `KernelMut` is bound (`s.bind_kernel(&mut bump)`) by one scope at a time: the
// binding borrows it mutably for the whole scope, so a scope nested inside, on another
// stream, cannot bind or launch it again.
//
// `bind_kernel` takes `&'scope mut KernelMut`: the second binding is the borrow checker's
// "cannot borrow `bump` as mutable more than once at a time", because the outer scope's
// borrow lasts until the outer scope ends, past the whole inner scope. rustc marks the
// nested scope's closure as the second borrow (it captures `bump`), and the line inside it
// that uses `bump`.
//
// Without it: the outer stream's launches and the inner stream's launch run unordered (two
// non-blocking streams), and `bump` does `counter += by`, a read-modify-write of a module
// global: two launches running at once can both read the same old value, so one update is
// lost, silently, and `counter` ends at 2 or 3 from run to run.
//
// Fix: launch on the outer scope only (its launches run in order), or open the two streams
// as one scope, `outer.scope_pair(&inner, |so, si| ...)`, bind the kernel once there, and
// launch the `ScopedKernel` on both: the crate orders the two streams' launches.

use cuda_brand::{ContextFlags, Device, LaunchConfig, Module, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: bump(int by) writes only the module's globals `counter` and `table`.
        let mut bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
        let outer = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let inner = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let one = LaunchConfig::linear(1, 32);
        outer.scope(|so| {
            let bump_outer = so.bind_kernel(&mut bump);
            so.launch(bump_outer, one, (1i32,))?;
            inner.scope(|si| {
                let bump_inner = si.bind_kernel(&mut bump);
                si.launch(bump_inner, one, (1i32,))
            })?;
            so.launch(bump_outer, one, (1i32,))
        })
    })
}
