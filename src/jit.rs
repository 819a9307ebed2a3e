//! Options for the driver's JIT compiler ([`JitOptions`]) when a module or library is
//! loaded, and what the compiler reported ([`JitLog`]).
//!
//! The driver takes JIT options as two parallel arrays: option numbers (`CUjit_option`) and
//! a `void*` per option, which is either a value cast to a pointer, or a pointer to a buffer
//! the driver writes (the logs), or a slot the driver overwrites (the wall time). It trusts
//! every entry: a log buffer pointer with a size larger than the buffer, or a count larger
//! than the arrays, makes it write or read out of bounds. So the arrays are built here
//! only, from a [`JitOptions`] value, never from user-supplied raw arrays; every log
//! buffer is allocated here with exactly the size passed next to it, and lives at least as
//! long as the call (for a [`Library`](crate::Library), as long as the library).
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::JitOptions;
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let options = JitOptions::new()
//!         .optimization_level(3)
//!         .max_registers(32)
//!         .generate_line_info(true)
//!         .log_verbose(true);
//!     let (module, log) = ctx.load_ptx_with(include_str!("../kernels/kernels.ptx"), &options)?;
//!     println!("JIT took {} ms:\n{}", log.wall_time_ms, log.info);
//!     assert!(module.function("scale")?.num_registers()? <= 32);
//!     Ok(())
//! })
//! # }
//! ```

use std::ffi::{c_int, c_uint, c_void};

use crate::device::ComputeCapability;
use crate::error::{Error, ErrorCode, Result};

/// How the driver JIT-compiles PTX while loading a module or library (`CUjit_option`):
/// a builder; every option left unset keeps the driver's default.
///
/// Values the driver would misread are refused before it sees them (an optimization level
/// above 4, a log buffer larger than `u32::MAX` bytes); the rest (a register count, a
/// target the driver does not know) the driver checks and reports as an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct JitOptions {
    optimization_level: Option<u32>,
    max_registers: Option<u32>,
    target: Option<ComputeCapability>,
    fallback: Option<JitFallback>,
    cache_mode: Option<JitCacheMode>,
    generate_debug_info: bool,
    generate_line_info: bool,
    log_verbose: bool,
    log_bytes: usize,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions {
            optimization_level: None,
            max_registers: None,
            target: None,
            fallback: None,
            cache_mode: None,
            generate_debug_info: false,
            generate_line_info: false,
            log_verbose: false,
            log_bytes: DEFAULT_LOG_BYTES,
        }
    }
}

/// The size of each log buffer unless [`JitOptions::log_buffer_bytes`] says otherwise.
const DEFAULT_LOG_BYTES: usize = 16 << 10;

/// What the JIT compiler does when a fatbin has no binary for the exact architecture of
/// the device (`CUjit_fallback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JitFallback {
    /// Compile the PTX in the image (`CU_PREFER_PTX`).
    PreferPtx = 0,
    /// Use a compatible binary of an older architecture (`CU_PREFER_BINARY`).
    PreferBinary = 1,
}

/// Caching of global memory loads in L1, as `-dlcm` of `ptxas` (`CUjit_cacheMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JitCacheMode {
    /// No `-dlcm` flag: the compiler's default (`CU_JIT_CACHE_OPTION_NONE`).
    Default = 0,
    /// Cache in L2 only (`-dlcm=cg`).
    L2Only = 1,
    /// Cache in L1 and L2 (`-dlcm=ca`).
    L1AndL2 = 2,
}

/// What the JIT compiler reported while loading a module or library that loaded: its
/// informational log (empty unless it had something to say: ask with
/// [`JitOptions::log_verbose`]) and the time it took.
///
/// On failure the error log is in the [`Error`]'s [`detail`](Error::detail) instead.
#[derive(Debug, Clone, PartialEq)]
pub struct JitLog {
    /// The informational log (`CU_JIT_INFO_LOG_BUFFER`), trimmed; empty when the
    /// compiler printed nothing (or the image needed no compiling).
    pub info: String,
    /// Wall-clock time spent in the compiler and linker, in milliseconds
    /// (`CU_JIT_WALL_TIME`); 0 when nothing was compiled.
    pub wall_time_ms: f32,
}

impl JitOptions {
    /// The driver's defaults: optimization level 4, as many registers as the compiler
    /// wants, the current context's architecture, no debug or line information, and
    /// 16 KiB for each log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The optimization level, 0 (none) to 4 (the default and highest)
    /// (`CU_JIT_OPTIMIZATION_LEVEL`). Above 4 is an error when loading.
    pub fn optimization_level(mut self, level: u32) -> Self {
        self.optimization_level = Some(level);
        self
    }

    /// The most registers a thread may use (`CU_JIT_MAX_REGISTERS`); the compiler spills
    /// to local memory beyond it.
    pub fn max_registers(mut self, registers: u32) -> Self {
        self.max_registers = Some(registers);
        self
    }

    /// Compiles for this architecture instead of the current context's device
    /// (`CU_JIT_TARGET`). A target the device cannot run makes the load fail.
    pub fn target(mut self, target: ComputeCapability) -> Self {
        self.target = Some(target);
        self
    }

    /// What to do when a fatbin holds no binary for the device's exact architecture
    /// (`CU_JIT_FALLBACK_STRATEGY`).
    pub fn fallback(mut self, fallback: JitFallback) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Caching of global loads (`CU_JIT_CACHE_MODE`).
    pub fn cache_mode(mut self, mode: JitCacheMode) -> Self {
        self.cache_mode = Some(mode);
        self
    }

    /// Generates debug information, `-G` (`CU_JIT_GENERATE_DEBUG_INFO`).
    pub fn generate_debug_info(mut self, on: bool) -> Self {
        self.generate_debug_info = on;
        self
    }

    /// Generates line-number information, `-lineinfo` (`CU_JIT_GENERATE_LINE_INFO`).
    pub fn generate_line_info(mut self, on: bool) -> Self {
        self.generate_line_info = on;
        self
    }

    /// Makes the compiler log what it did (registers, spills, shared memory per kernel)
    /// into the info log (`CU_JIT_LOG_VERBOSE`).
    pub fn log_verbose(mut self, on: bool) -> Self {
        self.log_verbose = on;
        self
    }

    /// The size of each of the two log buffers, info and error, in bytes (16 KiB unless
    /// set; a longer log is cut). 0 asks for no logs at all. More than `u32::MAX` is an
    /// error when loading (the driver takes an `unsigned int`).
    pub fn log_buffer_bytes(mut self, bytes: usize) -> Self {
        self.log_bytes = bytes;
        self
    }

    /// The first value the driver would misread, as an error of `call`.
    fn check(&self, call: &'static str) -> Result<()> {
        let problem = if self.optimization_level.is_some_and(|l| l > 4) {
            format!(
                "JIT optimization level {} is not one of 0 to 4",
                self.optimization_level.unwrap_or_default()
            )
        } else if self.log_bytes > c_uint::MAX as usize {
            format!(
                "a JIT log buffer of {} bytes is larger than the driver can take ({} bytes)",
                self.log_bytes,
                c_uint::MAX
            )
        } else {
            return Ok(());
        };
        Err(Error::with_detail(call, ErrorCode::InvalidValue, problem))
    }
}

// CUjit_option values (cuda.h).
const CU_JIT_MAX_REGISTERS: c_int = 0;
const CU_JIT_WALL_TIME: c_int = 2;
const CU_JIT_INFO_LOG_BUFFER: c_int = 3;
const CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: c_int = 4;
const CU_JIT_ERROR_LOG_BUFFER: c_int = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;
const CU_JIT_OPTIMIZATION_LEVEL: c_int = 7;
const CU_JIT_TARGET: c_int = 9;
const CU_JIT_FALLBACK_STRATEGY: c_int = 10;
const CU_JIT_GENERATE_DEBUG_INFO: c_int = 11;
const CU_JIT_LOG_VERBOSE: c_int = 12;
const CU_JIT_GENERATE_LINE_INFO: c_int = 13;
const CU_JIT_CACHE_MODE: c_int = 14;

/// The option arrays of one load, built from a [`JitOptions`] and owning everything the
/// arrays point to.
///
/// Invariants, which the driver wrappers taking a `JitArgs` rely on:
/// - `options` and `values` have the same length, at most 13 (every option at most once);
/// - each value is of the type its option documents: an integer cast to a pointer, a
///   pointer to `info_log`/`error_log`, whose length is the value of the size option next
///   to it, or a null slot for the wall time, which the driver overwrites with a `float`;
/// - the log buffers are never resized, so their pointers stay valid as long as `self`.
pub(crate) struct JitArgs {
    options: Vec<c_int>,
    values: Vec<*mut c_void>,
    info_log: Vec<u8>,
    error_log: Vec<u8>,
    wall_time: Option<usize>,
}

impl JitArgs {
    /// The arrays for `options`, or the error of `call` for a value the driver would
    /// misread.
    pub(crate) fn new(call: &'static str, options: &JitOptions) -> Result<JitArgs> {
        options.check(call)?;
        let mut args = JitArgs {
            options: Vec::with_capacity(13),
            values: Vec::with_capacity(13),
            info_log: vec![0; options.log_bytes],
            error_log: vec![0; options.log_bytes],
            wall_time: None,
        };
        let number = |n: u32| std::ptr::without_provenance_mut::<c_void>(n as usize);
        if options.log_bytes > 0 {
            let bytes = number(options.log_bytes as u32);
            let info = args.info_log.as_mut_ptr().cast::<c_void>();
            let error = args.error_log.as_mut_ptr().cast::<c_void>();
            args.push(CU_JIT_INFO_LOG_BUFFER, info);
            args.push(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, bytes);
            args.push(CU_JIT_ERROR_LOG_BUFFER, error);
            args.push(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, bytes);
        }
        args.wall_time = Some(args.values.len());
        args.push(CU_JIT_WALL_TIME, std::ptr::null_mut());
        if let Some(level) = options.optimization_level {
            args.push(CU_JIT_OPTIMIZATION_LEVEL, number(level));
        }
        if let Some(registers) = options.max_registers {
            args.push(CU_JIT_MAX_REGISTERS, number(registers));
        }
        if let Some(target) = options.target {
            // CUjit_target: major * 10 + minor (CU_TARGET_COMPUTE_90 = 90)
            let value = target.major.saturating_mul(10).saturating_add(target.minor);
            args.push(CU_JIT_TARGET, number(value));
        }
        if let Some(fallback) = options.fallback {
            args.push(CU_JIT_FALLBACK_STRATEGY, number(fallback as u32));
        }
        if let Some(mode) = options.cache_mode {
            args.push(CU_JIT_CACHE_MODE, number(mode as u32));
        }
        for (option, on) in [
            (CU_JIT_GENERATE_DEBUG_INFO, options.generate_debug_info),
            (CU_JIT_GENERATE_LINE_INFO, options.generate_line_info),
            (CU_JIT_LOG_VERBOSE, options.log_verbose),
        ] {
            if on {
                args.push(option, number(1));
            }
        }
        Ok(args)
    }

    fn push(&mut self, option: c_int, value: *mut c_void) {
        debug_assert!(!self.options.contains(&option));
        self.options.push(option);
        self.values.push(value);
    }

    /// The driver's three arguments: the options, their values and how many there are.
    pub(crate) fn raw_parts(&mut self) -> (*mut c_int, *mut *mut c_void, c_uint) {
        (
            self.options.as_mut_ptr(),
            self.values.as_mut_ptr(),
            self.options.len() as c_uint,
        )
    }

    /// What the compiler reported, read after a successful call.
    pub(crate) fn log(&self) -> JitLog {
        let wall_time_ms = match self.wall_time {
            // The driver wrote a `float` into the first four bytes of the (null) slot.
            Some(i) => f32::from_bits(slot_low_bits(self.values[i])),
            None => 0.0,
        };
        JitLog {
            info: text(&self.info_log),
            wall_time_ms,
        }
    }

    /// The error log, then the info log, after a failed call ("" if both are empty).
    pub(crate) fn failure_log(&self) -> String {
        let (error, info) = (text(&self.error_log), text(&self.info_log));
        match (error.is_empty(), info.is_empty()) {
            (false, true) => error,
            (false, false) => format!("{error}\n{info}"),
            (true, _) => info,
        }
    }
}

/// The four bytes a driver wrote at the start of a `void*` slot, as an integer.
fn slot_low_bits(slot: *mut c_void) -> u32 {
    let bytes = (slot as usize).to_ne_bytes();
    u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// A log buffer's text: up to its first NUL (the whole buffer if none), trimmed.
fn text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_owned()
}

/// The error of a failed load, with the JIT compiler's log as its detail when it wrote
/// one (the same text as `Module::from_ptx`'s errors).
pub(crate) fn with_log(e: Error, log: &str) -> Error {
    if log.is_empty() {
        e
    } else {
        Error::with_detail(e.call(), e.code(), format!("JIT log:\n{log}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_arrays_of_the_documented_values() {
        let options = JitOptions::new()
            .optimization_level(2)
            .max_registers(40)
            .target(ComputeCapability { major: 9, minor: 0 })
            .fallback(JitFallback::PreferBinary)
            .cache_mode(JitCacheMode::L1AndL2)
            .generate_line_info(true)
            .log_verbose(true)
            .log_buffer_bytes(100);
        let args = JitArgs::new("test", &options).unwrap();
        assert_eq!(args.options, [3, 4, 5, 6, 2, 7, 0, 9, 10, 14, 13, 12]);
        let values: Vec<usize> = args.values.iter().map(|&v| v as usize).collect();
        assert_eq!(values[0], args.info_log.as_ptr() as usize);
        assert_eq!(values[1], 100);
        assert_eq!(values[2], args.error_log.as_ptr() as usize);
        assert_eq!(values[3], 100);
        assert_eq!(&values[4..], [0, 2, 40, 90, 1, 2, 1, 1]);
        assert_eq!((args.info_log.len(), args.error_log.len()), (100, 100));
        // the defaults: both logs of 16 KiB, and the wall time
        let args = JitArgs::new("test", &JitOptions::default()).unwrap();
        assert_eq!(args.options, [3, 4, 5, 6, 2]);
        assert_eq!(args.values[1] as usize, 16 << 10);
        // no logs at all
        let args = JitArgs::new("test", &JitOptions::new().log_buffer_bytes(0)).unwrap();
        assert_eq!(args.options, [2]);
    }

    #[test]
    fn values_the_driver_would_misread_are_refused() {
        let e = JitArgs::new(
            "Module::from_ptx_with",
            &JitOptions::new().optimization_level(5),
        )
        .err()
        .unwrap();
        assert_eq!(e.code(), ErrorCode::InvalidValue);
        assert_eq!(
            e.to_string(),
            "Module::from_ptx_with failed: CUDA_ERROR_INVALID_VALUE (invalid argument): JIT \
             optimization level 5 is not one of 0 to 4"
        );
        #[cfg(target_pointer_width = "64")]
        {
            let e = JitArgs::new("t", &JitOptions::new().log_buffer_bytes(1 << 33))
                .err()
                .unwrap();
            assert_eq!(
                e.detail(),
                Some(
                    "a JIT log buffer of 8589934592 bytes is larger than the driver can take \
                     (4294967295 bytes)"
                )
            );
        }
    }

    #[test]
    fn logs_read_up_to_the_first_nul_and_the_wall_time_from_its_slot() {
        let mut args = JitArgs::new("t", &JitOptions::new().log_buffer_bytes(16)).unwrap();
        args.info_log[..6].copy_from_slice(b" info\n");
        args.error_log.copy_from_slice(b"error without nu");
        let slot = args.wall_time.unwrap();
        let bits = 2.5f32.to_bits() as usize;
        args.values[slot] = std::ptr::without_provenance_mut(bits);
        let log = args.log();
        assert_eq!(log.info, "info");
        assert_eq!(log.wall_time_ms, 2.5);
        assert_eq!(args.failure_log(), "error without nu\ninfo");
        assert_eq!(
            with_log(Error::new("c", ErrorCode::InvalidPtx), "x").detail(),
            Some("JIT log:\nx")
        );
    }
}
