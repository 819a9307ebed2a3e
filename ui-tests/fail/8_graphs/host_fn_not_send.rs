// Rule: a host function runs on a thread of the driver, so it must be `Send`: here it holds
// an `Rc`, whose count the scope's thread also changes.
//
// Without it: two threads change the `Rc`'s count at once, a data race.

use std::rc::Rc;

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let count = Rc::new(0);
        ctx.new_stream()?.scope(|s| {
            let mine = Rc::clone(&count);
            s.host_fn(move || println!("{mine}")) // wrong: runs on the driver's thread
        })
    })
}
