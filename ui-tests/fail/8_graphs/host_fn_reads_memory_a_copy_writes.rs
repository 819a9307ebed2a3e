// Rule: a host function borrows from its environment like every operation of the scope, so
// it cannot read host memory that a queued copy writes. To read a copy's result in stream
// order, bind the memory to the scope (`s.bind_host_mut`), copy into it with
// `copy_to_host_view`, and read it with `host_fn_on`.
//
// Without it: nothing says when the function runs relative to the copy; with a borrow of
// its own it could run on the driver's thread while the copy engine writes the memory.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut dev = ctx.zeroed::<u32>(1024)?;
        let mut host = ctx.pinned_zeroed::<u32>(1024)?;
        ctx.new_stream()?.scope(|s| {
            let d = s.bind_mut(&mut dev);
            s.fill(d, 7)?;
            s.copy_to_host(&mut host, d.into_ref())?;
            s.host_fn(|| println!("{}", host[0])) // wrong: `host` is borrowed by the copy
        })
    })
}
