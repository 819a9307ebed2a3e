// Rule: an executable graph stays on its thread (it is neither `Send` nor `Sync`): the
// driver's graph objects are not thread-safe, so two threads must not launch one at once.
//
// Without it: two threads calling cuGraphLaunch on one executable graph at the same time,
// which the driver's documentation forbids ("Graph objects are not threadsafe").

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut x = ctx.zeroed::<u32>(1024)?;
        let exec = ctx.capture(|g| g.fill(&mut x, 7))?.0.instantiate()?;
        let shared = ctx.share();
        std::thread::scope(|threads| {
            threads.spawn(|| {
                shared.enter(|ctx| ctx.new_stream()?.scope(|s| exec.launch(s)))
            });
        });
        Ok(())
    })
}
