// Safety profile: `with_raw_context` is removed.
//
// It brands a context the crate did not create, on the caller's `unsafe` promise that
// nothing destroys, resets or pops it meanwhile: a promise no compiler checks. Under the
// profile every context comes from `with_context` or `with_primary_context`.
//
// Fix: `with_context` (a context of your own) or `with_primary_context` (the device's
// primary context, shared with the runtime API).

fn main() -> cuda_brand::Result<()> {
    let foreign = std::ptr::null_mut(); // a context made by another library
    // SAFETY: (this case is about the function being gone, not about the promise)
    let version = unsafe { cuda_brand::with_raw_context(foreign, |ctx| ctx.api_version()) }?;
    println!("{version}");
    Ok(())
}
