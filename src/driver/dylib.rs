//! Opening a shared library at run time: the driver library today.

use std::ffi::OsStr;

use crate::error::{Error, ErrorCode, Result};

/// The environment variable that names the driver library to load instead of the
/// system's (a path, or any name the platform's loader resolves).
pub(crate) const DRIVER_LIBRARY_VAR: &str = "CUDA_BRAND_DRIVER_LIBRARY";

/// The files tried, in order, when [`DRIVER_LIBRARY_VAR`] is not set.
#[cfg(windows)]
const DRIVER_LIBRARIES: &[&str] = &["nvcuda.dll"];
#[cfg(not(windows))]
const DRIVER_LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// The directory of the build's `-lcuda` placeholder (`build.rs`, Linux builds without a
/// driver library). Cargo puts it on `LD_LIBRARY_PATH` under `cargo run` and `cargo test`.
/// The placeholder is an empty archive, `libcuda.a`, which the platform's loader never
/// opens; should a file of a tried name ever be found there, the loader's message about it
/// is not reported (see [`failure_text`]).
const LINK_STUB_DIR: Option<&str> = option_env!("CUDA_BRAND_LINK_STUB_DIR");

/// How to get a driver library, the end of every "not found" error.
const GET_A_DRIVER: &str = "install the NVIDIA driver (CUDA 11.4, R470, or newer), or on \
     Debian without a GPU run cuda-brand's scripts/install-libcuda (it installs libcuda1, \
     whose cuInit reports no device)";

/// Opens the first library that loads, returning it and the name it was opened under.
pub(super) fn open(file: Option<&OsStr>) -> Result<(libloading::Library, String)> {
    let names: Vec<&OsStr> = match file {
        Some(file) => vec![file],
        None => DRIVER_LIBRARIES.iter().map(OsStr::new).collect(),
    };
    let mut failures = Vec::new();
    for name in names {
        // SAFETY: loading the driver library runs its initialisers, which have no
        // preconditions; nothing else is assumed of the file until its symbols are read.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return Ok((library, name.to_string_lossy().into_owned())),
            Err(e) => failures.push(failure_text(name, error_chain(&e), LINK_STUB_DIR)),
        }
    }
    let detail = match file {
        Some(file) => format!(
            "{DRIVER_LIBRARY_VAR}={} could not be loaded ({}): point it at the driver \
             library, or unset it; {GET_A_DRIVER}",
            file.to_string_lossy(),
            failures.join("; ")
        ),
        None => format!(
            "{} could not be loaded ({}): {GET_A_DRIVER}, or set {DRIVER_LIBRARY_VAR} to the \
             library's path",
            DRIVER_LIBRARIES.join(" and "),
            failures.join("; ")
        ),
    };
    Err(Error::with_detail(
        Error::LOAD_DRIVER,
        ErrorCode::DriverNotFound,
        detail,
    ))
}

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
            for name in DRIVER_LIBRARIES {
                assert!(
                    !dir.join(name).exists(),
                    "{} exists",
                    dir.join(name).display()
                );
            }
        }
    }
}
