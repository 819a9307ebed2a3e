//! The raw form of the JIT compiler's options, as `cuModuleLoadDataEx` and
//! `cuLibraryLoadData` take them: two parallel arrays, option numbers (`CUjit_option`) and a
//! `void*` per option, which is either a value cast to a pointer, or a pointer to a buffer
//! the driver writes (the logs), or a slot the driver overwrites (the wall time).
//!
//! The driver trusts every entry: a log buffer pointer with a size larger than the buffer,
//! or a count larger than the arrays, makes it write or read out of bounds. So the arrays
//! are built here only, by [`JitArgs`], whose constructor allocates every log buffer with
//! exactly the size passed next to it and whose only setter takes the options that are
//! plain numbers ([`JitNumber`]). The public options (`JitOptions` in `module/jit.rs`) check their
//! values and convert to this form.

use std::ffi::{c_int, c_uint, c_void};

// CUjit_option values (cuda.h) that take a buffer, its size, or the wall-time slot.
const CU_JIT_WALL_TIME: c_int = 2;
const CU_JIT_INFO_LOG_BUFFER: c_int = 3;
const CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: c_int = 4;
const CU_JIT_ERROR_LOG_BUFFER: c_int = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

/// The size of each log buffer unless the options say otherwise (16 KiB).
pub(crate) const DEFAULT_LOG_BYTES: u32 = 16 << 10;

/// A JIT option whose value is a plain number (`CUjit_option`; the value's meaning is the
/// option's: a count, a level, a `CUjit_target`, a `CUjit_fallback`, a `CUjit_cacheMode`, or
/// 1 for "on").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JitNumber {
    /// `CU_JIT_MAX_REGISTERS`.
    MaxRegisters = 0,
    /// `CU_JIT_OPTIMIZATION_LEVEL`.
    OptimizationLevel = 7,
    /// `CU_JIT_TARGET`.
    Target = 9,
    /// `CU_JIT_FALLBACK_STRATEGY`.
    FallbackStrategy = 10,
    /// `CU_JIT_GENERATE_DEBUG_INFO`.
    GenerateDebugInfo = 11,
    /// `CU_JIT_LOG_VERBOSE`.
    LogVerbose = 12,
    /// `CU_JIT_GENERATE_LINE_INFO`.
    GenerateLineInfo = 13,
    /// `CU_JIT_CACHE_MODE`.
    CacheMode = 14,
}

/// The option arrays of one load, owning everything the arrays point to.
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
    /// The arrays with an info and an error log of `log_bytes` each (none at all for 0) and
    /// the wall-time slot; numbers are added with [`JitArgs::set`].
    pub(crate) fn with_logs(log_bytes: u32) -> JitArgs {
        let mut args = JitArgs {
            options: Vec::with_capacity(13),
            values: Vec::with_capacity(13),
            info_log: vec![0; log_bytes as usize],
            error_log: vec![0; log_bytes as usize],
            wall_time: None,
        };
        if log_bytes > 0 {
            let bytes = number(log_bytes);
            let info = args.info_log.as_mut_ptr().cast::<c_void>();
            let error = args.error_log.as_mut_ptr().cast::<c_void>();
            args.push(CU_JIT_INFO_LOG_BUFFER, info);
            args.push(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, bytes);
            args.push(CU_JIT_ERROR_LOG_BUFFER, error);
            args.push(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, bytes);
        }
        args.wall_time = Some(args.values.len());
        args.push(CU_JIT_WALL_TIME, std::ptr::null_mut());
        args
    }

    /// Adds the number option `option` with `value` (each option once).
    pub(crate) fn set(&mut self, option: JitNumber, value: u32) {
        self.push(option as c_int, number(value));
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

    /// The informational log, read after a successful call.
    pub(crate) fn info_log(&self) -> String {
        text(&self.info_log)
    }

    /// The compiler's and linker's wall time in milliseconds, read after a successful call
    /// (0 when nothing was compiled).
    pub(crate) fn wall_time_ms(&self) -> f32 {
        match self.wall_time {
            // The driver wrote a `float` into the first four bytes of the (null) slot.
            Some(i) => f32::from_bits(slot_low_bits(self.values[i])),
            None => 0.0,
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

    /// The option numbers and their values, for tests of the conversion in `module/jit.rs`.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> (&[c_int], &[*mut c_void]) {
        (&self.options, &self.values)
    }

    /// The two log buffers, `(info, error)`, for tests.
    #[cfg(test)]
    pub(crate) fn logs(&self) -> (&[u8], &[u8]) {
        (&self.info_log, &self.error_log)
    }
}

/// A number as the driver takes it in a value slot: the integer cast to a pointer.
fn number(n: u32) -> *mut c_void {
    std::ptr::without_provenance_mut::<c_void>(n as usize)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_read_up_to_the_first_nul_and_the_wall_time_from_its_slot() {
        let mut args = JitArgs::with_logs(16);
        args.info_log[..6].copy_from_slice(b" info\n");
        args.error_log.copy_from_slice(b"error without nu");
        let slot = args.wall_time.unwrap();
        let bits = 2.5f32.to_bits() as usize;
        args.values[slot] = std::ptr::without_provenance_mut(bits);
        assert_eq!(args.info_log(), "info");
        assert_eq!(args.wall_time_ms(), 2.5);
        assert_eq!(args.failure_log(), "error without nu\ninfo");
    }
}
