//! The staged pipelines' strictest sweeps, with the unit
//! tests' fake device ([`FakeDma`]): a DMA's bytes move only at its wait, a slot read or
//! written by a thread while its DMA is queued is counted as a violation, and the k-th DMA
//! fails or panics, for every k.

use std::time::{Duration, Instant};

use super::tests::{FakeDma, assert_only_at, staging_with};
use super::*;

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
    // never the fake device's poison (0xEE), so that a poisoned byte is always wrong
    (0..n)
        .map(|i| ((i.wrapping_mul(2_654_435_761) >> 13) as u8) % 0xE0)
        .collect()
}

#[test]
#[ignore = "a slow sweep (about 11 s on 2 cores): `cargo test --lib -- --ignored` runs it, as CI and the GPU run do"]
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
                        let mut dma = FakeDma::new(device[start..].as_mut_ptr(), true);
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
                        assert_only_at(
                            &host,
                            at,
                            &source[start..start + bytes],
                            &format!("down {bytes} {start} {threads}/{lent} {fresh}"),
                        );
                    }
                    let mut out = vec![0u8; bytes + 64];
                    let mut dma = FakeDma::new(out[3..].as_mut_ptr(), false);
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
#[ignore = "a slow sweep (about 37 s on 2 cores): `cargo test --lib -- --ignored` runs it, as CI and the GPU run do"]
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
                    let mut dma = FakeDma::new(device.as_mut_ptr(), true);
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
                    let mut dma = FakeDma::new(out.as_mut_ptr(), false);
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
        let mut dma = FakeDma::new(device.as_mut_ptr(), true);
        // SAFETY: as above.
        unsafe { pipeline_to_host(&staging, host.as_mut_ptr(), bytes, threads, false, &mut dma) }
            .unwrap();
        drop(dma);
        assert!(host == source[..bytes]);
    }
    assert!(device == source);
}

/// A fake device whose DMA completes only after `k` polls of [`Dma::wait_or`], which
/// answers `false` whenever `stop` holds first (the driver's `wait_or` at its most eager);
/// `early`: a mutation that answers `true` then, as if the DMA were done, which the sweep
/// must catch.
struct SlowDma {
    inner: FakeDma,
    /// Polls of each slot's DMA so far.
    polls: [usize; SLOTS],
    k: usize,
    early: bool,
}

// SAFETY: `inner`'s (for `early: false`; `early: true` is the mutation the test catches).
unsafe impl Dma for SlowDma {
    unsafe fn queue(
        &mut self,
        slot: usize,
        host: *mut u8,
        offset: usize,
        len: usize,
    ) -> Result<()> {
        self.polls[slot] = 0;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.queue(slot, host, offset, len) }
    }

    fn wait(&mut self, slot: usize) -> Result<()> {
        self.inner.wait(slot)
    }

    fn wait_or(&mut self, slot: usize, stop: &dyn Fn() -> bool) -> Result<bool> {
        loop {
            self.polls[slot] += 1;
            if self.polls[slot] >= self.k {
                self.inner.wait(slot)?;
                return Ok(true);
            }
            if stop() {
                return Ok(self.early);
            }
            std::hint::spin_loop();
        }
    }
}

/// Uploads (streaming stores and plain, 0 to 8 threads) against [`SlowDma`]: how many went
/// wrong (failed, wrote a slot during its DMA, or moved a wrong byte), counting also what
/// the waits of `Drop` find.
fn slow_dma_uploads(early: bool) -> usize {
    let mut bad = 0;
    for threads in [0usize, 1, 3, 8] {
        let staging = staging_with(threads);
        for bytes in [
            512 << 10,
            (1 << 20) + 3,
            (9 << 20) + 1,
            (17 << 20) + 5,
            37 << 20,
        ] {
            for k in [1usize, 3, 200, 20_000] {
                let source = pattern(bytes);
                let mut out = vec![0u8; bytes];
                let mut dma = SlowDma {
                    inner: FakeDma::new(out.as_mut_ptr(), false),
                    polls: [0; SLOTS],
                    k,
                    early,
                };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    // SAFETY: `source` holds `bytes`; the staging is this test's.
                    unsafe {
                        pipeline_from_host(&staging, source.as_ptr(), bytes, threads, &mut dma)
                    }
                }));
                for slot in 0..SLOTS {
                    dma.inner.wait(slot).unwrap();
                }
                if !matches!(r, Ok(Ok(()))) || dma.inner.violations != 0 || out != source {
                    bad += 1;
                }
            }
        }
    }
    bad
}

#[test]
#[ignore = "a slow sweep (about 12 s on 2 cores): `cargo test --lib -- --ignored` runs it, as CI and the GPU run do"]
fn uploads_against_an_eager_wait_or_keep_every_slot_until_its_dma_is_done() {
    assert_eq!(slow_dma_uploads(false), 0);
}

#[test]
#[ignore = "a slow sweep (about 10 s on 2 cores): `cargo test --lib -- --ignored` runs it, as CI and the GPU run do"]
fn a_wait_or_that_answers_done_too_early_is_caught() {
    assert!(
        slow_dma_uploads(true) > 0,
        "a wait_or that lies went unnoticed"
    );
}
