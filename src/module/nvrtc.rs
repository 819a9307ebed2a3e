//! Runtime compilation of CUDA C++ with NVRTC (the `nvrtc` feature): source text to PTX
//! (and to a cubin, where NVRTC can make one), then loaded as a [`Module`] of a context.
//!
//! Like the driver, NVRTC is loaded at run time, on first use: the file that
//! `CUDA_BRAND_NVRTC_LIBRARY` names, else the first of `libnvrtc.so`, `libnvrtc.so.13`,
//! `libnvrtc.so.12`, `libnvrtc.so.11.2` that loads, from the loader's search path, then
//! from `$CUDA_HOME/lib64` and `/usr/local/cuda/lib64` (on Windows `nvrtc64_130_0.dll`,
//! `nvrtc64_120_0.dll`, `nvrtc64_112_0.dll`). Building needs no CUDA toolkit; without the
//! library every call returns an error with [`ErrorCode::NvrtcNotFound`] saying what was
//! tried.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::nvrtc::CompileOptions;
//! # fn main() -> cuda_brand::Result<()> {
//! const SOURCE: &str = r#"
//! extern "C" __global__ void add_n(float *x, size_t x_len, float n) {
//!     size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
//!     if (i < x_len) x[i] += n * SCALE;
//! }
//! "#;
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let options = CompileOptions::new().std("c++17").define_value("SCALE", "2.0f");
//!     // compiled for this context's device, then loaded into it
//!     let (module, program) = ctx.compile_and_load(SOURCE, &options)?;
//!     println!("compiler log: {}", program.log());
//!     // SAFETY: add_n(float*, size_t, float) writes x[i] for i < x_len only.
//!     let add_n = unsafe { module.kernel::<(Out<f32>, f32)>("add_n") }?;
//!     let mut x = ctx.from_slice(&[1.0f32, 2.0])?;
//!     ctx.new_stream()?.scope(|s| s.launch(&add_n, LaunchConfig::linear(1, 32), (&mut x, 1.5f32)))?;
//!     assert_eq!(x.to_vec()?, [4.0, 5.0]);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! Source that does not compile is an error with `NVRTC_ERROR_COMPILATION` whose
//! [`detail`](Error::detail) is the compiler's log, which names the file (the program's
//! [`name`](CompileOptions::name)) and line: `kernel.cu(3): error: expected a ";"`.
//!
//! Compiling touches no context (NVRTC is a host-side compiler), so
//! [`Program::compile`] needs none; loading the result does:
//! [`Program::load`] and [`ContextGuard::compile_and_load`] take the context's guard.

use std::ffi::{CStr, CString, OsStr, c_char, c_int};
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};

use super::Module;
use crate::context::{Allocates, Allocating, ComputeCapability, ContextGuard, Part, Phase};
use crate::driver::dylib::{Library, NotFound, Spec, entry_points};
use crate::error::{Error, ErrorCode, Result};

/// The environment variable that names the NVRTC library to load (a path, or any name the
/// platform's loader resolves).
pub const NVRTC_LIBRARY_VAR: &str = "CUDA_BRAND_NVRTC_LIBRARY";

/// What [`Error::call`] is when the NVRTC library could not be loaded.
const LOAD_NVRTC: &str = "loading the NVRTC library";

#[cfg(windows)]
const NAMES: &[&str] = &[
    "nvrtc64_130_0.dll",
    "nvrtc64_120_0.dll",
    "nvrtc64_112_0.dll",
];
#[cfg(not(windows))]
const NAMES: &[&str] = &[
    "libnvrtc.so",
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so.11.2",
];

type Prog = *mut std::ffi::c_void;

entry_points! {
    /// The NVRTC entry points the crate calls, each declared with the raw `nvrtcResult` as an
    /// `int` (an unknown value in a Rust enum would be undefined behaviour).
    struct Api {
        required version = "nvrtcVersion": unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int,
        required create = "nvrtcCreateProgram": unsafe extern "C" fn(
            *mut Prog,
            *const c_char,
            *const c_char,
            c_int,
            *const *const c_char,
            *const *const c_char,
        ) -> c_int,
        required destroy = "nvrtcDestroyProgram": unsafe extern "C" fn(*mut Prog) -> c_int,
        required compile = "nvrtcCompileProgram":
            unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> c_int,
        required ptx_size = "nvrtcGetPTXSize": unsafe extern "C" fn(Prog, *mut usize) -> c_int,
        required ptx = "nvrtcGetPTX": unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
        required log_size = "nvrtcGetProgramLogSize":
            unsafe extern "C" fn(Prog, *mut usize) -> c_int,
        required log = "nvrtcGetProgramLog": unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
        required add_name_expression = "nvrtcAddNameExpression":
            unsafe extern "C" fn(Prog, *const c_char) -> c_int,
        required lowered_name = "nvrtcGetLoweredName":
            unsafe extern "C" fn(Prog, *const c_char, *mut *const c_char) -> c_int,
        /// NVRTC 11.1 and newer.
        optional cubin_size = "nvrtcGetCUBINSize": unsafe extern "C" fn(Prog, *mut usize) -> c_int,
        /// NVRTC 11.1 and newer.
        optional cubin = "nvrtcGetCUBIN": unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
        /// NVRTC 11.2 and newer.
        optional num_supported_archs = "nvrtcGetNumSupportedArchs":
            unsafe extern "C" fn(*mut c_int) -> c_int,
        /// NVRTC 11.2 and newer.
        optional supported_archs = "nvrtcGetSupportedArchs":
            unsafe extern "C" fn(*mut c_int) -> c_int,
    }
}

/// The NVRTC library: the file [`NVRTC_LIBRARY_VAR`] names, else the first of [`NAMES`]
/// that loads, from the loader's search path, then from the toolkit's places.
const NVRTC: Spec = Spec {
    call: LOAD_NVRTC,
    var: NVRTC_LIBRARY_VAR,
    names: NAMES,
    dirs: crate::driver::dylib::toolkit_dirs,
    not_found: ErrorCode::NvrtcNotFound,
    not_found_detail: not_found,
    lacks: |file, symbol| {
        Error::with_detail(
            LOAD_NVRTC,
            ErrorCode::NvrtcNotFound,
            format!("{file} has no {symbol}: it is not an NVRTC library"),
        )
    },
};

/// The detail of [`ErrorCode::NvrtcNotFound`]: what was tried, and how to get NVRTC.
fn not_found(not_found: &NotFound<'_>) -> String {
    let failures = &not_found.failures;
    match not_found.file {
        Some(file) => format!(
            "{NVRTC_LIBRARY_VAR}={} could not be loaded ({failures}): point it at libnvrtc, or \
             unset it",
            file.to_string_lossy(),
        ),
        None => format!(
            "none of {} could be loaded, from the loader's search path, $CUDA_HOME/lib64 or \
             /usr/local/cuda/lib64 ({failures}): install NVRTC (the CUDA toolkit's cuda-nvrtc \
             package, or Debian's libnvrtc11.2), or set {NVRTC_LIBRARY_VAR} to its path",
            NAMES.join(", "),
        ),
    }
}

/// The loaded library, once per process (later calls get the first outcome).
fn api() -> Result<&'static Api> {
    static API: OnceLock<Result<Api>> = OnceLock::new();
    crate::driver::dylib::load_once(&API, &NVRTC, load)
}

/// Opens the NVRTC library (`file`, or the default names and places) and reads its entry
/// points. The library is never closed.
fn load(file: Option<&OsStr>) -> Result<Api> {
    Api::read(&Library::open(&NVRTC, file)?)
}

/// NVRTC's calls are made one at a time, whatever the NVRTC version's own thread-safety.
static SERIAL: Mutex<()> = Mutex::new(());

/// An `nvrtcResult` as a `Result`, naming the call.
fn check(call: &'static str, raw: c_int) -> Result<()> {
    match raw {
        0 => Ok(()),
        raw => Err(Error::new(call, ErrorCode::Nvrtc(raw as u32))),
    }
}

/// The version of the NVRTC library, `(major, minor)`, e.g. `(12, 4)`.
pub fn version() -> Result<(i32, i32)> {
    let api = api()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two live out-pointers.
    check("nvrtcVersion", unsafe {
        (api.version)(&mut major, &mut minor)
    })?;
    Ok((major, minor))
}

/// The architectures this NVRTC compiles for (`nvrtcGetSupportedArchs`, NVRTC 11.2), e.g.
/// `[35, 37, 50, ..., 90]`; empty where the library cannot say.
pub fn supported_archs() -> Result<Vec<u32>> {
    let api = api()?;
    let (Some(count), Some(list)) = (api.num_supported_archs, api.supported_archs) else {
        return Ok(Vec::new());
    };
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let mut n = 0;
    // SAFETY: a live out-pointer.
    check("nvrtcGetNumSupportedArchs", unsafe { count(&mut n) })?;
    let mut archs = vec![0 as c_int; n.max(0) as usize];
    // SAFETY: `archs` has room for the `n` entries the library said it would write.
    check("nvrtcGetSupportedArchs", unsafe {
        list(archs.as_mut_ptr())
    })?;
    Ok(archs.into_iter().map(|a| a.max(0) as u32).collect())
}

/// How to compile a program: a builder of NVRTC's options. Every string becomes one
/// NUL-terminated option the crate passes with its count; a string with a NUL byte is an
/// error when compiling.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct CompileOptions {
    name: String,
    arch: Option<ComputeCapability>,
    cubin: bool,
    std: Option<String>,
    defines: Vec<(String, Option<String>)>,
    include_paths: Vec<String>,
    headers: Vec<(String, String)>,
    name_expressions: Vec<String>,
    line_info: bool,
    device_debug: bool,
    extra: Vec<String>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            name: "program.cu".to_owned(),
            arch: None,
            cubin: false,
            std: None,
            defines: Vec::new(),
            include_paths: Vec::new(),
            headers: Vec::new(),
            name_expressions: Vec::new(),
            line_info: false,
            device_debug: false,
            extra: Vec::new(),
        }
    }
}

impl CompileOptions {
    /// No options: NVRTC's default architecture and C++ dialect, the program named
    /// `program.cu`.
    pub fn new() -> Self {
        Self::default()
    }

    /// The program's file name, which the compiler's messages name (`kernel.cu(3): error:
    /// ...`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Compiles for `arch` (`--gpu-architecture=compute_XY`, or `sm_XY` with
    /// [`cubin`](CompileOptions::cubin)). [`ContextGuard::compile_and_load`] uses the
    /// context's device when none is given.
    pub fn arch(mut self, arch: ComputeCapability) -> Self {
        self.arch = Some(arch);
        self
    }

    /// Also makes a cubin for the real architecture (`sm_XY` instead of `compute_XY`;
    /// NVRTC 11.1 or newer), which [`Program::load`] loads with no JIT compilation. Needs
    /// an [`arch`](CompileOptions::arch).
    pub fn cubin(mut self, on: bool) -> Self {
        self.cubin = on;
        self
    }

    /// The C++ dialect, e.g. `"c++17"` (`--std=c++17`).
    pub fn std(mut self, dialect: impl Into<String>) -> Self {
        self.std = Some(dialect.into());
        self
    }

    /// Defines a macro as 1 (`-D NAME`).
    pub fn define(mut self, name: impl Into<String>) -> Self {
        self.defines.push((name.into(), None));
        self
    }

    /// Defines a macro (`-D NAME=VALUE`).
    pub fn define_value(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.defines.push((name.into(), Some(value.into())));
        self
    }

    /// A directory searched for `#include`d files (`--include-path=DIR`).
    pub fn include_path(mut self, dir: impl Into<String>) -> Self {
        self.include_paths.push(dir.into());
        self
    }

    /// A header the source may `#include "NAME"`, given as text (no file is read).
    pub fn header(mut self, name: impl Into<String>, source: impl Into<String>) -> Self {
        self.headers.push((name.into(), source.into()));
        self
    }

    /// A name expression (`"my_kernel<float>"`, `"&my_variable"`) whose mangled name the
    /// compiled program reports ([`Program::lowered_name`]): how C++ kernels (templates,
    /// overloads, namespaces) are found in the module.
    pub fn name_expression(mut self, expression: impl Into<String>) -> Self {
        self.name_expressions.push(expression.into());
        self
    }

    /// Generates line-number information (`--generate-line-info`).
    pub fn line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }

    /// Generates debug information (`--device-debug`).
    pub fn device_debug(mut self, on: bool) -> Self {
        self.device_debug = on;
        self
    }

    /// Any other NVRTC option, as one string (`"--use_fast_math"`, `"--maxrregcount=32"`).
    pub fn option(mut self, option: impl Into<String>) -> Self {
        self.extra.push(option.into());
        self
    }

    /// The options as NVRTC takes them.
    fn arguments(&self) -> Result<Vec<CString>> {
        let mut all = Vec::new();
        if self.cubin && self.arch.is_none() {
            return Err(Error::with_detail(
                "Program::compile",
                ErrorCode::Nvrtc(NVRTC_ERROR_INVALID_OPTION),
                "a cubin needs an architecture: CompileOptions::arch",
            ));
        }
        if let Some(arch) = self.arch {
            let kind = if self.cubin { "sm" } else { "compute" };
            all.push(format!(
                "--gpu-architecture={kind}_{}{}",
                arch.major, arch.minor
            ));
        }
        if let Some(std) = &self.std {
            all.push(format!("--std={std}"));
        }
        for (name, value) in &self.defines {
            all.push(match value {
                Some(value) => format!("-D{name}={value}"),
                None => format!("-D{name}"),
            });
        }
        for dir in &self.include_paths {
            all.push(format!("--include-path={dir}"));
        }
        if self.line_info {
            all.push("--generate-line-info".to_owned());
        }
        if self.device_debug {
            all.push("--device-debug".to_owned());
        }
        all.extend(self.extra.iter().cloned());
        all.into_iter()
            .map(|option| c_string("an option", option))
            .collect()
    }
}

const NVRTC_ERROR_INVALID_INPUT: u32 = 3;
const NVRTC_ERROR_INVALID_OPTION: u32 = 5;

fn c_string(what: &str, text: impl Into<Vec<u8>>) -> Result<CString> {
    CString::new(text).map_err(|e| {
        Error::with_detail(
            "Program::compile",
            ErrorCode::Nvrtc(NVRTC_ERROR_INVALID_INPUT),
            format!("{what} contains a NUL byte at offset {}", e.nul_position()),
        )
    })
}

/// A compiled program: its PTX, its cubin (when compiled for a real architecture), the
/// compiler's log, and the mangled names of its name expressions. Load it into a context
/// with [`Program::load`].
///
/// Its contents come only from NVRTC (there is no way to change them), which is what
/// lets [`Program::load`] hand the cubin to the driver without the check of
/// [`Module::from_binary`].
#[derive(Clone)]
pub struct Program {
    name: String,
    ptx: Option<String>,
    cubin: Option<Vec<u8>>,
    log: String,
    lowered: Vec<(String, String)>,
}

impl Program {
    /// Compiles CUDA C++ `source` with `options` (`nvrtcCreateProgram`,
    /// `nvrtcCompileProgram`). Needs no context: NVRTC runs on the host. On failure the
    /// error (`NVRTC_ERROR_COMPILATION`, or `NVRTC_ERROR_INVALID_OPTION` for an option
    /// NVRTC does not take) has the compiler's log as its detail.
    ///
    /// ```no_run
    /// use cuda_brand::nvrtc::{CompileOptions, Program};
    /// use cuda_brand::ComputeCapability;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let program = Program::compile(
    ///     "template <typename T> __global__ void fill(T *x, size_t n, T v) { \
    ///          size_t i = threadIdx.x; if (i < n) x[i] = v; }",
    ///     &CompileOptions::new()
    ///         .arch(ComputeCapability { major: 8, minor: 0 })
    ///         .name_expression("fill<float>"),
    /// )?;
    /// assert!(program.ptx().unwrap().contains(".entry"));
    /// let mangled = program.lowered_name("fill<float>").unwrap(); // "_Z4fillIfEvPT_mS0_"
    /// # let _ = mangled;
    /// # Ok(())
    /// # }
    /// ```
    pub fn compile(source: &str, options: &CompileOptions) -> Result<Program> {
        let api = api()?;
        let source_text = c_string("the source", source)?;
        let name = c_string("the program name", options.name.as_str())?;
        let arguments = options.arguments()?;
        let argument_pointers: Vec<*const c_char> = arguments.iter().map(|a| a.as_ptr()).collect();
        let mut header_texts = Vec::with_capacity(options.headers.len());
        let mut header_names = Vec::with_capacity(options.headers.len());
        for (header, text) in &options.headers {
            header_names.push(c_string("a header name", header.as_str())?);
            header_texts.push(c_string("a header", text.as_str())?);
        }
        let header_text_pointers: Vec<*const c_char> =
            header_texts.iter().map(|h| h.as_ptr()).collect();
        let header_name_pointers: Vec<*const c_char> =
            header_names.iter().map(|h| h.as_ptr()).collect();
        let expressions = options
            .name_expressions
            .iter()
            .map(|e| c_string("a name expression", e.as_str()))
            .collect::<Result<Vec<_>>>()?;

        let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        let mut prog: Prog = std::ptr::null_mut();
        // SAFETY: NUL-terminated source and name; two arrays of `headers.len()` pointers to
        // NUL-terminated strings (null arrays are allowed for 0 but these are valid too);
        // everything outlives the call.
        check("nvrtcCreateProgram", unsafe {
            (api.create)(
                &mut prog,
                source_text.as_ptr(),
                name.as_ptr(),
                header_text_pointers.len() as c_int,
                header_text_pointers.as_ptr(),
                header_name_pointers.as_ptr(),
            )
        })?;
        let program = Destroy { api, prog };
        for expression in &expressions {
            // SAFETY: a live program and a NUL-terminated expression.
            check("nvrtcAddNameExpression", unsafe {
                (api.add_name_expression)(program.prog, expression.as_ptr())
            })?;
        }
        // SAFETY: a live program and an array of `arguments.len()` NUL-terminated options.
        let compiled = unsafe {
            (api.compile)(
                program.prog,
                argument_pointers.len() as c_int,
                argument_pointers.as_ptr(),
            )
        };
        let log = program.log()?;
        if compiled != 0 {
            let detail = if log.is_empty() {
                "the compiler wrote no log".to_owned()
            } else {
                format!("compile log:\n{log}")
            };
            return Err(Error::with_detail(
                "nvrtcCompileProgram",
                ErrorCode::Nvrtc(compiled as u32),
                detail,
            ));
        }
        let ptx = program.ptx()?;
        let cubin = program.cubin()?;
        let mut lowered = Vec::with_capacity(expressions.len());
        for (expression, c_expression) in options.name_expressions.iter().zip(&expressions) {
            let mut name: *const c_char = std::ptr::null();
            // SAFETY: a live, compiled program; the expression was added before compiling;
            // a live out-pointer.
            check("nvrtcGetLoweredName", unsafe {
                (api.lowered_name)(program.prog, c_expression.as_ptr(), &mut name)
            })?;
            if !name.is_null() {
                // SAFETY: NVRTC returned a NUL-terminated string that lives as long as the
                // program, which is alive; it is copied before the program is destroyed.
                let text = unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned();
                lowered.push((expression.clone(), text));
            }
        }
        Ok(Program {
            name: options.name.clone(),
            ptx,
            cubin,
            log,
            lowered,
        })
    }

    /// The PTX text, where NVRTC made one.
    pub fn ptx(&self) -> Option<&str> {
        self.ptx.as_deref()
    }

    /// The cubin, where the program was compiled for a real architecture
    /// ([`CompileOptions::cubin`]).
    pub fn cubin(&self) -> Option<&[u8]> {
        self.cubin.as_deref()
    }

    /// The compiler's log (warnings and notes; often empty after a success).
    pub fn log(&self) -> &str {
        &self.log
    }

    /// The mangled name of a name expression given to
    /// [`CompileOptions::name_expression`], to look the kernel up in the loaded module.
    pub fn lowered_name(&self, expression: &str) -> Option<&str> {
        self.lowered
            .iter()
            .find(|(e, _)| e == expression)
            .map(|(_, name)| name.as_str())
    }

    /// Loads the program into the context of `ctx`: its cubin if it has one (no JIT
    /// compilation), else its PTX. Any guard that may load takes part, as for
    /// [`Module::from_ptx`]: a plain guard, a setup-phase guard, a partition's.
    pub fn load<'ctx>(&self, ctx: impl Allocates<'ctx>) -> Result<Module<'ctx>> {
        let ctx = ctx.into_guard();
        match (&self.cubin, &self.ptx) {
            // The image check first, where it accepts NVRTC's output (it refuses some, e.g.
            // line information)...
            (Some(cubin), _) if super::check_image("Program::load", cubin).is_ok() => {
                Module::from_binary(ctx, cubin)
            }
            // SAFETY: ...else the image is exactly the bytes NVRTC wrote for this program
            // (copied from `nvrtcGetCUBIN` into a buffer of the size `nvrtcGetCUBINSize`
            // gave), and `Program` offers no way to change them: a complete image as the
            // compiler wrote it, what `from_binary_unchecked` requires.
            (Some(cubin), _) => unsafe { Module::from_binary_unchecked(ctx, cubin) },
            (None, Some(ptx)) => Module::from_ptx(ctx, ptx),
            (None, None) => Err(Error::with_detail(
                "Program::load",
                ErrorCode::InvalidImage,
                format!("NVRTC made neither PTX nor a cubin of {}", self.name),
            )),
        }
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("name", &self.name)
            .field("ptx_bytes", &self.ptx.as_ref().map(String::len))
            .field("cubin_bytes", &self.cubin.as_ref().map(Vec::len))
            .field("log", &self.log)
            .field("lowered", &self.lowered)
            .finish()
    }
}

/// A live `nvrtcProgram`, destroyed when dropped (every path out of `Program::compile`).
struct Destroy {
    api: &'static Api,
    prog: Prog,
}

impl Destroy {
    /// The compiler's log, trimmed.
    fn log(&self) -> Result<String> {
        let mut size = 0;
        // SAFETY: a live program and out-pointer.
        check("nvrtcGetProgramLogSize", unsafe {
            (self.api.log_size)(self.prog, &mut size)
        })?;
        let mut buf = vec![0u8; size.max(1)];
        // SAFETY: `buf` has room for the `size` bytes (with the NUL) NVRTC writes.
        check("nvrtcGetProgramLog", unsafe {
            (self.api.log)(self.prog, buf.as_mut_ptr().cast())
        })?;
        Ok(text(&buf))
    }

    fn ptx(&self) -> Result<Option<String>> {
        let mut size = 0;
        // SAFETY: a live program and out-pointer.
        check("nvrtcGetPTXSize", unsafe {
            (self.api.ptx_size)(self.prog, &mut size)
        })?;
        if size <= 1 {
            return Ok(None);
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has room for the `size` bytes NVRTC writes.
        check("nvrtcGetPTX", unsafe {
            (self.api.ptx)(self.prog, buf.as_mut_ptr().cast())
        })?;
        Ok(Some(text(&buf)))
    }

    fn cubin(&self) -> Result<Option<Vec<u8>>> {
        let (Some(cubin_size), Some(cubin)) = (self.api.cubin_size, self.api.cubin) else {
            return Ok(None);
        };
        let mut size = 0;
        // SAFETY: a live program and out-pointer.
        check("nvrtcGetCUBINSize", unsafe {
            cubin_size(self.prog, &mut size)
        })?;
        if size == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has room for the `size` bytes NVRTC writes.
        check("nvrtcGetCUBIN", unsafe {
            cubin(self.prog, buf.as_mut_ptr().cast())
        })?;
        Ok(Some(buf))
    }
}

impl Drop for Destroy {
    fn drop(&mut self) {
        // SAFETY: the program is live and used by nothing after this.
        let _ = unsafe { (self.api.destroy)(&mut self.prog) };
    }
}

/// A NUL-terminated buffer's text, trimmed.
fn text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_owned()
}

// The bound is on the method, so that a run-phase guard gets `Allocating`'s message.
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// Compiles CUDA C++ `source` with NVRTC ([`Program::compile`]) for this context's
    /// device (unless `options` name an architecture: then that one; a device newer than
    /// NVRTC knows gets the newest architecture NVRTC supports, as PTX the driver
    /// compiles forward), then loads it into this context ([`Program::load`]). Returns the
    /// module and the program (its log, and the mangled names of its name expressions).
    ///
    /// Any guard that may load takes part: a plain guard, a setup-phase guard, a
    /// partition's.
    pub fn compile_and_load(
        self,
        source: &str,
        options: &CompileOptions,
    ) -> Result<(Module<'ctx>, Program)>
    where
        P: Allocating,
    {
        let mut options = options.clone();
        if options.arch.is_none() {
            let device = self.device()?.compute_capability()?;
            let wanted = device.major * 10 + device.minor;
            let supported = supported_archs()?;
            let best = supported.iter().copied().filter(|&a| a <= wanted).max();
            options.arch = Some(match best {
                Some(a) if a != wanted => {
                    // NVRTC does not know this device: PTX of the newest it does
                    options.cubin = false;
                    ComputeCapability {
                        major: a / 10,
                        minor: a % 10,
                    }
                }
                _ => device,
            });
        }
        let program = Program::compile(source, &options)?;
        let module = program.load(self)?;
        Ok((module, program))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_nvrtc_not_found_naming_the_file() {
        let Err(e) = load(Some(OsStr::new("/nonexistent/libnvrtc.so"))) else {
            panic!("/nonexistent/libnvrtc.so loaded");
        };
        assert_eq!(e.code(), ErrorCode::NvrtcNotFound);
        assert_eq!(e.call(), "loading the NVRTC library");
        let text = e.to_string();
        assert!(
            text.starts_with(
                "loading the NVRTC library failed: CUDA_BRAND_NVRTC_NOT_FOUND (NVRTC library \
                 not found): CUDA_BRAND_NVRTC_LIBRARY=/nonexistent/libnvrtc.so could not be \
                 loaded (/nonexistent/libnvrtc.so: "
            ),
            "{text}"
        );
        assert!(
            text.ends_with("point it at libnvrtc, or unset it"),
            "{text}"
        );
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_library_without_nvrtc_entry_points_is_refused() {
        let Err(e) = load(Some(OsStr::new("libc.so.6"))) else {
            panic!("libc.so.6 passed for NVRTC");
        };
        assert_eq!(
            e.detail(),
            Some("libc.so.6 has no nvrtcVersion: it is not an NVRTC library")
        );
    }

    #[test]
    fn options_become_nvrtc_arguments() {
        let options = CompileOptions::new()
            .arch(ComputeCapability { major: 9, minor: 0 })
            .std("c++17")
            .define("DEBUG")
            .define_value("N", "4")
            .include_path("/opt/include")
            .line_info(true)
            .option("--use_fast_math");
        let args: Vec<String> = options
            .arguments()
            .unwrap()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "--gpu-architecture=compute_90",
                "--std=c++17",
                "-DDEBUG",
                "-DN=4",
                "--include-path=/opt/include",
                "--generate-line-info",
                "--use_fast_math"
            ]
        );
        let cubin = CompileOptions::new()
            .arch(ComputeCapability { major: 8, minor: 6 })
            .cubin(true);
        assert_eq!(
            cubin.arguments().unwrap()[0].to_str().unwrap(),
            "--gpu-architecture=sm_86"
        );
        let e = CompileOptions::new().cubin(true).arguments().unwrap_err();
        assert_eq!(
            e.to_string(),
            "Program::compile failed: NVRTC_ERROR_INVALID_OPTION (invalid compiler option): a \
             cubin needs an architecture: CompileOptions::arch"
        );
        let e = CompileOptions::new()
            .define("A\0B")
            .arguments()
            .unwrap_err();
        assert_eq!(
            e.detail(),
            Some("an option contains a NUL byte at offset 3")
        );
    }

    #[cfg(not(windows))]
    #[test]
    fn without_the_variable_the_not_found_text_names_every_file_and_place() {
        let detail = not_found(&NotFound {
            file: None,
            failures: "F".to_owned(),
        });
        assert_eq!(
            detail,
            "none of libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so.11.2 could be \
             loaded, from the loader's search path, $CUDA_HOME/lib64 or /usr/local/cuda/lib64 \
             (F): install NVRTC (the CUDA toolkit's cuda-nvrtc package, or Debian's \
             libnvrtc11.2), or set CUDA_BRAND_NVRTC_LIBRARY to its path"
        );
    }
}
