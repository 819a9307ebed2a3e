//! Adopting memory allocated elsewhere: the checks of the `from_raw_parts` constructors of
//! [`DeviceBuffer`](super::DeviceBuffer), [`PinnedBuffer`](super::PinnedBuffer) and
//! [`ManagedBuffer`](super::ManagedBuffer).
//!
//! First the checks that need no driver ([`check_parts`]: the byte length, null, alignment,
//! the end of the address space), then one or two `cuPointerGetAttributes` calls, which
//! report defaults for an address the driver does not know: no refusal provokes a driver
//! error. Each refusal is an [`Error`] whose detail names the
//! argument at fault (`` `ptr` ``, `` `len` `` or `` `ctx` ``).

use std::mem::{align_of, size_of};

use super::extent::checked_byte_len;
use crate::context::ContextGuard;
use crate::driver::{self, Allocation, MEMORY_TYPE_HOST};
use crate::error::{Error, Invalid, Result};

/// How adopted device memory goes back: chosen by the driver's own record of it
/// (`CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`), never by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// Memory of no pool (`cuMemAlloc`, `cudaMalloc`, `cuMemAllocPitch`): `cuMemFree`.
    Free,
    /// Memory of a pool (`cuMemAllocAsync`, `cudaMallocAsync`, `cuMemAllocFromPoolAsync`):
    /// `cuMemFreeAsync` on the legacy stream, which gives it back to its pool at once
    /// where `cuMemFree` would too but is meant for the other kind.
    FreeAsync,
}

/// The checks made before any driver call, for `len` elements of `T` at `ptr`: the byte
/// length does not overflow, and, unless it is zero, `ptr` is not null, is aligned for `T`,
/// and the range does not pass the end of the address space. `Ok(None)` for zero bytes
/// (nothing is taken over, nothing else is checked), else `Ok(Some(bytes))`.
pub(crate) fn check_parts<T>(call: &'static str, ptr: u64, len: usize) -> Result<Option<usize>> {
    let bytes = checked_byte_len::<T>(call, len).map_err(|_| {
        Error::invalid_input(
            call,
            Invalid::TooLarge {
                what: "the size in bytes of `len`",
                value: len as u128 * size_of::<T>() as u128,
                max: usize::MAX as u128,
            },
        )
    })?;
    if bytes == 0 {
        return Ok(None);
    }
    if ptr == 0 {
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "`ptr` is null and `len` is {len} ({bytes} bytes): only a buffer of zero bytes may have no address"
            )),
        ));
    }
    if ptr % align_of::<T>() as u64 != 0 {
        return Err(Error::invalid_input(
            call,
            Invalid::Misaligned {
                what: "`ptr`",
                value: ptr,
                align: align_of::<T>(),
            },
        ));
    }
    if ptr.checked_add(bytes as u64).is_none() {
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "`ptr` {ptr:#x} and `len` {len} ({bytes} bytes) pass the end of the address space"
            )),
        ));
    }
    Ok(Some(bytes))
}

/// The allocation's context is `ctx`'s, or an error naming both.
fn same_context(call: &'static str, ctx: ContextGuard<'_>, a: &Allocation) -> Result<()> {
    let mine = ctx.as_non_null().as_ptr();
    if a.context == mine {
        return Ok(());
    }
    // a `found` of 0: memory of no context
    Err(Error::invalid_input(
        call,
        Invalid::WrongContext {
            what: "the memory at `ptr`",
            expected: mine as u64,
            found: a.context as u64,
        },
    ))
}

/// The last byte of `bytes` at `ptr` is memory like the first (`same`), or an error naming
/// `len`.
fn last_byte_alike(
    call: &'static str,
    ptr: u64,
    len: usize,
    bytes: usize,
    what: &str,
    same: impl FnOnce(&Allocation) -> bool,
) -> Result<()> {
    let last = driver::allocation_of(ptr + bytes as u64 - 1)?;
    if same(&last) {
        return Ok(());
    }
    Err(Error::invalid_input(
        call,
        Invalid::argument(format!(
            "`len` {len} ({bytes} bytes from `ptr` {ptr:#x}) passes the end of the {what} at `ptr`"
        )),
    ))
}

/// The checks of `DeviceBuffer::from_raw_parts` through the driver (run with `ctx`
/// current): `bytes` at `ptr` lie in one device allocation that is not managed, either of
/// `ctx` itself and starting at `ptr` (memory of no pool: `cuMemFree` frees only an
/// allocation's start), or of a memory pool of `ctx`'s device. Returns how to free it.
pub(crate) fn check_device(
    call: &'static str,
    ctx: ContextGuard<'_>,
    ptr: u64,
    len: usize,
    bytes: usize,
) -> Result<Release> {
    let a = driver::allocation_of(ptr)?;
    if a.memory_type == 0 {
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "`ptr` {ptr:#x} is no memory the driver knows (not allocated by cuMemAlloc, cudaMalloc or a memory pool, or freed already)"
            )),
        ));
    }
    if a.managed {
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "`ptr` {ptr:#x} is managed memory: adopt it as a ManagedBuffer"
            )),
        ));
    }
    if a.memory_type == MEMORY_TYPE_HOST {
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "`ptr` {ptr:#x} is page-locked host memory: adopt it as a PinnedBuffer"
            )),
        ));
    }
    let release = if a.pool.is_null() {
        if a.context.is_null() {
            return Err(Error::invalid_input(
                call,
                Invalid::argument(format!(
                    "`ptr` {ptr:#x} is device memory of no context and no memory pool (mapped with cuMemMap, or of a graph), which neither cuMemFree nor cuMemFreeAsync frees"
                )),
            ));
        }
        same_context(call, ctx, &a)?;
        Release::Free
    } else {
        let device = ctx.device()?.as_raw();
        if a.device != device {
            return Err(Error::invalid_input(
                call,
                Invalid::argument(format!(
                    "`ptr` {ptr:#x} is memory of a pool of device {}, and `ctx` is a context of device {device}",
                    a.device
                )),
            ));
        }
        Release::FreeAsync
    };
    let (start, size) = driver::address_range(ptr)?;
    if release == Release::Free {
        return from_the_start(call, ptr, len, bytes, start, size).map(|()| release);
    }
    if size == 0 {
        // a pool allocation whose range the driver does not report: its last byte at least
        // is memory of the same pool
        let pool = a.pool;
        return last_byte_alike(call, ptr, len, bytes, "pool allocation", |l| {
            l.pool == pool && !l.managed
        })
        .map(|()| release);
    }
    within(call, ptr, len, bytes, start, size).map(|()| release)
}

/// The checks of `ManagedBuffer::from_raw_parts` through the driver (run with `ctx`
/// current): `bytes` at `ptr` are managed memory of `ctx`, from the start of the allocation
/// the driver reports and inside it ([`from_the_start`]: the buffer frees `ptr` with
/// `cuMemFree`, which frees only an allocation's start, so an interior pointer's free would
/// fail and leak the memory).
pub(crate) fn check_managed(
    call: &'static str,
    ctx: ContextGuard<'_>,
    ptr: u64,
    len: usize,
    bytes: usize,
) -> Result<()> {
    let a = driver::allocation_of(ptr)?;
    if !a.managed {
        let what = match a.memory_type {
            0 => "no memory the driver knows",
            MEMORY_TYPE_HOST => "page-locked host memory (adopt it as a PinnedBuffer)",
            _ => "device memory (adopt it as a DeviceBuffer)",
        };
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "`ptr` {ptr:#x} is {what}, not managed memory (cuMemAllocManaged, cudaMallocManaged)"
            )),
        ));
    }
    same_context(call, ctx, &a)?;
    let (start, size) = driver::address_range(ptr)?;
    from_the_start(call, ptr, len, bytes, start, size)
}

/// What memory freed with `cuMemFree(ptr)` needs of `ptr`, given the range the driver
/// reports for it (`size` bytes at `start`; `(0, 0)` where it reports none): `ptr` is the
/// start of its allocation (`cuMemFree` frees only that: given an address inside one, it
/// fails, and the buffer would leak what it owns), and `bytes` from it end inside the
/// allocation ([`within`]). An allocation the driver reports no range for cannot be
/// confirmed to start at `ptr`, and is refused. Errors name `ptr` or `len`.
fn from_the_start(
    call: &'static str,
    ptr: u64,
    len: usize,
    bytes: usize,
    start: u64,
    size: usize,
) -> Result<()> {
    if size == 0 {
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "the driver reports no allocation at `ptr` {ptr:#x}, so it cannot be confirmed to be an allocation's start, the only address cuMemFree frees"
            )),
        ));
    }
    if start != ptr {
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "`ptr` {ptr:#x} lies inside an allocation that starts at {start:#x}: cuMemFree frees only the start of an allocation (memory handed out by a caching allocator, such as PyTorch's, is part of a larger allocation)"
            )),
        ));
    }
    within(call, ptr, len, bytes, start, size)
}

/// `bytes` at `ptr` end inside `size` bytes at `start`, or an error naming `len`.
fn within(
    call: &'static str,
    ptr: u64,
    len: usize,
    bytes: usize,
    start: u64,
    size: usize,
) -> Result<()> {
    let end = start.saturating_add(size as u64);
    if ptr >= start && ptr + bytes as u64 <= end {
        return Ok(());
    }
    Err(Error::invalid_input(
        call,
        Invalid::argument(format!(
            "`len` {len} ({bytes} bytes from `ptr` {ptr:#x}) passes the end of the allocation ({size} bytes at {start:#x})"
        )),
    ))
}

/// The checks of `PinnedBuffer::from_raw_parts` through the driver (run with `ctx`
/// current): the first and last of `bytes` at `ptr` are page-locked host memory of `ctx`.
/// Whether it was allocated (`cuMemHostAlloc`) or registered (`cuMemHostRegister`) the
/// driver does not say: `cuMemHostGetFlags` accepts registered memory too (measured on an
/// H100, driver 580), so that stays the caller's promise.
pub(crate) fn check_pinned(
    call: &'static str,
    ctx: ContextGuard<'_>,
    ptr: u64,
    len: usize,
    bytes: usize,
) -> Result<()> {
    let a = driver::allocation_of(ptr)?;
    if a.memory_type != MEMORY_TYPE_HOST || a.managed {
        let what = match (a.memory_type, a.managed) {
            (_, true) => "managed memory (adopt it as a ManagedBuffer)",
            (0, _) => {
                "no memory the driver knows (pageable memory such as a Vec's, or freed already)"
            }
            _ => "device memory (adopt it as a DeviceBuffer)",
        };
        return Err(Error::invalid_input(
            call,
            Invalid::argument(format!(
                "`ptr` {ptr:#x} is {what}, not page-locked host memory (cuMemHostAlloc, cudaMallocHost)"
            )),
        ));
    }
    same_context(call, ctx, &a)?;
    let context = a.context;
    last_byte_alike(call, ptr, len, bytes, "page-locked allocation", |l| {
        l.memory_type == MEMORY_TYPE_HOST && !l.managed && l.context == context
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ErrorCode, Invalid};

    fn detail<T>(ptr: u64, len: usize) -> String {
        let e = check_parts::<T>("DeviceBuffer::from_raw_parts", ptr, len).unwrap_err();
        assert_eq!(e.call(), "DeviceBuffer::from_raw_parts");
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        e.invalid().unwrap().to_string()
    }

    #[test]
    fn raw_parts_are_checked_before_the_driver_naming_the_argument() {
        // zero bytes: nothing taken over, nothing checked (null and misaligned pass)
        assert_eq!(check_parts::<u32>("c", 0, 0).unwrap(), None);
        assert_eq!(check_parts::<u32>("c", 3, 0).unwrap(), None);
        assert_eq!(check_parts::<()>("c", 0, usize::MAX).unwrap(), None);
        // a plausible range
        assert_eq!(check_parts::<u32>("c", 0x7000_0000, 5).unwrap(), Some(20));
        assert_eq!(check_parts::<u8>("c", 0x7000_0001, 3).unwrap(), Some(3));
        // null with bytes
        let d = detail::<u32>(0, 4);
        assert!(
            d.contains("`ptr` is null") && d.contains("`len` is 4"),
            "{d}"
        );
        // misaligned
        let e = check_parts::<u32>("c", 0x1002, 4).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&Invalid::Misaligned {
                what: "`ptr`",
                value: 0x1002,
                align: 4
            })
        );
        let d = detail::<f64>(0x1004, 1);
        assert_eq!(d, "`ptr` (0x1004) is not aligned to 8 bytes");
        // the byte length overflows
        let e = check_parts::<u64>("c", 0x1000, usize::MAX / 4).unwrap_err();
        assert!(
            matches!(e.invalid(), Some(Invalid::TooLarge { what, .. }) if what.contains("`len`")),
            "{e}"
        );
        // the range wraps the address space
        let d = detail::<u8>(u64::MAX - 3, 8);
        assert!(d.contains("`ptr` ") && d.contains("`len` 8"), "{d}");
        assert!(d.contains("pass the end of the address space"), "{d}");
        assert_eq!(check_parts::<u8>("c", u64::MAX - 8, 8).unwrap(), Some(8));
    }

    #[test]
    fn memory_freed_with_cu_mem_free_is_adopted_only_from_its_allocations_start() {
        const CALL: &str = "ManagedBuffer::from_raw_parts";
        let (start, size) = (0x7000_0000u64, 4096usize);
        let refusal = |ptr: u64, len: usize, bytes: usize, start: u64, size: usize| {
            let e = from_the_start(CALL, ptr, len, bytes, start, size).unwrap_err();
            assert_eq!((e.call(), e.code()), (CALL, ErrorCode::InvalidInput));
            e.invalid().unwrap().to_string()
        };
        // the start: a part, and the whole
        assert_eq!(from_the_start(CALL, start, 4, 16, start, size), Ok(()));
        assert_eq!(from_the_start(CALL, start, 1024, 4096, start, size), Ok(()));
        // an address inside the allocation, however little it asks
        for interior in [start + 4, start + 256, start + 4095] {
            let d = refusal(interior, 1, 1, start, size);
            assert!(
                d.contains(&format!(
                    "`ptr` {interior:#x} lies inside an allocation that starts at {start:#x}"
                )),
                "{d}"
            );
            assert!(d.contains("cuMemFree frees only the start"), "{d}");
        }
        // more than the allocation holds
        let d = refusal(start, 1025, 4100, start, size);
        assert!(
            d.contains("`len` 1025") && d.contains("passes the end of the allocation"),
            "{d}"
        );
        // no range reported: the start cannot be confirmed
        let d = refusal(start, 4, 16, 0, 0);
        assert!(d.contains("reports no allocation at `ptr`"), "{d}");
    }
}
