//! Typed events and bounded waits on a real GPU: records timed, waited for and polled;
//! scopes with a deadline whose overrun handler waits on, stops asking, panics or aborts
//! the process, and which return only once their work is done. Skips without a device;
//! fails instead with `CUDA_BRAND_REQUIRE_GPU=1`.
//!
//! The kernel `spin_then_fill` (tests/kernels/deadline.cu) spins on the GPU's global
//! timer for a given number of nanoseconds, then writes a value to its output: work that is
//! still running when a short deadline passes, and whose result shows it finished.

use crate::common;

use std::time::{Duration, Instant};

use cuda_brand::{
    ContextGuard, Error, ErrorCode, KeepWaiting, Kernel, LaunchConfig, Module, Out, Overrun,
    Stream, Waited,
};

const PTX: &str = include_str!("kernels/deadline.ptx");
const MS: Duration = Duration::from_millis(1);
/// Elements written by each spinning launch (16 blocks of 256 threads).
const N: usize = 4096;
const SPIN_MS: u64 = 50;

type Spin<'m, 'ctx> = Kernel<'m, 'ctx, (u64, Out<u32>, u32)>;

fn spin_kernel<'m, 'ctx>(module: &'m Module<'ctx>) -> cuda_brand::Result<Spin<'m, 'ctx>> {
    // SAFETY: `spin_then_fill(unsigned long long ns, unsigned int *out, size_t out_len,
    // unsigned int value)` writes `out[i]` only for `i < out_len`.
    unsafe { module.kernel::<(u64, Out<u32>, u32)>("spin_then_fill") }
}

fn load(ctx: ContextGuard<'_>) -> cuda_brand::Result<Module<'_>> {
    Module::from_ptx(ctx, PTX)
}

fn launch_config() -> LaunchConfig {
    LaunchConfig::linear((N / 256) as u32, 256)
}

fn ns(ms: u64) -> u64 {
    ms * 1_000_000
}

fn a_deadline_overrun_calls_the_handler_and_the_scope_returns_after_the_kernel() {
    common::in_context(|ctx| {
        let module = load(ctx)?;
        let spin = spin_kernel(&module)?;
        let stream = ctx.new_stream()?;
        let mut out = ctx.zeroed::<u32>(N)?;
        // pinned: a copy into pageable memory would block the closure until the kernel ends
        let mut host = ctx.pinned_zeroed::<u32>(N)?;
        let mut seen: Vec<Overrun> = Vec::new();
        let started = Instant::now();
        stream.scope_within(
            MS,
            |overrun| {
                seen.push(overrun);
                KeepWaiting::for_another(2 * MS)
            },
            |s| {
                let d = s.bind_mut(&mut out);
                s.launch(&spin, launch_config(), (ns(SPIN_MS), d, 42u32))?;
                s.copy_to_host(&mut host, d.into_ref())
            },
        )?;
        let took = started.elapsed();
        assert!(stream.is_idle()?, "the scope returned with its stream idle");
        assert!(
            took >= Duration::from_millis(SPIN_MS),
            "returned after {took:?}, before the {SPIN_MS} ms kernel could finish"
        );
        assert_eq!(
            host.to_vec(),
            vec![42; N],
            "the copy after the kernel is complete"
        );
        assert_eq!(out.to_vec()?, vec![42; N]);
        println!("{} overruns in {took:?}: {seen:?}", seen.len());
        assert!(
            !seen.is_empty(),
            "a 1 ms deadline on a {SPIN_MS} ms kernel overran"
        );
        assert_eq!(seen[0].deadline(), MS);
        for (k, o) in seen.iter().enumerate() {
            assert_eq!(o.count(), k as u64 + 1);
            assert_eq!(o.stream_index(), 0);
            assert!(o.elapsed() >= o.deadline(), "{o:?}");
            assert!(o.elapsed() <= took, "{o:?}");
        }
        for pair in seen.windows(2) {
            assert_eq!(pair[1].deadline(), pair[0].elapsed() + 2 * MS, "{pair:?}");
        }
        Ok(())
    });
}

fn a_scope_done_before_its_deadline_never_calls_the_handler() {
    common::in_context(|ctx| {
        let stream = ctx.new_stream()?;
        let mut buf = ctx.zeroed::<u32>(1 << 20)?;
        let mut host = vec![0u32; 1 << 20];
        let mut calls = 0;
        let value = stream.scope_within(
            Duration::from_secs(10),
            |_| {
                calls += 1;
                KeepWaiting::until_idle()
            },
            |s| {
                let d = s.bind_mut(&mut buf);
                s.fill(d, 7)?;
                s.copy_to_host(&mut host, d.into_ref())?;
                Ok::<_, Error>("the closure's value")
            },
        )?;
        assert_eq!(value, "the closure's value");
        assert_eq!(calls, 0);
        assert!(host.iter().all(|&x| x == 7));
        Ok(())
    });
}

fn until_idle_is_asked_once_and_the_scope_still_waits_for_the_kernel() {
    common::in_context(|ctx| {
        let module = load(ctx)?;
        let spin = spin_kernel(&module)?;
        let stream = ctx.new_stream()?;
        let mut out = ctx.zeroed::<u32>(N)?;
        let mut calls = 0;
        let started = Instant::now();
        stream.scope_within(
            MS,
            |_| {
                calls += 1;
                KeepWaiting::until_idle()
            },
            |s| s.launch(&spin, launch_config(), (ns(SPIN_MS), &mut out, 5u32)),
        )?;
        assert!(started.elapsed() >= Duration::from_millis(SPIN_MS));
        assert_eq!(calls, 1);
        assert!(stream.is_idle()?);
        assert_eq!(out.to_vec()?, vec![5; N]);
        Ok(())
    });
}

fn scope_all_within_names_the_busy_stream_and_waits_for_every_stream() {
    common::in_context(|ctx| {
        let module = load(ctx)?;
        let spin = spin_kernel(&module)?;
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        let mut quick = ctx.zeroed::<u32>(N)?;
        let mut slow = ctx.zeroed::<u32>(N)?;
        let mut busy = Vec::new();
        Stream::scope_all_within(
            &[&a, &b],
            MS,
            |o| {
                busy.push(o.stream_index());
                KeepWaiting::for_another(MS)
            },
            |s| {
                s[0].fill(&mut quick, 3)?;
                s[1].launch(&spin, launch_config(), (ns(SPIN_MS), &mut slow, 9u32))
            },
        )?;
        assert!(a.is_idle()? && b.is_idle()?);
        assert!(!busy.is_empty());
        // stream 0's fill may still be queued at the first deadlines; the kernel on stream 1
        // is what keeps the scope waiting
        assert_eq!(busy.last(), Some(&1), "stream 1 overran last: {busy:?}");
        assert!(busy.iter().all(|&i| i <= 1), "{busy:?}");
        assert_eq!(quick.to_vec()?, vec![3; N]);
        assert_eq!(slow.to_vec()?, vec![9; N]);
        Ok(())
    });
}

fn a_panicking_handler_is_resumed_after_the_stream_is_idle() {
    common::in_context(|ctx| {
        let module = load(ctx)?;
        let spin = spin_kernel(&module)?;
        let stream = ctx.new_stream()?;
        let mut out = ctx.zeroed::<u32>(N)?;
        let mut host = ctx.pinned_zeroed::<u32>(N)?;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            stream.scope_within(
                MS,
                |_| panic!("the handler gave up"),
                |s| {
                    let d = s.bind_mut(&mut out);
                    // ten times the other tests' spin: the deadline runs from the scope's
                    // opening, and a stream found idle at the first check is no overrun,
                    // so a host stalled for the whole spin between the launch and that
                    // check (seen once in a full H200 run, with 50 ms) calls no handler
                    s.launch(&spin, launch_config(), (ns(10 * SPIN_MS), d, 11u32))?;
                    s.copy_to_host(&mut host, d.into_ref())
                },
            )
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"the handler gave up"));
        // the pinned copy behind the kernel is complete: the scope waited before the panic
        assert!(
            host.iter().all(|&x| x == 11),
            "complete before the panic resumed"
        );
        assert!(stream.is_idle()?);
        Ok(())
    });
}

/// Set in the child process of `an_aborting_handler_stops_the_process_before_the_scope_returns`.
const ABORT_CHILD: &str = "CUDA_BRAND_TEST_ABORT_CHILD";

fn an_aborting_handler_stops_the_process_before_the_scope_returns() {
    if std::env::var_os(ABORT_CHILD).is_some() {
        // The child: a 2 s kernel, a 1 ms deadline, a handler that aborts.
        common::in_context(|ctx| {
            let module = load(ctx)?;
            let spin = spin_kernel(&module)?;
            let stream = ctx.new_stream()?;
            let mut out = ctx.zeroed::<u32>(N)?;
            stream.scope_within(
                MS,
                |o| {
                    eprintln!("handler: aborting after {:?}", o.elapsed());
                    std::process::abort()
                },
                |s| s.launch(&spin, launch_config(), (ns(2000), &mut out, 1u32)),
            )?;
            eprintln!("scope returned");
            Ok(())
        });
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_aborting_handler_stops_the_process_before_the_scope_returns",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ABORT_CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stderr.contains("handler: aborting after"),
        "the handler ran:\n{stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("scope returned"),
        "the scope returned:\n{stdout}\n{stderr}"
    );
    assert!(!output.status.success(), "{:?}", output.status);
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            output.status.signal(),
            Some(6),
            "killed by SIGABRT: {:?}\n{stderr}",
            output.status
        );
    }
}

fn synchronize_within_says_not_yet_then_done() {
    common::in_context(|ctx| {
        let module = load(ctx)?;
        let spin = spin_kernel(&module)?;
        let stream = ctx.new_stream()?;
        let mut out = ctx.zeroed::<u32>(N)?;
        let mut done = ctx.new_event_without_timing()?;
        let (early, early_complete, late, late_complete, waited) = stream.scope(|s| {
            s.launch(&spin, launch_config(), (ns(SPIN_MS), &mut out, 8u32))?;
            let r = done.record(s)?;
            let t = Instant::now();
            let early = r.synchronize_within(MS)?;
            let waited = t.elapsed();
            let early_complete = r.is_complete()?;
            let late = r.synchronize_within(Duration::from_secs(10))?;
            Ok::<_, Error>((early, early_complete, late, r.is_complete()?, waited))
        })?;
        assert_eq!(
            early,
            Waited::TimedOut,
            "a {SPIN_MS} ms kernel is not done within 1 ms"
        );
        assert!(!early_complete);
        assert!(waited >= MS, "waited {waited:?}");
        assert!(waited < Duration::from_millis(SPIN_MS), "waited {waited:?}");
        assert!(late == Waited::Complete && late_complete);
        assert_eq!(out.to_vec()?, vec![8; N]);
        Ok(())
    });
}

fn timing_records_measure_the_kernel_and_an_incomplete_one_is_not_ready() {
    common::in_context(|ctx| {
        let module = load(ctx)?;
        let spin = spin_kernel(&module)?;
        let stream = ctx.new_stream()?;
        let mut out = ctx.zeroed::<u32>(N)?;
        let (mut start, mut end) = (ctx.new_event()?, ctx.new_event()?);
        let (t0, t1, too_early) = stream.scope(|s| {
            let t0 = start.record(s)?;
            s.launch(&spin, launch_config(), (ns(20), &mut out, 2u32))?;
            let t1 = end.record(s)?;
            Ok::<_, Error>((t0, t1, t0.elapsed(&t1)))
        })?;
        let e = too_early.unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotReady, "{e}");
        let ms = t0.elapsed(&t1)?.as_secs_f32() * 1e3;
        println!("20 ms spin timed: {ms:.3} ms");
        // (the kernel times itself with %globaltimer, the events with their own clock)
        assert!((19.5..1000.0).contains(&ms), "{ms} ms");
        // re-recorded in rounds, once the previous round's proofs are gone
        let mut times = Vec::new();
        for spin_ms in [5u64, 10, 15] {
            let (t0, t1) = stream.scope(|s| {
                let t0 = start.record(s)?;
                s.launch(
                    &spin,
                    launch_config(),
                    (ns(spin_ms), &mut out, spin_ms as u32),
                )?;
                end.record(s).map(|t1| (t0, t1))
            })?;
            times.push(t0.elapsed(&t1)?.as_secs_f32() * 1e3);
        }
        println!("rounds: {times:?} ms");
        for (ms, spin_ms) in times.iter().zip([5.0f32, 10.0, 15.0]) {
            assert!(*ms >= spin_ms * 0.97 && *ms < spin_ms + 500.0, "{times:?}");
        }
        assert_eq!(out.to_vec()?, vec![15; N]);
        Ok(())
    });
}

fn a_record_on_one_stream_orders_another_scopes_stream() {
    // Stream b, in a scope of its own, waits for a record on stream a after a 30 ms kernel;
    // b's end record then comes at least 30 ms after a's start record. Without the wait,
    // b's record on an idle stream would complete at once.
    common::in_context(|ctx| {
        let module = load(ctx)?;
        let spin = spin_kernel(&module)?;
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        let mut out = ctx.zeroed::<u32>(N)?;
        let (mut start, mut end) = (ctx.new_event()?, ctx.new_event()?);
        let mut kernel_done = ctx.new_event_without_timing()?;
        let (t0, t1) = a.scope(|sa| {
            let t0 = start.record(sa)?;
            sa.launch(&spin, launch_config(), (ns(30), &mut out, 4u32))?;
            let done = kernel_done.record(sa)?;
            let copy = done; // a `Recorded` is `Copy`: both name the one record
            let t1 = b.scope(|sb| {
                sb.wait_event(&copy)?;
                end.record(sb)
            })?;
            assert!(done.is_complete()?, "b's scope waited for a's record");
            Ok::<_, Error>((t0, t1))
        })?;
        let ms = t0.elapsed(&t1)?.as_secs_f32() * 1e3;
        println!("b's record came {ms:.3} ms after a's start");
        assert!(ms >= 29.0, "{ms} ms: b did not wait for a's kernel");
        assert_eq!(out.to_vec()?, vec![4; N]);
        Ok(())
    });
}

gpu_tests!(
    a_deadline_overrun_calls_the_handler_and_the_scope_returns_after_the_kernel,
    a_scope_done_before_its_deadline_never_calls_the_handler,
    until_idle_is_asked_once_and_the_scope_still_waits_for_the_kernel,
    scope_all_within_names_the_busy_stream_and_waits_for_every_stream,
    a_panicking_handler_is_resumed_after_the_stream_is_idle,
    an_aborting_handler_stops_the_process_before_the_scope_returns,
    synchronize_within_says_not_yet_then_done,
    timing_records_measure_the_kernel_and_an_incomplete_one_is_not_ready,
    a_record_on_one_stream_orders_another_scopes_stream,
);
