//! The staged pipelines against a stricter fake device than the unit tests' (from an
//! adversarial review): a DMA's bytes move only at its wait, a slot read or written by a
//! thread while its DMA is queued is counted as a violation, and the k-th DMA fails or
//! panics, for every k.

use std::time::{Duration, Instant};

use super::super::SLOT_BYTES;
use super::tests::{assert_run_is_free, staging_with};
use super::*;
use crate::error::{Error, ErrorCode};

const POISON: u8 = 0xEE;

/// Stricter than `FakeDma`: device to host, a queued DMA poisons its slot at once (the
/// copy engine may write the slot any time before the wait) and writes the real bytes
/// only at the wait; host to device, a queued DMA reads the slot at once, and the wait
/// checks that nobody wrote the slot meanwhile, then poisons it (so a piece skipped by
/// the next chunk shows). `fail_at`/`panic_at`: the k-th queue fails/panics.
/// A queued DMA: the slot, the offset in the copy, the length, and (host to device) the
/// slot's bytes when it was queued.
type Queued = (*mut u8, usize, usize, Vec<u8>);

struct StrictDma {
    device: *mut u8,
    to_host: bool,
    pending: [Option<Queued>; SLOTS],
    calls: usize,
    fail_at: usize,
    panic_at: usize,
    delay: Duration,
    violations: usize,
}

impl StrictDma {
    fn new(device: *mut u8, to_host: bool) -> StrictDma {
        StrictDma {
            device,
            to_host,
            pending: std::array::from_fn(|_| None),
            calls: 0,
            fail_at: usize::MAX,
            panic_at: usize::MAX,
            delay: Duration::ZERO,
            violations: 0,
        }
    }
}

// SAFETY: touches `len` bytes of the slot between its queue and its wait (or drop).
unsafe impl Dma for StrictDma {
    unsafe fn queue(
        &mut self,
        slot: usize,
        host: *mut u8,
        offset: usize,
        len: usize,
    ) -> Result<()> {
        self.calls += 1;
        if self.calls == self.fail_at {
            return Err(Error::new("fake DMA", ErrorCode::IllegalAddress));
        }
        assert!(self.calls != self.panic_at, "fake DMA panics");
        assert_run_is_free(
            self.pending.iter().map(|p| p.as_ref().map(|p| p.2)),
            slot,
            len,
        );
        let mut seen = Vec::new();
        if self.to_host {
            // SAFETY: the slot is the DMA's until the wait.
            unsafe { std::ptr::write_bytes(host, POISON, len) };
        } else {
            // SAFETY: the slot holds `len` bytes, the pipeline's until the wait.
            seen.extend_from_slice(unsafe { std::slice::from_raw_parts(host, len) });
            // SAFETY: as above; the test's device buffer holds the copy's range.
            unsafe { std::ptr::copy_nonoverlapping(host, self.device.wrapping_add(offset), len) };
        }
        self.pending[slot] = Some((host, offset, len, seen));
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        Ok(())
    }

    fn wait(&mut self, slot: usize) -> Result<()> {
        if let Some((host, offset, len, seen)) = self.pending[slot].take() {
            if !self.delay.is_zero() {
                std::thread::sleep(self.delay);
            }
            // SAFETY: the slot, or the run of slots from it, holds `len` bytes, the DMA's
            // until this wait returns.
            let slot_bytes = unsafe { std::slice::from_raw_parts(host, len) };
            if self.to_host {
                if slot_bytes.iter().any(|&b| b != POISON) {
                    self.violations += 1;
                }
                // SAFETY: as above; the test's device buffer holds the copy's range.
                unsafe {
                    std::ptr::copy_nonoverlapping(self.device.wrapping_add(offset), host, len)
                };
            } else {
                if slot_bytes != seen.as_slice() {
                    self.violations += 1;
                }
                // SAFETY: the run's whole slots are the DMA's until this wait returns.
                unsafe {
                    std::ptr::write_bytes(host, POISON, len.div_ceil(SLOT_BYTES) * SLOT_BYTES)
                };
            }
        }
        Ok(())
    }
}

impl Drop for StrictDma {
    fn drop(&mut self) {
        for slot in 0..SLOTS {
            let _ = self.wait(slot);
        }
    }
}

/// Whether every byte of `out` is 0 or the byte of `source` at its place (4 KiB blocks
/// compared whole first, so that a debug build checks megabytes quickly).
fn zero_or_source(out: &[u8], source: &[u8]) -> bool {
    let zeros = [0u8; 4096];
    out.chunks(4096).zip(source.chunks(4096)).all(|(o, s)| {
        o == &s[..o.len()]
            || o == &zeros[..o.len()]
            || o.iter().zip(s).all(|(&b, &c)| b == 0 || b == c)
    })
}

fn pattern(n: usize) -> Vec<u8> {
    // never POISON, so that a poisoned byte is always wrong
    (0..n)
        .map(|i| ((i.wrapping_mul(2_654_435_761) >> 13) as u8) % 0xE0)
        .collect()
}

#[test]
fn every_size_and_thread_count_moves_exactly_its_bytes_through_a_strict_device() {
    let sizes = [
        1usize,
        (256 << 10) - 1,
        (256 << 10) + 1,
        300 << 10,
        (1 << 20) + 3,
        (3 << 20) + 5,
        (5 << 20) - 1,
        33 << 20,
        (37 << 20) + 7,
    ];
    let max = sizes.iter().max().unwrap() + 64;
    let mut device = pattern(max);
    let source = device.clone();
    for threads in [0, 1, 3, 8] {
        let staging = staging_with(threads);
        for &bytes in &sizes {
            for start in [0usize, 13] {
                for fresh in [false, true] {
                    for lent in [threads, 1.min(threads)] {
                        let mut host = vec![0u8; bytes + 64];
                        let at = 3;
                        let mut dma = StrictDma::new(device[start..].as_mut_ptr(), true);
                        // SAFETY: `host` has room; the staging is this test's.
                        let r = unsafe {
                            pipeline_to_host(
                                &staging,
                                host[at..].as_mut_ptr(),
                                bytes,
                                lent,
                                fresh,
                                &mut dma,
                            )
                        };
                        r.unwrap();
                        assert_eq!(dma.violations, 0);
                        drop(dma);
                        assert!(
                            host[at..at + bytes] == source[start..start + bytes],
                            "down {bytes} {start} {threads}/{lent} {fresh}"
                        );
                        assert!(
                            host[..at]
                                .iter()
                                .chain(&host[at + bytes..])
                                .all(|&b| b == 0)
                        );
                    }
                    let mut out = vec![0u8; bytes + 64];
                    let mut dma = StrictDma::new(out[3..].as_mut_ptr(), false);
                    let src = &source[start..start + bytes];
                    // SAFETY: `src` has `bytes`; the staging is this test's.
                    let r = unsafe {
                        pipeline_from_host(&staging, src.as_ptr(), bytes, threads, &mut dma)
                    };
                    r.unwrap();
                    assert_eq!(dma.violations, 0, "a slot written during its DMA");
                    drop(dma);
                    assert!(out[3..3 + bytes] == *src, "up {bytes} {start} {threads}");
                }
            }
        }
    }
    assert!(device == source);
}

/// The k-th queue fails (or panics) for every k: the copy returns (no hang), with the
/// error, no poisoned byte reaches the host, the host range is quiet afterwards, and
/// the threads serve the next copy.
#[test]
fn a_failure_or_panic_at_any_dma_returns_and_leaves_no_wrong_byte() {
    // 3 MiB: no two whole chunks; 12 MiB: uploads fail and panic with runs of slots queued
    for bytes in [(3 << 20) + 12345, (12 << 20) + 12345] {
        failure_or_panic_at_any_dma(bytes);
    }
}

fn failure_or_panic_at_any_dma(bytes: usize) {
    let count = Chunks::new(0, bytes).count() + 20; // starts vary: a few more
    let mut device = pattern(bytes + 64);
    let source = device.clone();
    for threads in [0, 1, 3, 8] {
        let staging = staging_with(threads);
        for k in 1..=count {
            for panic in [false, true] {
                for fresh in [false, true] {
                    let mut host = vec![0u8; bytes];
                    let mut dma = StrictDma::new(device.as_mut_ptr(), true);
                    dma.delay = Duration::from_micros(if k % 3 == 0 { 200 } else { 0 });
                    if panic {
                        dma.panic_at = k;
                    } else {
                        dma.fail_at = k;
                    }
                    let t = Instant::now();
                    // SAFETY: `host` has room for `bytes`; the staging is this test's.
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                        pipeline_to_host(
                            &staging,
                            host.as_mut_ptr(),
                            bytes,
                            threads,
                            fresh,
                            &mut dma,
                        )
                    }));
                    assert!(t.elapsed() < Duration::from_secs(20));
                    let queued = dma.calls;
                    match r {
                        Ok(Ok(())) => assert!(queued < k),
                        Ok(Err(e)) => assert_eq!(e.call(), "fake DMA"),
                        Err(_) => assert!(panic),
                    }
                    assert_eq!(dma.violations, 0);
                    // nothing writes the host range once the copy returned
                    let snapshot = host.clone();
                    std::thread::sleep(Duration::from_micros(300));
                    assert!(host == snapshot, "written after the copy returned");
                    drop(dma);
                    assert!(zero_or_source(&host, &source), "k={k}");
                    // host to device
                    let mut out = vec![0u8; bytes];
                    let mut dma = StrictDma::new(out.as_mut_ptr(), false);
                    if panic {
                        dma.panic_at = k;
                    } else {
                        dma.fail_at = k;
                    }
                    // SAFETY: `source` has `bytes`; the staging is this test's.
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                        pipeline_from_host(&staging, source.as_ptr(), bytes, threads, &mut dma)
                    }));
                    match r {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => assert_eq!(e.call(), "fake DMA"),
                        Err(_) => assert!(panic),
                    }
                    assert_eq!(dma.violations, 0);
                    drop(dma);
                    assert!(zero_or_source(&out, &source), "up, k={k}");
                }
            }
        }
        // the threads serve the next copy
        let mut host = vec![0u8; bytes];
        let mut dma = StrictDma::new(device.as_mut_ptr(), true);
        // SAFETY: as above.
        unsafe { pipeline_to_host(&staging, host.as_mut_ptr(), bytes, threads, false, &mut dma) }
            .unwrap();
        drop(dma);
        assert!(host == source[..bytes]);
    }
    assert!(device == source);
}
