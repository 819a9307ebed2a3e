// Rule: `#[derive(DeviceCopy)]` refuses enums.
//
// An enum's only valid values are its variants' discriminants. A kernel may write any
// bytes into a buffer of them: a 2 in a buffer of `State` (whose discriminants are 0 and
// 1) is an invalid value, and reading it on the host (a `match`) is undefined behaviour in
// safe Rust. `#[repr(u32)]` fixes the size, not the values.
//
// Fix: store the discriminant in a `u32` (a field of a struct if you need more) and turn
// it back into the enum on the host with a `match` that handles every other number.

use cuda_brand::{ContextFlags, Device, DeviceCopy, with_context};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(u32)]
enum State {
    Idle = 0,
    Busy = 1,
}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let _states = ctx.from_slice(&[State::Idle, State::Busy])?;
        Ok(())
    })
}
