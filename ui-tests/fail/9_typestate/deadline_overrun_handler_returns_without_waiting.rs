// Rule: a scope with a deadline never returns while its work may still run: the overrun
// handler of `Stream::scope_within` returns `KeepWaiting`, which can only say how to go on
// waiting (`for_another(duration)` or `until_idle()`), or it never returns
// (`std::process::abort()`).
//
// A handler that just returns (here `()`, meaning "give up and go on") does not have the
// handler's type: the closure's body is `()`, `KeepWaiting` expected.
//
// Without it: the scope would return while the kernel still writes `buf`, and release its
// borrow: `buf` could be read, written or freed under the running kernel (memory freed
// under a queued kernel was written after reallocation: docs/c/free_while_running.out).
//
// Fix: decide what to do while waiting: `KeepWaiting::for_another(Duration::from_millis(5))`
// to be asked again, `KeepWaiting::until_idle()`, or `std::process::abort()` (or put the
// system in a safe state first) when waiting longer is not acceptable.

use std::time::Duration;

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let mut buf = ctx.zeroed::<f32>(1 << 20)?;
        stream.scope_within(
            Duration::from_millis(2),
            |overrun| {
                eprintln!("overran by {:?}; giving up", overrun.elapsed());
            },
            |s| s.fill(&mut buf, 1.0f32),
        )?;
        Ok(())
    })
}
