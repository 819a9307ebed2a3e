//! Options for the driver's JIT compiler ([`JitOptions`]) when a module or library is
//! loaded, and what the compiler reported ([`JitLog`]).
//!
//! The driver takes JIT options as two parallel arrays: option numbers (`CUjit_option`) and
//! a `void*` per option, which is either a value cast to a pointer, or a pointer to a buffer
//! the driver writes (the logs), or a slot the driver overwrites (the wall time). It trusts
//! every entry: a log buffer pointer with a size larger than the buffer, or a count larger
//! than the arrays, makes it write or read out of bounds. So the arrays are built only by
//! the driver layer (`driver::JitArgs`), from a [`JitOptions`] value checked here, never
//! from user-supplied raw arrays; every log buffer is allocated there with exactly the size
//! passed next to it, and lives at least as long as the call (for a
//! [`Library`](crate::Library), as long as the library).
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
//!     let (module, log) = ctx.module_from_ptx_logged(include_str!("../../kernels/kernels.ptx"), &options)?;
//!     println!("JIT took {:?}:\n{}", log.wall_time, log.info);
//!     assert!(module.function("scale")?.num_registers()? <= 32);
//!     Ok(())
//! })
//! # }
//! ```

use std::ffi::c_uint;
use std::time::Duration;

use crate::context::ComputeCapability;
use crate::driver::{JitArgs, JitNumber};
use crate::error::{Error, Invalid, Result};

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
const DEFAULT_LOG_BYTES: usize = crate::driver::DEFAULT_LOG_BYTES as usize;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitLog {
    /// The informational log (`CU_JIT_INFO_LOG_BUFFER`), trimmed; empty when the
    /// compiler printed nothing (or the image needed no compiling).
    pub info: String,
    /// Wall-clock time spent in the compiler and linker (`CU_JIT_WALL_TIME`, which the
    /// driver gives in milliseconds); zero when nothing was compiled.
    pub wall_time: Duration,
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
        Err(Error::invalid_input(call, Invalid::argument(problem)))
    }
}

impl JitOptions {
    /// The driver's option arrays for these options (the raw form, `driver::JitArgs`), or
    /// the error of `call` for a value the driver would misread.
    pub(crate) fn to_args(&self, call: &'static str) -> Result<JitArgs> {
        self.check(call)?;
        // `check` refused a size above `u32::MAX`
        let mut args = JitArgs::with_logs(self.log_bytes as u32);
        if let Some(level) = self.optimization_level {
            args.set(JitNumber::OptimizationLevel, level);
        }
        if let Some(registers) = self.max_registers {
            args.set(JitNumber::MaxRegisters, registers);
        }
        if let Some(target) = self.target {
            // CUjit_target: major * 10 + minor (CU_TARGET_COMPUTE_90 = 90)
            let value = target.major.saturating_mul(10).saturating_add(target.minor);
            args.set(JitNumber::Target, value);
        }
        if let Some(fallback) = self.fallback {
            args.set(JitNumber::FallbackStrategy, fallback as u32);
        }
        if let Some(mode) = self.cache_mode {
            args.set(JitNumber::CacheMode, mode as u32);
        }
        for (option, on) in [
            (JitNumber::GenerateDebugInfo, self.generate_debug_info),
            (JitNumber::GenerateLineInfo, self.generate_line_info),
            (JitNumber::LogVerbose, self.log_verbose),
        ] {
            if on {
                args.set(option, 1);
            }
        }
        Ok(args)
    }
}

impl JitLog {
    /// What the compiler reported into `args`, read after a successful load.
    pub(crate) fn read(args: &JitArgs) -> JitLog {
        JitLog {
            info: args.info_log(),
            wall_time: duration_of_ms(args.wall_time_ms()),
        }
    }
}

/// The driver's milliseconds as a [`Duration`] (a time that is not one, negative or not a
/// number, which the driver does not report, as zero).
fn duration_of_ms(ms: f32) -> Duration {
    if ms > 0.0 && ms.is_finite() {
        Duration::from_secs_f64(f64::from(ms) / 1000.0)
    } else {
        Duration::ZERO
    }
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
    use crate::error::ErrorCode;

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
        let args = options.to_args("test").unwrap();
        let ((options, values), (info_log, error_log)) = (args.entries(), args.logs());
        assert_eq!(options, [3, 4, 5, 6, 2, 7, 0, 9, 10, 14, 13, 12]);
        let values: Vec<usize> = values.iter().map(|&v| v as usize).collect();
        assert_eq!(values[0], info_log.as_ptr() as usize);
        assert_eq!(values[1], 100);
        assert_eq!(values[2], error_log.as_ptr() as usize);
        assert_eq!(values[3], 100);
        assert_eq!(&values[4..], [0, 2, 40, 90, 1, 2, 1, 1]);
        assert_eq!((info_log.len(), error_log.len()), (100, 100));
        // the defaults: both logs of 16 KiB, and the wall time
        let args = JitOptions::default().to_args("test").unwrap();
        assert_eq!(args.entries().0, [3, 4, 5, 6, 2]);
        assert_eq!(args.entries().1[1] as usize, 16 << 10);
        // no logs at all
        let args = JitOptions::new()
            .log_buffer_bytes(0)
            .to_args("test")
            .unwrap();
        assert_eq!(args.entries().0, [2]);
    }

    #[test]
    fn the_wall_time_in_milliseconds_becomes_a_duration() {
        assert_eq!(duration_of_ms(2.5), Duration::from_micros(2500));
        assert_eq!(duration_of_ms(0.0), Duration::ZERO);
        assert_eq!(duration_of_ms(-1.0), Duration::ZERO);
        assert_eq!(duration_of_ms(f32::NAN), Duration::ZERO);
    }

    #[test]
    fn values_the_driver_would_misread_are_refused() {
        let e = JitOptions::new()
            .optimization_level(5)
            .to_args("Module::from_ptx_logged")
            .err()
            .unwrap();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(
            e.to_string(),
            "Module::from_ptx_logged failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): JIT \
             optimization level 5 is not one of 0 to 4"
        );
        #[cfg(target_pointer_width = "64")]
        {
            let e = JitOptions::new()
                .log_buffer_bytes(1 << 33)
                .to_args("t")
                .err()
                .unwrap();
            assert_eq!(
                e.invalid().and_then(crate::error::Invalid::reason),
                Some(
                    "a JIT log buffer of 8589934592 bytes is larger than the driver can take \
                     (4294967295 bytes)"
                )
            );
        }
    }

    #[test]
    fn a_failed_load_has_the_jit_log_as_its_detail() {
        assert_eq!(
            with_log(Error::new("c", ErrorCode::InvalidPtx), "x").detail(),
            Some("JIT log:\nx")
        );
        let e = Error::new("c", ErrorCode::InvalidPtx);
        assert_eq!(with_log(e.clone(), ""), e);
    }
}
