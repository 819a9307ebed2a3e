//! Opening a shared library at run time: the one loader of the CUDA driver and of every
//! NVIDIA library the crate calls (NVRTC, NCCL, and the ones to come).
//!
//! A library is a [`Spec`]: what its load errors are called, the environment variable that
//! names a file to load instead, the names tried otherwise (then in extra directories), the
//! text of its "not found" error and the error of a file without a required entry point.
//! [`Library::open`] opens the first candidate that loads, or fails with every candidate's
//! failure in the detail; the handle is never closed, so the entry points read from it with
//! [`Library::required`] and [`Library::optional`] stay valid for the whole process.
//! [`entry_points!`] declares a library's table of them and reads it. Adding a library is
//! writing its `Spec` and its `entry_points!` table.
//!
//! Nothing links against these libraries, so building needs none of them; without one,
//! every call that needs it returns the load error, and nothing panics.

use std::ffi::{OsStr, OsString};
use std::sync::OnceLock;

use crate::error::{Error, ErrorCode, Result};

/// How to find one shared library, and what its load errors say.
pub(crate) struct Spec {
    /// What [`Error::call`] is for every load error: `"loading the NCCL library"`.
    pub(crate) call: &'static str,
    /// The environment variable that names the file to load instead of [`Spec::names`] (a
    /// path, or any name the platform's loader resolves); unset or empty, the names are
    /// tried.
    pub(crate) var: &'static str,
    /// The files tried, in order, from the loader's search path.
    pub(crate) names: &'static [&'static str],
    /// Directories tried after the loader's search path, each with every name in turn
    /// ([`no_dirs`] for none).
    pub(crate) dirs: fn() -> Vec<OsString>,
    /// The code of the error when no candidate could be opened.
    pub(crate) not_found: ErrorCode,
    /// The detail of that error.
    pub(crate) not_found_detail: fn(&NotFound<'_>) -> String,
    /// The error of an opened file (its name, as opened) without the required entry point
    /// `symbol`.
    pub(crate) lacks: fn(file: &str, symbol: &str) -> Error,
}

impl Spec {
    /// The file [`Spec::var`] names, if it is set and not empty.
    pub(crate) fn file_from_env(&self) -> Option<OsString> {
        std::env::var_os(self.var).filter(|file| !file.is_empty())
    }
}

/// Why no candidate could be opened, for [`Spec::not_found_detail`].
pub(crate) struct NotFound<'a> {
    /// The file asked for through [`Spec::var`], if one was (the only candidate then).
    pub(crate) file: Option<&'a OsStr>,
    /// The loader's message for each candidate, in order, joined by `"; "`.
    pub(crate) failures: String,
}

/// For a [`Spec`] whose library is looked for on the loader's search path only.
pub(crate) fn no_dirs() -> Vec<OsString> {
    Vec::new()
}

/// For a [`Spec`] of a CUDA toolkit library: `$CUDA_HOME/lib64` (if set), then
/// `/usr/local/cuda/lib64`, after the loader's search path (none on Windows).
#[cfg_attr(
    not(any(
        feature = "nvrtc",
        feature = "cublas",
        feature = "cufft",
        feature = "curand"
    )),
    allow(dead_code)
)]
pub(crate) fn toolkit_dirs() -> Vec<OsString> {
    if cfg!(windows) {
        return Vec::new();
    }
    let mut dirs = Vec::new();
    if let Some(home) = std::env::var_os("CUDA_HOME").filter(|h| !h.is_empty()) {
        let mut dir = home;
        dir.push("/lib64");
        dirs.push(dir);
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs
}

/// What `load` made of the library `spec` describes (the file its variable names, else its
/// default names), made on the first call and kept in `cell` for the process: every later
/// call gets the same table, or the same error.
#[cfg_attr(
    not(any(
        feature = "nccl",
        feature = "nvrtc",
        feature = "cublas",
        feature = "cufft",
        feature = "curand"
    )),
    allow(dead_code)
)]
pub(crate) fn load_once<T>(
    cell: &'static OnceLock<Result<T>>,
    spec: &Spec,
    load: fn(Option<&OsStr>) -> Result<T>,
) -> Result<&'static T> {
    match cell.get_or_init(|| load(spec.file_from_env().as_deref())) {
        Ok(loaded) => Ok(loaded),
        Err(e) => Err(e.clone()),
    }
}

/// An opened library, with the name it was opened under. Never closed: the entry points
/// read from it stay valid for the whole process.
pub(crate) struct Library {
    handle: &'static libloading::Library,
    name: String,
    lacks: fn(&str, &str) -> Error,
}

impl Library {
    /// Opens the library `spec` describes: `file` if given and not empty (the value of
    /// [`Spec::var`]: [`Spec::file_from_env`]), else the first of its names, then of its
    /// directories, that loads.
    pub(crate) fn open(spec: &Spec, file: Option<&OsStr>) -> Result<Library> {
        let file = file.filter(|f| !f.is_empty());
        let candidates = match file {
            Some(file) => vec![file.to_owned()],
            None => candidates(spec),
        };
        let mut failures = Vec::new();
        for name in &candidates {
            // SAFETY: loading an NVIDIA library runs its initialisers, which have no
            // preconditions; nothing else is assumed of the file until its symbols are read.
            match unsafe { libloading::Library::new(name) } {
                Ok(handle) => {
                    return Ok(Library {
                        handle: Box::leak(Box::new(handle)),
                        name: name.to_string_lossy().into_owned(),
                        lacks: spec.lacks,
                    });
                }
                Err(e) => failures.push(failure_text(name, error_chain(&e), LINK_STUB_DIR)),
            }
        }
        let failures = failures.join("; ");
        let detail = (spec.not_found_detail)(&NotFound { file, failures });
        Err(Error::with_detail(spec.call, spec.not_found, detail))
    }

    /// The name the library was opened under (the file asked for, or the candidate that
    /// loaded).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The entry point `symbol`, or `None` where the library lacks it.
    ///
    /// # Safety
    /// `T` is the function pointer type the library's header gives `symbol` (with integers
    /// for its enums and results, so that any value the library returns is valid).
    pub(crate) unsafe fn optional<T: Copy>(&self, symbol: &str) -> Option<T> {
        // SAFETY: the caller gives the symbol's own type; the library is never closed.
        unsafe { self.handle.get::<T>(symbol.as_bytes()) }
            .ok()
            .map(|f| *f)
    }

    /// The entry point `symbol`, or the library's [`Spec::lacks`] error naming the file and
    /// the symbol.
    ///
    /// # Safety
    /// As for [`Library::optional`].
    pub(crate) unsafe fn required<T: Copy>(&self, symbol: &str) -> Result<T> {
        // SAFETY: the caller's promise.
        unsafe { self.optional(symbol) }.ok_or_else(|| (self.lacks)(&self.name, symbol))
    }
}

/// Declares a library's table of entry points, one field per entry point, and `read`, the
/// function that fills it from an opened [`Library`]:
///
/// ```ignore
/// entry_points! {
///     /// NVRTC's entry points.
///     struct Api {
///         required version = "nvrtcVersion": unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int,
///         /// NVRTC 11.1 and newer.
///         optional cubin = "nvrtcGetCUBIN": unsafe extern "C" fn(Prog, *mut c_char) -> c_int,
///     }
/// }
/// ```
///
/// A field may begin with a visibility (`pub(crate) required ...`) for a table whose calls are
/// made outside its module. A `required` field has the function pointer's type, and `Api::read(&library)` fails with
/// the library's [`Spec::lacks`] error where the symbol is missing; an `optional` field is an
/// `Option` of it, `None` where the library lacks the symbol. Fields are read in the order
/// declared (the first missing required one is the error).
///
/// # The declaration's promise
///
/// The `unsafe` of reading a symbol is inside the macro: each type declared must be the
/// signature the library's header gives the symbol, with integers for its enums and result
/// codes (so that any value the library returns is valid). Calls through the fields remain
/// `unsafe`, with whatever else the library requires of their arguments.
#[cfg_attr(
    not(any(
        feature = "nccl",
        feature = "nvrtc",
        feature = "cublas",
        feature = "cufft",
        feature = "curand"
    )),
    allow(unused_macros)
)]
macro_rules! entry_points {
    (
        $(#[$meta:meta])*
        $vis:vis struct $table:ident {
            $(
                $(#[$field_meta:meta])*
                $field_vis:vis $kind:ident $field:ident = $symbol:literal: $ty:ty,
            )*
        }
    ) => {
        $(#[$meta])*
        $vis struct $table {
            $(
                $(#[$field_meta])*
                $field_vis $field: $crate::driver::dylib::entry_points!(@type $kind $ty),
            )*
        }

        impl $table {
            /// Reads every entry point from `library` (see `entry_points!`).
            fn read(
                library: &$crate::driver::dylib::Library,
            ) -> $crate::error::Result<$table> {
                Ok($table {
                    $($field: $crate::driver::dylib::entry_points!(@read library $kind $symbol),)*
                })
            }
        }
    };
    (@type required $ty:ty) => { $ty };
    (@type optional $ty:ty) => { Option<$ty> };
    (@read $library:ident required $symbol:literal) => {
        // SAFETY: the field has the signature the library's header gives the symbol (the
        // declaration's promise); the library is never closed.
        unsafe { $library.required($symbol) }?
    };
    (@read $library:ident optional $symbol:literal) => {
        // SAFETY: as for a required entry point.
        unsafe { $library.optional($symbol) }
    };
}
#[cfg_attr(
    not(any(
        feature = "nccl",
        feature = "nvrtc",
        feature = "cublas",
        feature = "cufft",
        feature = "curand"
    )),
    allow(unused_imports)
)]
pub(crate) use entry_points;

/// The names of `spec`, then each directory of it joined with each name.
fn candidates(spec: &Spec) -> Vec<OsString> {
    let mut all: Vec<OsString> = spec.names.iter().map(OsString::from).collect();
    for dir in (spec.dirs)() {
        for name in spec.names {
            let mut path = dir.clone();
            path.push("/");
            path.push(name);
            all.push(path);
        }
    }
    all
}

/// The directory of the build's `-lcuda` placeholder (`build.rs`, Linux builds without a
/// driver library). Cargo puts it on `LD_LIBRARY_PATH` under `cargo run` and `cargo test`.
/// The placeholder is an empty archive, `libcuda.a`, which the platform's loader never
/// opens; should a file of a tried name ever be found there, the loader's message about it
/// is not reported (see [`failure_text`]).
const LINK_STUB_DIR: Option<&str> = option_env!("CUDA_BRAND_LINK_STUB_DIR");

/// What the "not found" error says about `name`, whose load failed with `text`: the
/// loader's own words, unless they name a file in `stub_dir`, the build's link
/// placeholder ([`LINK_STUB_DIR`]), which is no driver and no concern of the user's.
fn failure_text(name: &OsStr, text: String, stub_dir: Option<&str>) -> String {
    match stub_dir {
        Some(dir) if !dir.is_empty() && text.contains(&format!("{dir}/")) => format!(
            "{}: no driver library of this name (only cuda-brand's link placeholder)",
            name.to_string_lossy()
        ),
        _ => text,
    }
}

/// An error and its sources, as one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_placeholder_is_never_reported_and_never_a_library_the_loader_opens() {
        let dir = "/w/target/debug/build/cuda-brand-0123456789abcdef/out/stub";
        let stub = format!("{dir}/libcuda.so: invalid ELF header");
        let text = failure_text(OsStr::new("libcuda.so"), stub, Some(dir));
        assert_eq!(
            text,
            "libcuda.so: no driver library of this name (only cuda-brand's link placeholder)"
        );
        assert!(!text.contains("stub") && !text.contains(dir), "{text}");
        // every other failure is the loader's own words
        let other = "libcuda.so.1: cannot open shared object file: No such file or directory";
        for stub_dir in [Some(dir), Some(""), None] {
            assert_eq!(
                failure_text(OsStr::new("libcuda.so.1"), other.to_owned(), stub_dir),
                other
            );
        }
        // a directory whose name only begins like the placeholder's is not it
        let beside = format!("{dir}2/libcuda.so: invalid ELF header");
        assert_eq!(
            failure_text(OsStr::new("libcuda.so"), beside.clone(), Some(dir)),
            beside
        );
        // the build's placeholder (Linux) is an empty archive, never a shared object's name
        // (build.rs always makes the directory; a test binary copied to another machine
        // finds none)
        if let Some(dir) = LINK_STUB_DIR.filter(|dir| std::path::Path::new(dir).is_dir()) {
            let dir = std::path::Path::new(dir);
            assert_eq!(
                std::fs::read(dir.join("libcuda.a")).ok(),
                Some(b"!<arch>\n".to_vec())
            );
            for name in super::super::table::DRIVER.names {
                assert!(
                    !dir.join(name).exists(),
                    "{} exists",
                    dir.join(name).display()
                );
            }
        }
    }

    /// A library of no name that exists, looked for in two directories too.
    const NOWHERE: Spec = Spec {
        call: "loading the nowhere library",
        var: "CUDA_BRAND_TEST_NOWHERE_LIBRARY",
        names: &["libcuda-brand-nowhere.so", "libcuda-brand-nowhere.so.1"],
        dirs: || vec!["/nonexistent/a".into(), "/nonexistent/b".into()],
        not_found: ErrorCode::NvrtcNotFound,
        not_found_detail: |not_found| format!("tried: {}", not_found.failures),
        lacks: |file, symbol| {
            Error::with_detail("t", ErrorCode::Unknown, format!("{file}/{symbol}"))
        },
    };

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn every_name_is_tried_on_the_search_path_then_in_each_directory() {
        let Err(e) = Library::open(&NOWHERE, None) else {
            panic!("a library of no name loaded");
        };
        assert_eq!(e.call(), "loading the nowhere library");
        assert_eq!(e.code(), ErrorCode::NvrtcNotFound);
        let detail = e.detail().unwrap();
        let tried: Vec<&str> = detail
            .trim_start_matches("tried: ")
            .split("; ")
            .map(|failure| failure.split(':').next().unwrap())
            .collect();
        assert_eq!(
            tried,
            [
                "libcuda-brand-nowhere.so",
                "libcuda-brand-nowhere.so.1",
                "/nonexistent/a/libcuda-brand-nowhere.so",
                "/nonexistent/a/libcuda-brand-nowhere.so.1",
                "/nonexistent/b/libcuda-brand-nowhere.so",
                "/nonexistent/b/libcuda-brand-nowhere.so.1",
            ],
            "{detail}"
        );
        // an empty file name is no file name: the names are tried
        let Err(e) = Library::open(&NOWHERE, Some(OsStr::new(""))) else {
            panic!("a library of no name loaded");
        };
        assert_eq!(e.detail(), Some(detail));
        // a file asked for is the only candidate
        let Err(e) = Library::open(&NOWHERE, Some(OsStr::new("/nonexistent/x.so"))) else {
            panic!("/nonexistent/x.so loaded");
        };
        assert_eq!(
            e.detail(),
            Some(
                "tried: /nonexistent/x.so: cannot open shared object file: No such file or directory"
            )
        );
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn entry_points_are_read_by_name_and_a_missing_required_one_is_the_librarys_error() {
        // The C library loads everywhere.
        let libc = Library::open(&NOWHERE, Some(OsStr::new("libc.so.6"))).unwrap();
        assert_eq!(libc.name(), "libc.so.6");
        type Strlen = unsafe extern "C" fn(*const std::ffi::c_char) -> usize;
        // SAFETY: `size_t strlen(const char*)`.
        let strlen = unsafe { libc.required::<Strlen>("strlen") }.unwrap();
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { strlen(c"four".as_ptr()) }, 4);
        // SAFETY: never called.
        assert!(unsafe { libc.optional::<Strlen>("cuInit") }.is_none());
        // SAFETY: never called.
        let e = unsafe { libc.required::<Strlen>("cuInit") }.unwrap_err();
        assert_eq!(e.detail(), Some("libc.so.6/cuInit"));
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    entry_points! {
        /// Two entry points of the C library, one it has and one it lacks.
        struct Libc {
            required strlen = "strlen": unsafe extern "C" fn(*const std::ffi::c_char) -> usize,
            optional cu_init = "cuInit": unsafe extern "C" fn(std::ffi::c_uint) -> u32,
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    entry_points! {
        /// A table the C library cannot fill.
        #[allow(dead_code)] // never filled, so never read
        struct NotLibc {
            required strlen = "strlen": unsafe extern "C" fn(*const std::ffi::c_char) -> usize,
            required cu_init = "cuInit": unsafe extern "C" fn(std::ffi::c_uint) -> u32,
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_table_of_entry_points_reads_the_required_ones_and_the_optional_ones_present() {
        let libc = Library::open(&NOWHERE, Some(OsStr::new("libc.so.6"))).unwrap();
        let table = Libc::read(&libc).unwrap();
        assert!(table.cu_init.is_none());
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { (table.strlen)(c"five!".as_ptr()) }, 5);
        let Err(e) = NotLibc::read(&libc) else {
            panic!("the C library has cuInit");
        };
        assert_eq!(e.detail(), Some("libc.so.6/cuInit"));
    }
}
