//! The private cuFFT layer: the only code that calls into the cuFFT library.
//!
//! Nothing links against cuFFT: `libcufft.so.12` (CUDA 12), then `libcufft.so.11` (CUDA
//! 11), then `libcufft.so`, is opened at run time by the crate's one loader
//! (`driver::dylib`), from the loader's search path, then `$CUDA_HOME/lib64` and `/usr/local/cuda/lib64`, on
//! the first call that needs it; `CUDA_BRAND_CUFFT_LIBRARY=/path/to/libcufft.so.12` loads
//! that file instead. A library that cannot be opened, or lacks an entry point, is an
//! [`Error`] with [`ErrorCode::CufftNotFound`], the same for every call.

#![allow(non_snake_case)]

use std::ffi::{OsStr, c_int, c_longlong, c_void};
use std::sync::OnceLock;

use crate::driver::dylib::{Library, NotFound, Spec, entry_points};
use crate::driver::{CUdeviceptr, CUstream};
use crate::error::{Error, ErrorCode, Result};

/// `cufftHandle`.
pub(crate) type Handle = c_int;

/// The environment variable that names the cuFFT library to load instead.
pub(crate) const CUFFT_LIBRARY_VAR: &str = "CUDA_BRAND_CUFFT_LIBRARY";

/// What [`Error::call`] is when loading cuFFT failed.
pub(crate) const LOAD_CUFFT: &str = "loading the cuFFT library";

/// What every "not found" error ends with.
const GET_CUFFT: &str = "install the CUDA toolkit's cuFFT (libcufft.so.12 or .11, found on \
     the loader's path, in $CUDA_HOME/lib64 or in /usr/local/cuda/lib64), or set CUDA_BRAND_CUFFT_LIBRARY to a \
     libcufft.so; PyTorch's CUDA wheels ship one in <site-packages>/nvidia/cufft/lib";

const CUFFT_LIBRARY: Spec = Spec {
    call: LOAD_CUFFT,
    var: CUFFT_LIBRARY_VAR,
    names: &["libcufft.so.12", "libcufft.so.11", "libcufft.so"],
    dirs: crate::driver::dylib::toolkit_dirs,
    not_found: ErrorCode::CufftNotFound,
    not_found_detail: not_found,
    lacks,
};

/// The detail of [`ErrorCode::CufftNotFound`]: what was tried, and how to get cuFFT.
pub(crate) fn not_found(not_found: &NotFound<'_>) -> String {
    let failures = &not_found.failures;
    match not_found.file {
        Some(file) => format!(
            "{CUFFT_LIBRARY_VAR}={} could not be loaded ({failures}): point it at a \
             libcufft.so, or unset it; {GET_CUFFT}",
            file.to_string_lossy(),
        ),
        None => format!(
            "{} could not be loaded ({failures}): {GET_CUFFT}",
            CUFFT_LIBRARY.names.join(", "),
        ),
    }
}

#[cold]
fn lacks(file: &str, symbol: &str) -> Error {
    Error::with_detail(
        LOAD_CUFFT,
        ErrorCode::CufftNotFound,
        format!("{file} has no {symbol}: cuda-brand needs cuFFT 10.0 (CUDA 10) or newer"),
    )
}

entry_points! {
    /// cuFFT's entry points.
    ///
    /// # Safety of the calls
    ///
    /// Each pointer was read under the symbol's own name and has the signature cufft.h
    /// gives it (`cufftResult` and `cufftType` are C `enum`s of `int` size, read as
    /// `u32`/`c_int`; `cudaStream_t` is `CUstream`; device pointers are `CUdeviceptr`, an
    /// integer of pointer size on the 64-bit platforms CUDA supports); the library is never
    /// unloaded. Every out-pointer is `&mut` of a live local of the C type's size; every
    /// plan, stream and device address comes from the caller of an `unsafe fn` wrapper.
    struct Cufft {
        required GetVersion = "cufftGetVersion": unsafe extern "C" fn(*mut c_int) -> u32,
        required Create = "cufftCreate": unsafe extern "C" fn(*mut Handle) -> u32,
        required Destroy = "cufftDestroy": unsafe extern "C" fn(Handle) -> u32,
        required MakePlanMany64 = "cufftMakePlanMany64": unsafe extern "C" fn(
            Handle,
            c_int,
            *mut c_longlong,
            *mut c_longlong,
            c_longlong,
            c_longlong,
            *mut c_longlong,
            c_longlong,
            c_longlong,
            c_int,
            c_longlong,
            *mut usize,
        ) -> u32,
        required SetStream = "cufftSetStream": unsafe extern "C" fn(Handle, CUstream) -> u32,
        required ExecC2C = "cufftExecC2C":
            unsafe extern "C" fn(Handle, CUdeviceptr, CUdeviceptr, c_int) -> u32,
        required ExecZ2Z = "cufftExecZ2Z":
            unsafe extern "C" fn(Handle, CUdeviceptr, CUdeviceptr, c_int) -> u32,
        required ExecR2C = "cufftExecR2C": unsafe extern "C" fn(Handle, CUdeviceptr, CUdeviceptr) -> u32,
        required ExecD2Z = "cufftExecD2Z": unsafe extern "C" fn(Handle, CUdeviceptr, CUdeviceptr) -> u32,
        required ExecC2R = "cufftExecC2R": unsafe extern "C" fn(Handle, CUdeviceptr, CUdeviceptr) -> u32,
        required ExecZ2D = "cufftExecZ2D": unsafe extern "C" fn(Handle, CUdeviceptr, CUdeviceptr) -> u32,
    }
}

static LOADED: OnceLock<Result<Cufft>> = OnceLock::new();

/// The table, loading the library on first use.
fn cufft() -> Result<&'static Cufft> {
    crate::driver::dylib::load_once(&LOADED, &CUFFT_LIBRARY, load)
}

/// Opens the library (`file`, or the default names) and reads its table.
fn load(file: Option<&OsStr>) -> Result<Cufft> {
    Cufft::read(&Library::open(&CUFFT_LIBRARY, file)?)
}

/// Turns a `cufftResult` into a `Result`, naming the call.
fn check(call: &'static str, raw: u32) -> Result<()> {
    match raw {
        0 => Ok(()),
        code => Err(Error::new(call, ErrorCode::Cufft(code))),
    }
}

/// The library's version (`cufftGetVersion`), e.g. 11300.
pub(crate) fn version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: a live out-pointer.
    check("cufftGetVersion", unsafe { (cufft()?.GetVersion)(&mut v) })?;
    Ok(v)
}

/// `cufftCreate`, then `cufftMakePlanMany64` with the basic (contiguous) layout: a plan of
/// `shape` (row-major), `batch` transforms, of `kind` (a `cufftType`). Destroys the handle
/// again when planning fails.
///
/// # Safety
/// The context the plan is for is current.
pub(crate) unsafe fn make_plan(shape: &[usize], kind: c_int, batch: usize) -> Result<Handle> {
    let t = cufft()?;
    let mut plan: Handle = 0;
    // SAFETY: a live out-pointer.
    check("cufftCreate", unsafe { (t.Create)(&mut plan) })?;
    let mut n: Vec<c_longlong> = shape.iter().map(|&d| d as c_longlong).collect();
    let mut work = 0usize;
    // SAFETY: `n` holds `shape.len()` extents (1 to 3, checked by the caller); null
    // embeds select the basic layout, so strides and distances are ignored; `plan` is the
    // handle just created; the caller makes the context current.
    let made = check("cufftMakePlanMany64", unsafe {
        (t.MakePlanMany64)(
            plan,
            shape.len() as c_int,
            n.as_mut_ptr(),
            std::ptr::null_mut(),
            1,
            0,
            std::ptr::null_mut(),
            1,
            0,
            kind,
            batch as c_longlong,
            &mut work,
        )
    });
    if let Err(e) = made {
        // SAFETY: our handle, never used again.
        let _ = unsafe { destroy(plan) };
        return Err(e);
    }
    Ok(plan)
}

/// `cufftDestroy`.
///
/// # Safety
/// `plan` is a live plan, unused afterwards, no work of it queued; its context is current.
pub(crate) unsafe fn destroy(plan: Handle) -> Result<()> {
    // SAFETY: the caller's promise.
    check("cufftDestroy", unsafe { (cufft()?.Destroy)(plan) })
}

/// `cufftSetStream`, then the `cufftExec*` of the `cufftType` `kind`, from `input` to
/// `output` (`direction` for the complex-to-complex ones).
///
/// # Safety
/// `plan` is live, of the current context, made for `kind`; `stream` is a live
/// stream of that context; `input` and `output` hold what the plan reads and writes (and
/// C2R's input may be overwritten), stay alive and untouched by anyone else until the
/// stream has run the transform; the plan's work area is not in use by another stream.
pub(crate) unsafe fn exec(
    plan: Handle,
    stream: CUstream,
    kind: c_int,
    input: CUdeviceptr,
    output: CUdeviceptr,
    direction: c_int,
) -> Result<()> {
    let t = cufft()?;
    // SAFETY: the caller's promise.
    check("cufftSetStream", unsafe { (t.SetStream)(plan, stream) })?;
    #[allow(clippy::multiple_unsafe_ops_per_block)] // one call runs, whichever the arm
    // SAFETY: the caller's promise, for whichever call runs.
    let (call, raw) = unsafe {
        match kind {
            0x29 => ("cufftExecC2C", (t.ExecC2C)(plan, input, output, direction)),
            0x69 => ("cufftExecZ2Z", (t.ExecZ2Z)(plan, input, output, direction)),
            0x2a => ("cufftExecR2C", (t.ExecR2C)(plan, input, output)),
            0x6a => ("cufftExecD2Z", (t.ExecD2Z)(plan, input, output)),
            0x2c => ("cufftExecC2R", (t.ExecC2R)(plan, input, output)),
            0x6c => ("cufftExecZ2D", (t.ExecZ2D)(plan, input, output)),
            _ => ("cufftExec", 3), // CUFFT_INVALID_TYPE: no kind of the crate's
        }
    };
    check(call, raw)
}

// Every device pointer cufft.h declares (`cufftComplex*`, ...) is passed as a
// `CUdeviceptr`, an integer of a pointer's size.
const _: () = assert!(std::mem::size_of::<CUdeviceptr>() == std::mem::size_of::<*mut c_void>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_names_itself_and_the_variable() {
        let Err(e) = load(Some(OsStr::new("/nonexistent/libcufft.so.12"))) else {
            panic!("/nonexistent/libcufft.so.12 loaded");
        };
        assert_eq!(e.call(), "loading the cuFFT library");
        assert_eq!(e.code(), ErrorCode::CufftNotFound);
        let detail = e.detail().unwrap();
        assert!(
            detail.starts_with(
                "CUDA_BRAND_CUFFT_LIBRARY=/nonexistent/libcufft.so.12 could not be loaded"
            ),
            "{detail}"
        );
        assert!(detail.contains("nvidia/cufft/lib"), "{detail}");
        // the default names, each on the search path and in the toolkit's folders
        let failures = String::from("x");
        let text = not_found(&NotFound {
            file: None,
            failures,
        });
        assert!(
            text.starts_with("libcufft.so.12, libcufft.so.11, libcufft.so could not be loaded (x)")
        );
        assert!(text.contains(CUFFT_LIBRARY_VAR), "{text}");
    }
}
