// Rule: a branded buffer made in `OwnedContext::enter` cannot be moved into
// `std::thread::spawn`: the thread may outlive the closure, and the brand does not.
//
// `spawn` needs `'static` data; the buffer carries the closure's brand `'ctx`. (The
// buffer itself may cross threads: inside `std::thread::scope` it could.)
//
// Without it: the thread could use the buffer after the last handle of its context is
// dropped and the context destroyed; a copy into memory of a destroyed context returns
// `CUDA_ERROR_INVALID_VALUE` (docs/c/destroyed_context.out).
//
// Fix: send the owned form, `home.unbind(ctx, buf)?` (an `OwnedDeviceBuffer<f32>`,
// `'static` and `Send`), and bind it on the other thread:
// `buf.context().enter(|ctx| buf.bind(ctx)?.to_vec())`.

use cuda_brand::Device;
use cuda_brand::owned::OwnedContext;

fn main() -> cuda_brand::Result<()> {
    let home = OwnedContext::primary(&Device::get(0)?)?;
    let worker = home.enter(|ctx| {
        let buf = ctx.from_slice(&[1u32, 2, 3])?;
        Ok::<_, cuda_brand::Error>(std::thread::spawn(move || buf.to_vec()))
    })?;
    println!("{:?}", worker.join().expect("the worker panicked")?);
    Ok(())
}
