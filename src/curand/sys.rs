//! The private cuRAND layer: the only code that calls into the cuRAND library.
//!
//! Nothing links against cuRAND: `libcurand.so.10` (CUDA 10 to 12), then `libcurand.so`,
//! is opened at run time by the crate's one loader (`driver::dylib`), from the loader's
//! search path, then `$CUDA_HOME/lib64` and `/usr/local/cuda/lib64`, on the first call that needs it;
//! `CUDA_BRAND_CURAND_LIBRARY=/path/to/libcurand.so.10` loads that file instead. A library
//! that cannot be opened, or lacks an entry point, is an [`Error`] with
//! [`ErrorCode::CurandNotFound`], the same for every call.

#![allow(non_snake_case)]

use std::ffi::{OsStr, c_int, c_ulonglong, c_void};
use std::sync::OnceLock;

pub(crate) use super::sealed::Draw;

use crate::driver::dylib::{Library, NotFound, Spec, entry_points};
use crate::driver::{CUdeviceptr, CUstream};
use crate::error::{Error, ErrorCode, Result};

/// `curandGenerator_t` (a pointer to an opaque struct).
pub(crate) type Generator = *mut c_void;

/// The environment variable that names the cuRAND library to load instead.
pub(crate) const CURAND_LIBRARY_VAR: &str = "CUDA_BRAND_CURAND_LIBRARY";

/// What [`Error::call`] is when loading cuRAND failed.
pub(crate) const LOAD_CURAND: &str = "loading the cuRAND library";

const GET_CURAND: &str = "install the CUDA toolkit's cuRAND (libcurand.so.10, found on the \
     loader's path, in $CUDA_HOME/lib64 or in /usr/local/cuda/lib64), or set CUDA_BRAND_CURAND_LIBRARY to a \
     libcurand.so; PyTorch's CUDA wheels ship one in <site-packages>/nvidia/curand/lib";

const CURAND_LIBRARY: Spec = Spec {
    call: LOAD_CURAND,
    var: CURAND_LIBRARY_VAR,
    names: &["libcurand.so.10", "libcurand.so"],
    dirs: crate::driver::dylib::toolkit_dirs,
    not_found: ErrorCode::CurandNotFound,
    not_found_detail: not_found,
    lacks,
};

/// The detail of [`ErrorCode::CurandNotFound`]: what was tried, and how to get cuRAND.
pub(crate) fn not_found(not_found: &NotFound<'_>) -> String {
    let failures = &not_found.failures;
    match not_found.file {
        Some(file) => format!(
            "{CURAND_LIBRARY_VAR}={} could not be loaded ({failures}): point it at a \
             libcurand.so, or unset it; {GET_CURAND}",
            file.to_string_lossy(),
        ),
        None => format!(
            "{} could not be loaded ({failures}): {GET_CURAND}",
            CURAND_LIBRARY.names.join(", "),
        ),
    }
}

#[cold]
fn lacks(file: &str, symbol: &str) -> Error {
    Error::with_detail(
        LOAD_CURAND,
        ErrorCode::CurandNotFound,
        format!("{file} has no {symbol}: cuda-brand needs cuRAND 10 or newer"),
    )
}

entry_points! {
    /// cuRAND's entry points.
    ///
    /// # Safety of the calls
    ///
    /// Each pointer was read under the symbol's own name and has the signature curand.h
    /// gives it (`curandStatus_t` and `curandRngType_t` are C `enum`s of `int` size, read
    /// as `u32`/`c_int`; `cudaStream_t` is `CUstream`; output pointers are `CUdeviceptr`);
    /// the library is never unloaded. Every out-pointer is `&mut` of a live local; every
    /// generator, stream and device address comes from the caller of an `unsafe fn`.
    struct Curand {
        required GetVersion = "curandGetVersion": unsafe extern "C" fn(*mut c_int) -> u32,
        required Create = "curandCreateGenerator":
            unsafe extern "C" fn(*mut Generator, c_int) -> u32,
        required Destroy = "curandDestroyGenerator": unsafe extern "C" fn(Generator) -> u32,
        required SetStream = "curandSetStream": unsafe extern "C" fn(Generator, CUstream) -> u32,
        required SetSeed = "curandSetPseudoRandomGeneratorSeed":
            unsafe extern "C" fn(Generator, c_ulonglong) -> u32,
        required SetOffset = "curandSetGeneratorOffset":
            unsafe extern "C" fn(Generator, c_ulonglong) -> u32,
        required Uniform = "curandGenerateUniform":
            unsafe extern "C" fn(Generator, CUdeviceptr, usize) -> u32,
        required UniformDouble = "curandGenerateUniformDouble":
            unsafe extern "C" fn(Generator, CUdeviceptr, usize) -> u32,
        required Normal = "curandGenerateNormal":
            unsafe extern "C" fn(Generator, CUdeviceptr, usize, f32, f32) -> u32,
        required NormalDouble = "curandGenerateNormalDouble":
            unsafe extern "C" fn(Generator, CUdeviceptr, usize, f64, f64) -> u32,
        required LogNormal = "curandGenerateLogNormal":
            unsafe extern "C" fn(Generator, CUdeviceptr, usize, f32, f32) -> u32,
        required LogNormalDouble = "curandGenerateLogNormalDouble":
            unsafe extern "C" fn(Generator, CUdeviceptr, usize, f64, f64) -> u32,
    }
}

static LOADED: OnceLock<Result<Curand>> = OnceLock::new();

fn curand() -> Result<&'static Curand> {
    crate::driver::dylib::load_once(&LOADED, &CURAND_LIBRARY, load)
}

/// Opens the library (`file`, or the default names) and reads its table.
fn load(file: Option<&OsStr>) -> Result<Curand> {
    Curand::read(&Library::open(&CURAND_LIBRARY, file)?)
}

fn check(call: &'static str, raw: u32) -> Result<()> {
    match raw {
        0 => Ok(()),
        code => Err(Error::new(call, ErrorCode::Curand(code))),
    }
}

/// The library's version (`curandGetVersion`), e.g. 10303.
pub(crate) fn version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: a live out-pointer.
    check("curandGetVersion", unsafe {
        (curand()?.GetVersion)(&mut v)
    })?;
    Ok(v)
}

/// `curandCreateGenerator` of the `curandRngType_t` `kind`.
///
/// # Safety
/// The context the generator is for is current.
pub(crate) unsafe fn create(kind: c_int) -> Result<Generator> {
    let mut g = std::ptr::null_mut();
    // SAFETY: a live out-pointer; the caller makes the context current.
    check("curandCreateGenerator", unsafe {
        (curand()?.Create)(&mut g, kind)
    })?;
    if g.is_null() {
        return Err(Error::with_detail(
            "curandCreateGenerator",
            ErrorCode::Curand(999),
            "returned success and no generator",
        ));
    }
    Ok(g)
}

/// `curandDestroyGenerator`.
///
/// # Safety
/// `g` is live, unused afterwards, none of its work queued; its context is current.
pub(crate) unsafe fn destroy(g: Generator) -> Result<()> {
    // SAFETY: the caller's promise.
    check("curandDestroyGenerator", unsafe { (curand()?.Destroy)(g) })
}

/// `curandSetPseudoRandomGeneratorSeed`.
///
/// # Safety
/// `g` is live; no other thread uses it.
pub(crate) unsafe fn set_seed(g: Generator, seed: u64) -> Result<()> {
    // SAFETY: the caller's promise.
    check("curandSetPseudoRandomGeneratorSeed", unsafe {
        (curand()?.SetSeed)(g, seed)
    })
}

/// `curandSetGeneratorOffset`.
///
/// # Safety
/// As for [`set_seed`].
pub(crate) unsafe fn set_offset(g: Generator, offset: u64) -> Result<()> {
    // SAFETY: the caller's promise.
    check("curandSetGeneratorOffset", unsafe {
        (curand()?.SetOffset)(g, offset)
    })
}

/// `curandSetStream`, then the generation `draw` of `n` values into `out`.
///
/// # Safety
/// `g` is live, of the current context; `stream` is a live stream of it; `out` holds `n`
/// elements of the draw's type, aligned as cuRAND requires (even `n`, two elements'
/// alignment, for the normal draws), alive and untouched by anyone else until the stream
/// has run the generation; the generator's state is not in use by another stream.
pub(crate) unsafe fn generate(
    g: Generator,
    stream: CUstream,
    draw: Draw,
    out: CUdeviceptr,
    n: usize,
) -> Result<()> {
    let t = curand()?;
    // SAFETY: the caller's promise.
    check("curandSetStream", unsafe { (t.SetStream)(g, stream) })?;
    #[allow(clippy::multiple_unsafe_ops_per_block)] // one call runs, whichever the arm
    // SAFETY: the caller's promise, for whichever call runs.
    let (call, raw) = unsafe {
        match draw {
            Draw::Uniform32 => ("curandGenerateUniform", (t.Uniform)(g, out, n)),
            Draw::Uniform64 => ("curandGenerateUniformDouble", (t.UniformDouble)(g, out, n)),
            Draw::Normal32(m, s) => ("curandGenerateNormal", (t.Normal)(g, out, n, m, s)),
            Draw::Normal64(m, s) => (
                "curandGenerateNormalDouble",
                (t.NormalDouble)(g, out, n, m, s),
            ),
            Draw::LogNormal32(m, s) => ("curandGenerateLogNormal", (t.LogNormal)(g, out, n, m, s)),
            Draw::LogNormal64(m, s) => (
                "curandGenerateLogNormalDouble",
                (t.LogNormalDouble)(g, out, n, m, s),
            ),
        }
    };
    check(call, raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_names_itself_and_the_variable() {
        let Err(e) = load(Some(OsStr::new("/nonexistent/libcurand.so.10"))) else {
            panic!("/nonexistent/libcurand.so.10 loaded");
        };
        assert_eq!(e.call(), "loading the cuRAND library");
        assert_eq!(e.code(), ErrorCode::CurandNotFound);
        let detail = e.detail().unwrap();
        assert!(
            detail.starts_with(
                "CUDA_BRAND_CURAND_LIBRARY=/nonexistent/libcurand.so.10 could not be loaded"
            ),
            "{detail}"
        );
        assert!(detail.contains("nvidia/curand/lib"), "{detail}");
        let text = not_found(&NotFound {
            file: None,
            failures: "x".into(),
        });
        assert!(text.starts_with("libcurand.so.10, libcurand.so could not be loaded (x)"));
        assert!(text.contains(CURAND_LIBRARY_VAR), "{text}");
    }
}
