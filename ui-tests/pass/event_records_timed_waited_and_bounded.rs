// Allowed: the uses of typed events and bounded waits that the typestate rules must keep
// compiling. Two timing records returned from a scope and timed after it; an event
// recorded again in each round of a loop, once the previous round's proof is gone; one
// record waited for by two streams (a `Recorded` is `Copy`); a bounded wait for a record;
// scopes with a deadline whose handlers wait longer, wait without a deadline, or never
// return (a closure calling `std::process::abort()`, a `fn` returning `!`).

use std::time::Duration;

use cuda_brand::{ContextFlags, KeepWaiting, Overrun, Stream, with_context};

fn give_up(overrun: Overrun) -> ! {
    eprintln!("still running after {:?}", overrun.elapsed());
    std::process::abort()
}

fn main() {
    let Ok(device) = cuda_brand::Device::get(0) else {
        return;
    };
    with_context(&device, ContextFlags::default(), |ctx| {
        let (a, b, c) = (ctx.new_stream()?, ctx.new_stream()?, ctx.new_stream()?);
        let mut buf = ctx.zeroed::<u32>(1 << 16)?;
        let (mut start, mut end) = (ctx.new_event()?, ctx.new_event()?);
        let mut ordered = ctx.new_event_without_timing()?;

        // timed rounds: each round's proofs end with the round
        for round in 1..=3u32 {
            let (t0, t1) = a.scope(|s| {
                let t0 = start.record(s)?;
                s.fill(&mut buf, round)?;
                end.record(s).map(|t1| (t0, t1))
            })?;
            assert!(t0.elapsed(&t1)? >= std::time::Duration::ZERO);
            assert!(t1.is_complete()?);
        }

        // one record, waited for by two streams
        let mut host_b = vec![0u32; 1 << 16];
        let mut host_c = vec![0u32; 1 << 16];
        Stream::scope_all(&[&a, &b, &c], |s| {
            let d = s[0].bind_mut(&mut buf);
            s[0].fill(d, 9)?;
            let filled = ordered.record(&s[0])?;
            let copy = filled;
            s[1].wait_event(&filled)?;
            s[2].wait_event(&copy)?;
            s[1].copy_to_host(&mut host_b, d.into_ref())?;
            s[2].copy_to_host(&mut host_c, d.into_ref())?;
            let _in_time: cuda_brand::Waited = filled.synchronize_within(Duration::from_secs(10))?;
            Ok::<_, cuda_brand::Error>(())
        })?;
        assert_eq!(host_b, host_c);

        // deadlines
        let mut calls = 0u32;
        a.scope_within(
            Duration::from_secs(10),
            |_| {
                calls += 1;
                KeepWaiting::for_another(Duration::from_millis(1))
            },
            |s| s.fill(&mut buf, 1),
        )?;
        a.scope_within(Duration::from_secs(10), |_| KeepWaiting::until_idle(), |s| {
            s.fill(&mut buf, 2)
        })?;
        a.scope_within(Duration::from_secs(10), |_| std::process::abort(), |s| {
            s.fill(&mut buf, 3)
        })?;
        a.scope_within(Duration::from_secs(10), |o| give_up(o), |s| s.fill(&mut buf, 4))?;
        Stream::scope_all_within(
            &[&a, &b],
            Duration::from_secs(10),
            |o| {
                eprintln!("stream {} late", o.stream_index());
                KeepWaiting::until_idle()
            },
            |s| s[1].fill(&mut buf, 5),
        )?;
        assert_eq!(buf.to_vec()?, vec![5; 1 << 16]);
        Ok::<_, cuda_brand::Error>(())
    })
    .expect("typed events and bounded waits");
}
