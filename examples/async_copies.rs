//! Overlapping copies on two streams with pinned memory, timed with events.
//!
//! `cargo run --release --example async_copies`: copies 256 MiB to the device and back,
//! first on one stream, then split in halves over two streams (one uploading while the
//! other downloads), and prints the bandwidth of each. Exits 1 with the driver's error
//! where there is no GPU.

use std::process::ExitCode;

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, Error, Event, EventFlags, PinnedBuffer, Stream,
    StreamFlags, with_context,
};

const BYTES: usize = 256 << 20;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn gbps(bytes: usize, ms: f32) -> f64 {
    bytes as f64 / (ms as f64 * 1e-3) / 1e9
}

fn run() -> Result<(), Error> {
    let device = Device::get(0)?;
    println!("{}", device.name()?);
    with_context(&device, ContextFlags::default(), |ctx| {
        let n = BYTES / 4;
        let upload = PinnedBuffer::from_slice(ctx, &(0..n as u32).collect::<Vec<_>>())?;
        let mut download = PinnedBuffer::<u32>::zeroed(ctx, n)?;
        let mut dev_in = DeviceBuffer::<u32>::zeroed(ctx, n)?;
        let dev_out = DeviceBuffer::from_slice(ctx, &upload)?;
        let (a, b) = (
            Stream::new(ctx, StreamFlags::NonBlocking)?,
            Stream::new(ctx, StreamFlags::NonBlocking)?,
        );
        let (mut start, mut end) = (
            Event::new(ctx, EventFlags::new())?,
            Event::new(ctx, EventFlags::new())?,
        );
        let mut b_done = Event::without_timing(ctx, EventFlags::new())?;

        // One direction at a time, on one stream.
        for (name, to_device) in [("host-to-device", true), ("device-to-host", false)] {
            let (t0, t1) = a.scope(|s| {
                let t0 = start.record(s)?;
                if to_device {
                    s.copy_from_host(&mut dev_in, &upload)?;
                } else {
                    s.copy_to_host(&mut download, &dev_out)?;
                }
                end.record(s).map(|t1| (t0, t1))
            })?;
            let ms = t0.elapsed(&t1)?.as_secs_f32() * 1e3;
            println!(
                "{name:>15}, one stream:  {BYTES} bytes in {ms:7.3} ms = {:5.1} GB/s",
                gbps(BYTES, ms)
            );
        }

        // Both directions at once, in two halves, each stream doing one upload and one
        // download, so the two copy engines overlap.
        let half = n / 2;
        let (t0, t1) = a.scope_pair(&b, |sa, sb| {
            let t0 = start.record(sa)?;
            let (in_lo, in_hi) = dev_in.split_at_mut(half);
            let (out_lo, out_hi) = dev_out.split_at(half);
            let (down_lo, down_hi) = download.split_at_mut(half);
            sa.copy_from_host(in_lo, &upload[..half])?;
            sb.copy_to_host(down_lo, out_lo)?;
            sa.copy_to_host(down_hi, out_hi)?;
            sb.copy_from_host(in_hi, &upload[half..])?;
            // `end` after both streams: a waits for b's work
            let b_finished = b_done.record(sb)?;
            sa.wait_event(&b_finished)?;
            end.record(sa).map(|t1| (t0, t1))
        })?;
        let ms = t0.elapsed(&t1)?.as_secs_f32() * 1e3;
        println!(
            "  both at once, two streams: {} bytes in {ms:7.3} ms = {:5.1} GB/s",
            2 * BYTES,
            gbps(2 * BYTES, ms)
        );

        assert!(
            download.iter().enumerate().all(|(i, &x)| x == i as u32),
            "download mismatch"
        );
        assert_eq!(dev_in.to_vec()?, &upload[..], "upload mismatch");
        println!("verified: every element of both directions");
        Ok(())
    })
}
