// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `with_raw_context` is an `unsafe
// fn`, so the lint refuses it.
//
// Why: it brands a context the crate did not create, on the promise that nothing destroys,
// resets or pops it meanwhile: a promise no compiler checks.
//
// Fix: `with_context` (a context of your own) or `with_primary_context` (the device's
// primary context, shared with the runtime API).

#![deny(unsafe_code)]



fn main() -> cuda_brand::Result<()> {
    let foreign = std::ptr::null_mut(); // a context made by another library
    // SAFETY: (the case is about the lint, not the promise)
    let version = unsafe { cuda_brand::with_raw_context(foreign, |ctx| ctx.api_version()) }?;
    println!("{version}");
    Ok(())
}
