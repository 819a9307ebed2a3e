//! A copy with streaming (non-temporal) stores, for copying a slot out into a `Vec` that
//! was written before, and into the slots of a short upload. Out of a slot, the stores go
//! to memory without reading the destination's cache lines first, leaving the memory
//! bandwidth to the copy engine and the other threads: measured on an H200
//! (`bench/results/2026-11-28-28-sixth/`), `copy_to_host` of 64 MiB 47.4-47.7 GB/s against
//! 42.9-44.4 with `memcpy`, of 256 MiB 50.7 against 46.3-46.7. Into a slot of an upload of
//! up to 16 MiB (`pipeline::STREAMING_UPLOAD_MAX`), the copy engine then reads the slot
//! from memory instead of out of the copying cores' caches, and the short copy's DMAs run
//! sooner. Not used into a new `Vec` (slower there: each huge page's fault dominates) nor
//! into the slots of a longer upload (`copy_from_host` of 256 MiB fell from 44-45 to
//! 35-38 GB/s).

/// Copies `len` bytes from `src` to `dst`, like `ptr::copy_nonoverlapping`, with 16-byte
/// streaming stores on x86-64 (SSE2, which every x86-64 processor has), followed by a
/// store fence, so that the bytes are visible to every thread ordered after the call (by a
/// lock or an atomic), as after a plain copy, and to a DMA queued after that. Elsewhere
/// (and under Miri, which runs no assembly) a plain copy. Like `memcpy`, it moves bytes:
/// the source may hold uninitialised ones (a padded type's padding).
///
/// # Safety
/// As `ptr::copy_nonoverlapping`: `src` valid for `len` bytes of reads, `dst` for `len`
/// bytes of writes, the two not overlapping.
pub(super) unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // the head, up to a 16-byte boundary of `dst`, with a plain copy
        let head = dst.align_offset(16).min(len);
        // SAFETY: the first `head <= len` bytes of both ranges (the caller's guarantee).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
        let (mut s, mut d, mut left) = (src.wrapping_add(head), dst.wrapping_add(head), len - head);
        while left >= 64 {
            // Bytes, never Rust values: like `memcpy`, the copy takes any bytes, uninitialised
            // ones too (padding, which no `DeviceCopy` type has, but which the copy
            // does not rely on), and reading them as a typed value (an `__m128i`) would be
            // undefined behaviour; the assembly moves them through registers the compiler
            // does not see, as `memcpy` does.
            // SAFETY: 64 bytes at `s` lie in the source (`left` of them remain), read
            // unaligned (`movdqu`); 64 bytes at `d` lie in the destination, 16-byte aligned
            // (`d` is, from `head` on, in steps of 64), as the streaming stores (`movntdq`)
            // need; SSE2 is part of x86-64. The four registers are declared clobbered, no
            // stack or flags are touched.
            unsafe {
                std::arch::asm!(
                    "movdqu {x0}, xmmword ptr [{s}]",
                    "movdqu {x1}, xmmword ptr [{s} + 16]",
                    "movdqu {x2}, xmmword ptr [{s} + 32]",
                    "movdqu {x3}, xmmword ptr [{s} + 48]",
                    "movntdq xmmword ptr [{d}], {x0}",
                    "movntdq xmmword ptr [{d} + 16], {x1}",
                    "movntdq xmmword ptr [{d} + 32], {x2}",
                    "movntdq xmmword ptr [{d} + 48], {x3}",
                    s = in(reg) s,
                    d = in(reg) d,
                    x0 = out(xmm_reg) _,
                    x1 = out(xmm_reg) _,
                    x2 = out(xmm_reg) _,
                    x3 = out(xmm_reg) _,
                    options(nostack, preserves_flags),
                );
            }
            s = s.wrapping_add(64);
            d = d.wrapping_add(64);
            left -= 64;
        }
        // SAFETY: the last `left < 64` bytes of both ranges.
        unsafe { std::ptr::copy_nonoverlapping(s, d, left) };
        // streaming stores are weakly ordered: the fence makes them visible before any
        // later store, such as the release of the lock that hands the piece over
        // SAFETY: SSE2 is part of x86-64.
        unsafe { std::arch::x86_64::_mm_sfence() };
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    // SAFETY: the caller's guarantee.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    };
}

#[cfg(test)]
mod tests {
    use super::copy_streaming;

    /// Every length and alignment around the 16- and 64-byte steps: the bytes arrive, and
    /// nothing around the destination is written.
    #[test]
    fn a_streaming_copy_moves_exactly_its_bytes() {
        let source: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4096] {
            for src_at in [0, 1, 8, 15] {
                for dst_at in [0, 1, 5, 16, 31] {
                    let mut out = vec![0xAAu8; len + 96];
                    let src = &source[src_at..src_at + len];
                    // SAFETY: `src` has `len` bytes; `out` has room for them at `dst_at`.
                    unsafe { copy_streaming(src.as_ptr(), out[dst_at..].as_mut_ptr(), len) };
                    assert_eq!(&out[dst_at..dst_at + len], src, "{len} {src_at} {dst_at}");
                    assert!(
                        out[..dst_at]
                            .iter()
                            .chain(&out[dst_at + len..])
                            .all(|&b| b == 0xAA),
                        "{len} {src_at} {dst_at}: a byte around the destination was written"
                    );
                }
            }
        }
    }

    /// A source with uninitialised bytes, the padding of `(u8, u32)` (three bytes an
    /// element; no `DeviceCopy` type has padding, but `copy_streaming` promises `memcpy`'s
    /// contract, bytes of any kind): every element arrives. The copy moves bytes, never
    /// typed values of them (reading uninitialised bytes as an integer or SIMD value would
    /// be undefined behaviour).
    #[test]
    fn a_padded_source_is_copied_as_bytes() {
        let source = vec![(7u8, 0xDEAD_BEEFu32); 1000];
        let bytes = std::mem::size_of_val(source.as_slice());
        // at element 0 (the 16-byte steps aligned as the allocation is) and at element 1
        // (a head of plain copy first)
        for at in [0, 1] {
            let mut out = vec![(0u8, 0u32); source.len() + 1];
            let dst = out[at..].as_mut_ptr().cast::<u8>();
            // SAFETY: `source` has `bytes` bytes; `out` has room for them from element `at`
            // (`len + 1` elements); what arrives are the bytes of valid elements.
            unsafe { copy_streaming(source.as_ptr().cast::<u8>(), dst, bytes) };
            assert_eq!(&out[at..at + source.len()], &source[..], "at element {at}");
            let around = if at == 0 { source.len() } else { 0 };
            assert_eq!(out[around], (0, 0), "the element beside the copy, at {at}");
        }
    }
}
