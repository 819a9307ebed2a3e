//! The private cuBLAS layer: the only code that calls into the cuBLAS library.
//!
//! As with the driver, nothing links against cuBLAS: the file `CUDA_BRAND_CUBLAS_LIBRARY`
//! names, else the first of `libcublas.so.13`, `libcublas.so.12`, `libcublas.so` that
//! loads (from the loader's search path, then `$CUDA_HOME/lib64` and
//! `/usr/local/cuda/lib64`), is opened by the crate's one loader (`driver::dylib`) on the
//! first call that needs it, once per process. cuBLAS loads its own `libcublasLt` beside
//! it. A library that cannot be opened, or lacks an entry point, is an [`Error`] with
//! [`ErrorCode::CublasNotFound`]; every call then returns that error.

#![allow(non_camel_case_types)]

use std::ffi::{OsStr, c_int, c_longlong, c_void};
use std::sync::OnceLock;

use crate::driver::CUstream;
use crate::driver::dylib::{Library, NotFound, Spec, entry_points};
use crate::error::{Error, ErrorCode, Result};

/// `struct cublasContext` (opaque).
#[repr(C)]
pub(crate) struct cublasContext {
    _opaque: [u8; 0],
}

/// `cublasHandle_t`.
pub(crate) type cublasHandle_t = *mut cublasContext;

/// The environment variable that names the cuBLAS library to load instead of the default
/// names.
pub(crate) const CUBLAS_LIBRARY_VAR: &str = "CUDA_BRAND_CUBLAS_LIBRARY";

/// What [`Error::call`] is when loading cuBLAS failed.
pub(crate) const LOAD_CUBLAS: &str = "loading the cuBLAS library";

#[cfg(windows)]
const NAMES: &[&str] = &["cublas64_13.dll", "cublas64_12.dll"];
#[cfg(not(windows))]
const NAMES: &[&str] = &["libcublas.so.13", "libcublas.so.12", "libcublas.so"];

/// What every "not found" error ends with.
const GET_CUBLAS: &str = "install cuBLAS 12 or newer (the CUDA toolkit's libcublas package), \
     or set CUDA_BRAND_CUBLAS_LIBRARY to a libcublas.so.12 or .13; PyTorch's CUDA wheels ship \
     one at <site-packages>/nvidia/cublas/lib/ (python3 -c 'import nvidia.cublas, os; \
     print(os.path.join(list(nvidia.cublas.__path__)[0], \"lib\"))')";

/// The cuBLAS library: the file [`CUBLAS_LIBRARY_VAR`] names, else the first of [`NAMES`]
/// that loads, from the loader's search path, then from the toolkit's places.
const CUBLAS_LIBRARY: Spec = Spec {
    call: LOAD_CUBLAS,
    var: CUBLAS_LIBRARY_VAR,
    names: NAMES,
    dirs: crate::driver::dylib::toolkit_dirs,
    not_found: ErrorCode::CublasNotFound,
    not_found_detail: not_found,
    lacks: |file, symbol| {
        Error::with_detail(
            LOAD_CUBLAS,
            ErrorCode::CublasNotFound,
            format!("{file} has no {symbol}: cuda-brand needs cuBLAS 12 or newer"),
        )
    },
};

/// The detail of [`ErrorCode::CublasNotFound`]: what was tried, and how to get cuBLAS.
fn not_found(not_found: &NotFound<'_>) -> String {
    let failures = &not_found.failures;
    match not_found.file {
        Some(file) => format!(
            "{CUBLAS_LIBRARY_VAR}={} could not be loaded ({failures}): point it at a \
             libcublas.so, or unset it; {GET_CUBLAS}",
            file.to_string_lossy(),
        ),
        None => format!(
            "none of {} could be loaded, from the loader's search path, $CUDA_HOME/lib64 or \
             /usr/local/cuda/lib64 ({failures}): {GET_CUBLAS}",
            NAMES.join(", "),
        ),
    }
}

entry_points! {
    /// cuBLAS's entry points (cublas_api.h of cuBLAS 12 and 13), each with
    /// `cublasStatus_t` and the enums (`cublasOperation_t`, `cudaDataType`,
    /// `cublasComputeType_t`, `cublasGemmAlgo_t`, `cublasPointerMode_t`, `cublasMath_t`,
    /// `libraryPropertyType`) as C `int`s; `cudaStream_t` is `CUstream`.
    ///
    /// # Safety of the calls
    ///
    /// Stated here once for every call this module makes through the table: each pointer was
    /// read from the library under the symbol's own name with the header's signature; the
    /// library is never unloaded. Every handle, stream and device address comes from the
    /// caller of an `unsafe fn` wrapper, whose `# Safety` section says what cuBLAS requires.
    pub(crate) struct Api {
        pub(crate) required create = "cublasCreate_v2": unsafe extern "C" fn(*mut cublasHandle_t) -> c_int,
        pub(crate) required destroy = "cublasDestroy_v2": unsafe extern "C" fn(cublasHandle_t) -> c_int,
        pub(crate) required set_stream = "cublasSetStream_v2":
            unsafe extern "C" fn(cublasHandle_t, CUstream) -> c_int,
        pub(crate) required set_pointer_mode = "cublasSetPointerMode_v2":
            unsafe extern "C" fn(cublasHandle_t, c_int) -> c_int,
        pub(crate) required set_math_mode = "cublasSetMathMode":
            unsafe extern "C" fn(cublasHandle_t, c_int) -> c_int,
        pub(crate) required get_property = "cublasGetProperty": unsafe extern "C" fn(c_int, *mut c_int) -> c_int,
        pub(crate) required gemm_ex = "cublasGemmEx": unsafe extern "C" fn(
            cublasHandle_t,
            c_int,
            c_int,
            c_int,
            c_int,
            c_int,
            *const c_void,
            *const c_void,
            c_int,
            c_int,
            *const c_void,
            c_int,
            c_int,
            *const c_void,
            *mut c_void,
            c_int,
            c_int,
            c_int,
            c_int,
        ) -> c_int,
        pub(crate) required gemm_strided_batched_ex = "cublasGemmStridedBatchedEx": unsafe extern "C" fn(
            cublasHandle_t,
            c_int,
            c_int,
            c_int,
            c_int,
            c_int,
            *const c_void,
            *const c_void,
            c_int,
            c_int,
            c_longlong,
            *const c_void,
            c_int,
            c_int,
            c_longlong,
            *const c_void,
            *mut c_void,
            c_int,
            c_int,
            c_longlong,
            c_int,
            c_int,
            c_int,
        ) -> c_int,
        pub(crate) required sgemv = "cublasSgemv_v2": unsafe extern "C" fn(
            cublasHandle_t, c_int, c_int, c_int, *const f32, *const f32, c_int,
            *const f32, c_int, *const f32, *mut f32, c_int,
        ) -> c_int,
        pub(crate) required dgemv = "cublasDgemv_v2": unsafe extern "C" fn(
            cublasHandle_t, c_int, c_int, c_int, *const f64, *const f64, c_int,
            *const f64, c_int, *const f64, *mut f64, c_int,
        ) -> c_int,
        pub(crate) required saxpy = "cublasSaxpy_v2": unsafe extern "C" fn(
            cublasHandle_t, c_int, *const f32, *const f32, c_int, *mut f32, c_int,
        ) -> c_int,
        pub(crate) required daxpy = "cublasDaxpy_v2": unsafe extern "C" fn(
            cublasHandle_t, c_int, *const f64, *const f64, c_int, *mut f64, c_int,
        ) -> c_int,
        pub(crate) required sdot = "cublasSdot_v2": unsafe extern "C" fn(
            cublasHandle_t, c_int, *const f32, c_int, *const f32, c_int, *mut f32,
        ) -> c_int,
        pub(crate) required ddot = "cublasDdot_v2": unsafe extern "C" fn(
            cublasHandle_t, c_int, *const f64, c_int, *const f64, c_int, *mut f64,
        ) -> c_int,
        pub(crate) required snrm2 = "cublasSnrm2_v2":
            unsafe extern "C" fn(cublasHandle_t, c_int, *const f32, c_int, *mut f32) -> c_int,
        pub(crate) required dnrm2 = "cublasDnrm2_v2":
            unsafe extern "C" fn(cublasHandle_t, c_int, *const f64, c_int, *mut f64) -> c_int,
        pub(crate) required sscal = "cublasSscal_v2":
            unsafe extern "C" fn(cublasHandle_t, c_int, *const f32, *mut f32, c_int) -> c_int,
        pub(crate) required dscal = "cublasDscal_v2":
            unsafe extern "C" fn(cublasHandle_t, c_int, *const f64, *mut f64, c_int) -> c_int,
    }
}

/// The loaded library, or why it could not be loaded (the same outcome for every call).
pub(crate) fn api() -> Result<&'static Api> {
    static API: OnceLock<Result<Api>> = OnceLock::new();
    crate::driver::dylib::load_once(&API, &CUBLAS_LIBRARY, load)
}

/// Opens the cuBLAS library (`file`, or the default names and places) and reads its entry
/// points. The library is never closed.
pub(crate) fn load(file: Option<&OsStr>) -> Result<Api> {
    Api::read(&Library::open(&CUBLAS_LIBRARY, file)?)
}

/// A `cublasStatus_t` as a `Result`, naming the call.
pub(crate) fn check(call: &'static str, raw: c_int) -> Result<()> {
    match raw {
        0 => Ok(()),
        raw => Err(Error::new(call, ErrorCode::Cublas(raw as u32))),
    }
}

/// `cublasPointerMode_t`: scalars read from host memory before the call returns.
pub(crate) const POINTER_MODE_HOST: c_int = 0;
/// `cublasPointerMode_t`: scalars and results in device memory, in stream order.
pub(crate) const POINTER_MODE_DEVICE: c_int = 1;
/// `CUBLAS_GEMM_DEFAULT`.
pub(crate) const GEMM_DEFAULT: c_int = -1;

/// cuBLAS's version, `(major, minor, patch)` (`cublasGetProperty`); needs no GPU.
pub(crate) fn version() -> Result<(i32, i32, i32)> {
    let api = api()?;
    let mut v = [0 as c_int; 3];
    for (property, out) in v.iter_mut().enumerate() {
        // SAFETY: `MAJOR_VERSION` (0), `MINOR_VERSION` (1), `PATCH_LEVEL` (2), and a live
        // out-pointer.
        check("cublasGetProperty", unsafe {
            (api.get_property)(property as c_int, out)
        })?;
    }
    Ok((v[0], v[1], v[2]))
}

/// `cublasCreate_v2`.
///
/// # Safety
/// The context the handle is for is current on the calling thread.
pub(crate) unsafe fn create() -> Result<cublasHandle_t> {
    let api = api()?;
    let mut handle = std::ptr::null_mut();
    // SAFETY: a live out-pointer; the caller makes the context current.
    check("cublasCreate_v2", unsafe { (api.create)(&mut handle) })?;
    Ok(handle)
}

/// `cublasDestroy_v2`.
///
/// # Safety
/// `handle` is live, nothing uses it afterwards, and its context is current.
pub(crate) unsafe fn destroy(handle: cublasHandle_t) -> Result<()> {
    let api = api()?;
    // SAFETY: the caller's promise.
    check("cublasDestroy_v2", unsafe { (api.destroy)(handle) })
}

/// A GEMM's arguments, checked, as `cublasGemmEx` (or, with `batch`,
/// `cublasGemmStridedBatchedEx`) takes them.
pub(crate) struct GemmCall {
    pub(crate) ops: (c_int, c_int),
    pub(crate) mnk: (c_int, c_int, c_int),
    /// `alpha` and `beta`, host pointers of the compute type's scalar type.
    pub(crate) scalars: (*const c_void, *const c_void),
    pub(crate) a: (*const c_void, c_int),
    pub(crate) b: (*const c_void, c_int),
    pub(crate) c: (*mut c_void, c_int),
    pub(crate) data_type: c_int,
    pub(crate) compute: c_int,
    /// `(count, stride_a, stride_b, stride_c)`.
    pub(crate) batch: Option<(c_int, c_longlong, c_longlong, c_longlong)>,
}

/// `cublasGemmEx` or `cublasGemmStridedBatchedEx`; the raw status.
///
/// # Safety
/// `h` is a live handle whose context is current and whose stream and pointer mode (host)
/// are set; every pointer and extent of `c` is valid for the call (the matrices' extents
/// fit their buffers, C overlaps neither A nor B, the scalars are live host values of the
/// compute type's scalar type).
pub(crate) unsafe fn gemm(api: &Api, h: cublasHandle_t, c: &GemmCall) -> c_int {
    let ((ta, tb), (m, n, k), (alpha, beta)) = (c.ops, c.mnk, c.scalars);
    let ((pa, lda), (pb, ldb), (pc, ldc), dt) = (c.a, c.b, c.c, c.data_type);
    match c.batch {
        // SAFETY: the caller's promise.
        None => unsafe {
            (api.gemm_ex)(
                h,
                ta,
                tb,
                m,
                n,
                k,
                alpha,
                pa,
                dt,
                lda,
                pb,
                dt,
                ldb,
                beta,
                pc,
                dt,
                ldc,
                c.compute,
                GEMM_DEFAULT,
            )
        },
        // SAFETY: the caller's promise.
        Some((count, sa, sb, sc)) => unsafe {
            (api.gemm_strided_batched_ex)(
                h,
                ta,
                tb,
                m,
                n,
                k,
                alpha,
                pa,
                dt,
                lda,
                sa,
                pb,
                dt,
                ldb,
                sb,
                beta,
                pc,
                dt,
                ldc,
                sc,
                count,
                c.compute,
                GEMM_DEFAULT,
            )
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_cublas_not_found_naming_the_file_and_the_variable() {
        let Err(e) = load(Some(OsStr::new("/nonexistent/libcublas.so.12"))) else {
            panic!("loaded a file that does not exist");
        };
        assert_eq!(e.code(), ErrorCode::CublasNotFound);
        assert_eq!(e.call(), LOAD_CUBLAS);
        let detail = e.detail().unwrap();
        assert!(
            detail.starts_with(
                "CUDA_BRAND_CUBLAS_LIBRARY=/nonexistent/libcublas.so.12 could not be loaded ("
            ),
            "{detail}"
        );
        assert!(detail.contains("nvidia/cublas/lib"), "{detail}");
    }

    #[test]
    fn without_the_variable_the_not_found_text_names_every_file_and_the_variable() {
        let detail = not_found(&NotFound {
            file: None,
            failures: "F".to_owned(),
        });
        assert!(
            detail.starts_with(
                "none of libcublas.so.13, libcublas.so.12, libcublas.so could be loaded"
            ),
            "{detail}"
        );
        assert!(detail.contains("CUDA_BRAND_CUBLAS_LIBRARY"), "{detail}");
    }
}
