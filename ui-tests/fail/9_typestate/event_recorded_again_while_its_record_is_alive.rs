// Rule: an event is not recorded again while the proof of its last record is alive:
// `Event::record` takes `&mut self`, and the `Recorded` it returns keeps that borrow.
//
// So every `Recorded` means the record it came from: `t0.elapsed(&t1)` times the two
// records `t0` and `t1` name. Recording `start` again (a second round in a loop, say) needs
// `t0` to be gone first.
//
// Without it: the driver keeps only an event's most recent record. After the second
// `start.record`, `t0` would stand for the new record, and `t0.elapsed(&t1)` would time
// from the second round's start to the first round's end: a meaningless time, an error if
// the driver's is negative, or CUDA_ERROR_NOT_READY if the new record has not completed
// (`cuEventElapsedTime`'s documentation).
//
// Fix: use a proof before recording its event again (time the first round, then start the
// second), or use one event per record that must stay meaningful.

use cuda_brand::{ContextFlags, Device, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let stream = ctx.new_stream()?;
        let mut buf = ctx.zeroed::<u8>(64 << 20)?;
        let (mut start, mut end) = (ctx.new_event()?, ctx.new_event()?);
        stream.scope(|s| {
            let t0 = start.record(s)?;
            s.fill(&mut buf, 1u8)?;
            let t1 = end.record(s)?;
            let again = start.record(s)?; // a second round
            t1.synchronize()?;
            println!("first round: {:?}", t0.elapsed(&t1)?);
            again.synchronize()
        })
    })
}
