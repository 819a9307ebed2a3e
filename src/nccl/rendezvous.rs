//! The exchange of NCCL's unique id between the processes of a [`World`], over TCP, when
//! NCCL cannot derive it on its own (`NCCL_COMM_ID` unset): the smallest protocol that
//! does it, and nothing more. NCCL's own bootstrap does everything after.
//!
//! Rank 0 listens on the master's port (every interface of the master address's family),
//! makes the id (`ncclGetUniqueId`, which starts NCCL's bootstrap root in this process),
//! and accepts the other ranks. Each other rank connects (again and again until the
//! deadline: rank 0 may start later), says hello, and waits for the answer:
//!
//! ```text
//! hello:  "cbNCCLid" | protocol u32 | rank u64 | world size u64      (big-endian)
//! answer: "cbNCCLid" | 0 | the 128 bytes of the id
//!       | "cbNCCLid" | 1 | length u32 | why, UTF-8                  (refused)
//! ```
//!
//! Rank 0 answers once every rank has said hello, and checks each hello: the same world
//! size as its own, a rank from 1 to size - 1, not one that arrived already. A hello that
//! fails a check makes rank 0 refuse every rank connected so far, saying why, and fail
//! itself with the same reason; a connection that says no hello of this protocol (another
//! program on the port) is closed and ignored. Every wait is bounded by the one deadline:
//! each read and write is given the time left (so a peer that trickles its bytes, or a
//! stream of strangers, holds nobody past it), and a host name is resolved in a thread of
//! its own, waited for until the deadline (a resolver that hangs does not hang the call).
//! A rank that never arrives, or a rank 0 that never answers, is an error naming who is
//! missing, [`ErrorCode::NcclTimeout`]. Rank 0 keeps only the ranks that arrived: a world
//! size taken from a hostile environment costs it nothing per absent rank.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::world::World;
use crate::error::{Error, ErrorCode, Result};

/// What the errors name as the failed call.
pub(crate) const CALL: &str = "Communicator::from_world";

const MAGIC: [u8; 8] = *b"cbNCCLid";
const PROTOCOL: u32 = 1;
const HELLO_BYTES: usize = 8 + 4 + 8 + 8;
/// The id's size, `NCCL_UNIQUE_ID_BYTES`.
pub(crate) const ID_BYTES: usize = 128;
/// The longest refusal read.
const MAX_WHY: u32 = 64 * 1024;

fn rendezvous(detail: String) -> Error {
    Error::with_detail(CALL, ErrorCode::NcclRendezvous, detail)
}

fn timeout(detail: String) -> Error {
    Error::with_detail(CALL, ErrorCode::NcclTimeout, detail)
}

/// The time left until `deadline`, at least 1 ms (a zero socket timeout means none).
fn left(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

/// The addresses of `host:port` (an IP address, an IPv6 address in brackets as in
/// `[::1]`, or a host name), resolved by `deadline`: a name is resolved in a thread of its
/// own, which is left to finish on its own if the resolver takes longer.
pub(crate) fn resolve(host: &str, port: u16, deadline: Instant) -> io::Result<Vec<SocketAddr>> {
    let host = host.trim();
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let (tx, rx) = mpsc::channel();
    let name = bare.to_owned();
    std::thread::Builder::new()
        .name("cuda-brand-resolve".to_owned())
        .spawn(move || {
            let addrs = (name.as_str(), port)
                .to_socket_addrs()
                .map(|a| a.collect::<Vec<_>>());
            let _ = tx.send(addrs);
        })?;
    match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(addrs) => addrs,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the name's resolution did not finish before the deadline",
        )),
    }
}

/// Reads `buf` full by `until`: each read is given the time left, so a peer that trickles
/// its bytes holds the reader no longer. `TimedOut` past it, `UnexpectedEof` when closed.
fn read_by(stream: &mut TcpStream, buf: &mut [u8], until: Instant) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[done..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `buf` by `until`, each write given the time left.
fn write_by(stream: &mut TcpStream, buf: &[u8], until: Instant) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(&buf[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The id of `world`'s communicator: rank 0 makes it with `make_id` and hands it to the
/// others, which receive it; a world of one makes it and opens no socket. By `deadline`
/// (`within` from the start, for the messages).
pub(crate) fn exchange(
    world: &World,
    deadline: Instant,
    within: Duration,
    make_id: impl FnOnce() -> Result<[u8; ID_BYTES]>,
) -> Result<[u8; ID_BYTES]> {
    if world.size() == 1 {
        return make_id();
    }
    if world.rank() == 0 {
        let root = Root::bind(world.master_addr(), world.exchange_port(), deadline)?;
        let id = make_id()?;
        root.serve(world.size(), &id, deadline, within)?;
        Ok(id)
    } else {
        join(
            world.master_addr(),
            world.exchange_port(),
            world.rank(),
            world.size(),
            deadline,
            within,
        )
    }
}

/// Rank 0's side: the listening socket.
pub(crate) struct Root {
    listener: TcpListener,
    /// The address listened on, for the messages.
    at: SocketAddr,
}

impl Root {
    /// Listens on `port` of every interface of the family `host` resolves to by
    /// `deadline` (IPv4 when it does not resolve). A port taken by another socket is an
    /// error saying so.
    pub(crate) fn bind(host: &str, port: u16, deadline: Instant) -> Result<Root> {
        let v6 = resolve(host, port, deadline)
            .ok()
            .and_then(|addrs| addrs.first().copied())
            .is_some_and(|a| a.is_ipv6());
        let at = if v6 {
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))
        } else {
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))
        };
        let listener = TcpListener::bind(at).map_err(|e| {
            let taken = if e.kind() == io::ErrorKind::AddrInUse {
                "the port is taken (another job, or another program, listens there): pick another MASTER_PORT"
            } else {
                "check MASTER_ADDR and MASTER_PORT"
            };
            rendezvous(format!("rank 0 cannot listen on {at}: {e}; {taken}"))
        })?;
        let at = listener.local_addr().unwrap_or(at);
        listener
            .set_nonblocking(true)
            .map_err(|e| rendezvous(format!("rank 0 cannot poll its socket {at}: {e}")))?;
        Ok(Root { listener, at })
    }

    /// The port listened on.
    #[cfg(test)]
    pub(crate) fn port(&self) -> u16 {
        self.at.port()
    }

    /// Accepts the other `size - 1` ranks, checks their hellos, and answers each with `id`,
    /// by `deadline`.
    pub(crate) fn serve(
        self,
        size: usize,
        id: &[u8; ID_BYTES],
        deadline: Instant,
        within: Duration,
    ) -> Result<()> {
        // the ranks arrived, by rank: only those (a world size is not an allocation)
        let mut arrived: BTreeMap<u64, TcpStream> = BTreeMap::new();
        let mut pause = Duration::from_millis(1);
        while arrived.len() + 1 < size {
            // checked before every accept, not only when none waits: a stream of
            // connections must not keep rank 0 past the deadline
            if Instant::now() >= deadline {
                let why = missing(&arrived, size, self.at, within);
                refuse_all(&mut arrived, &why);
                return Err(timeout(why));
            }
            let (mut stream, from) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(pause.min(left(deadline)));
                    pause = (pause * 2).min(Duration::from_millis(20));
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let why = format!("rank 0 could not accept on {}: {e}", self.at);
                    refuse_all(&mut arrived, &why);
                    return Err(rendezvous(why));
                }
            };
            let Some((rank, their_size)) = read_hello(&mut stream, deadline) else {
                continue; // not a rank of this protocol: ignore it
            };
            let why = if their_size != size as u64 {
                Some(format!(
                    "rank {rank} (from {from}) says the world has {their_size} ranks, rank 0 says {size}: the ranks disagree about the world size (WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE)"
                ))
            } else if rank == 0 || rank >= size as u64 {
                Some(format!(
                    "a rank from {from} says it is rank {rank}, which is not a rank from 1 to {} of a world of {size}",
                    size - 1
                ))
            } else if arrived.contains_key(&rank) {
                Some(format!(
                    "rank {rank} arrived twice (again from {from}): two processes were given the same rank"
                ))
            } else {
                None
            };
            if let Some(why) = why {
                let _ = write_answer(&mut stream, Err(&why), deadline);
                refuse_all(&mut arrived, &why);
                return Err(rendezvous(why));
            }
            arrived.insert(rank, stream);
        }
        for (rank, stream) in &mut arrived {
            write_answer(stream, Ok(id), deadline).map_err(|e| {
                rendezvous(format!("rank 0 could not send the id to rank {rank}: {e}"))
            })?;
        }
        Ok(())
    }
}

/// The timeout's reason: which ranks never arrived.
fn missing(
    arrived: &BTreeMap<u64, TcpStream>,
    size: usize,
    at: SocketAddr,
    within: Duration,
) -> String {
    // the first 8 absent ranks are among the first `arrived.len() + 8`
    let absent = size - 1 - arrived.len();
    let mut list: Vec<String> = (1..size as u64)
        .filter(|r| !arrived.contains_key(r))
        .take(8)
        .map(|r| r.to_string())
        .collect();
    if absent > 8 {
        list.push(format!("and {} more", absent - 8));
    }
    let word = if absent == 1 { "rank" } else { "ranks" };
    format!(
        "{word} {} of {size} did not arrive at rank 0 ({at}) within {within:?}: not started, started with another MASTER_ADDR or MASTER_PORT, or a world size larger than the ranks started",
        list.join(", ")
    )
}

/// Tells every rank that arrived why the world failed.
fn refuse_all(arrived: &mut BTreeMap<u64, TcpStream>, why: &str) {
    let soon = Instant::now() + Duration::from_millis(500);
    for stream in arrived.values_mut() {
        let _ = write_answer(stream, Err(why), soon);
    }
}

/// Reads a hello: `(rank, size)`, or `None` for anything else (closed, another protocol,
/// or slower than 2 s: a rank says hello as soon as it is connected, so that only holds up
/// rank 0 for a connection that is not a rank's).
fn read_hello(stream: &mut TcpStream, deadline: Instant) -> Option<(u64, u64)> {
    stream.set_nonblocking(false).ok()?;
    let until = deadline.min(Instant::now() + Duration::from_secs(2));
    let mut hello = [0u8; HELLO_BYTES];
    read_by(stream, &mut hello, until).ok()?;
    if hello[..8] != MAGIC || u32::from_be_bytes(hello[8..12].try_into().ok()?) != PROTOCOL {
        return None;
    }
    let rank = u64::from_be_bytes(hello[12..20].try_into().ok()?);
    let size = u64::from_be_bytes(hello[20..28].try_into().ok()?);
    Some((rank, size))
}

fn write_answer(
    stream: &mut TcpStream,
    answer: std::result::Result<&[u8; ID_BYTES], &str>,
    deadline: Instant,
) -> io::Result<()> {
    let mut bytes = MAGIC.to_vec();
    match answer {
        Ok(id) => {
            bytes.push(0);
            bytes.extend_from_slice(id);
        }
        Err(why) => {
            let why = &why.as_bytes()[..why.len().min(MAX_WHY as usize)];
            bytes.push(1);
            bytes.extend_from_slice(&(why.len() as u32).to_be_bytes());
            bytes.extend_from_slice(why);
        }
    }
    write_by(stream, &bytes, deadline)
}

/// Another rank's side: connects to rank 0 at `host:port` (again until `deadline`), says
/// hello, and returns the id rank 0 answers.
pub(crate) fn join(
    host: &str,
    port: u16,
    rank: usize,
    size: usize,
    deadline: Instant,
    within: Duration,
) -> Result<[u8; ID_BYTES]> {
    let mut stream = connect(host, port, deadline, within)?;
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&PROTOCOL.to_be_bytes());
    hello.extend_from_slice(&(rank as u64).to_be_bytes());
    hello.extend_from_slice(&(size as u64).to_be_bytes());
    if let Err(e) = write_by(&mut stream, &hello, deadline) {
        return Err(rendezvous(format!(
            "rank {rank} could not say hello to rank 0 at {host}:{port}: {e}"
        )));
    }
    read_answer(&mut stream, host, port, rank, deadline, within)
}

/// Connects to `host:port`, trying again every 50 ms (rank 0 may start later, and a host
/// name may not resolve yet) until `deadline`.
fn connect(host: &str, port: u16, deadline: Instant, within: Duration) -> Result<TcpStream> {
    let mut last = String::from("nothing tried");
    loop {
        match resolve(host, port, deadline) {
            Ok(addrs) => {
                for addr in addrs {
                    let limit = left(deadline).min(Duration::from_secs(2));
                    match TcpStream::connect_timeout(&addr, limit) {
                        Ok(stream) => return Ok(stream),
                        Err(e) => last = format!("{addr}: {e}"),
                    }
                }
            }
            Err(e) => last = format!("{host} does not resolve: {e}"),
        }
        if Instant::now() >= deadline {
            return Err(timeout(format!(
                "rank 0 (the master, {host}:{port}) did not answer within {within:?} (last try: {last}): not started, or MASTER_ADDR or MASTER_PORT is not rank 0's"
            )));
        }
        std::thread::sleep(left(deadline).min(Duration::from_millis(50)));
    }
}

fn read_answer(
    stream: &mut TcpStream,
    host: &str,
    port: u16,
    rank: usize,
    deadline: Instant,
    within: Duration,
) -> Result<[u8; ID_BYTES]> {
    let failed = |e: io::Error| {
        if matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            timeout(format!(
                "rank {rank}: rank 0 at {host}:{port} sent no id within {within:?}: it was still waiting for other ranks"
            ))
        } else {
            rendezvous(format!(
                "rank {rank}: rank 0 at {host}:{port} closed the connection without an id ({e}): it failed, or another program listens there"
            ))
        }
    };
    let mut head = [0u8; 9];
    read_by(stream, &mut head, deadline).map_err(failed)?;
    if head[..8] != MAGIC {
        return Err(rendezvous(format!(
            "rank {rank}: what listens at {host}:{port} is not rank 0 of this protocol"
        )));
    }
    if head[8] == 0 {
        let mut id = [0u8; ID_BYTES];
        read_by(stream, &mut id, deadline).map_err(failed)?;
        return Ok(id);
    }
    let mut len = [0u8; 4];
    read_by(stream, &mut len, deadline).map_err(failed)?;
    let len = u32::from_be_bytes(len).min(MAX_WHY);
    let mut why = vec![0u8; len as usize];
    read_by(stream, &mut why, deadline).map_err(failed)?;
    Err(rendezvous(format!(
        "rank 0 at {host}:{port} refused rank {rank}: {}",
        String::from_utf8_lossy(&why)
    )))
}

#[cfg(test)]
mod tests {
    //! The exchange between threads of this process, with fake ids: no GPU, no NCCL.

    use super::*;
    use std::thread;

    const SECOND: Duration = Duration::from_secs(1);

    fn id(byte: u8) -> [u8; ID_BYTES] {
        let mut id = [byte; ID_BYTES];
        id[0] = 2;
        id
    }

    fn detail(e: &Error) -> &str {
        e.detail().unwrap()
    }

    fn far() -> Instant {
        Instant::now() + 10 * SECOND
    }

    #[test]
    fn addresses_resolve_by_the_deadline() {
        let port = 29500;
        for (host, addr) in [
            ("127.0.0.1", "127.0.0.1:29500"),
            ("::1", "[::1]:29500"),
            ("[::1]", "[::1]:29500"),
            (" 10.0.0.5 ", "10.0.0.5:29500"),
        ] {
            let got = resolve(host, port, Instant::now()).unwrap();
            assert_eq!(got, [addr.parse::<SocketAddr>().unwrap()], "{host}");
        }
        // a name, with no time left: an error at once (not a wait for the resolver)
        let start = Instant::now();
        assert!(resolve("nowhere.invalid", port, start).is_err());
        assert!(start.elapsed() < SECOND, "{:?}", start.elapsed());
    }

    /// Rank 0 on an ephemeral port of this machine.
    fn root() -> (Root, u16) {
        let root = Root::bind("127.0.0.1", 0, far()).unwrap();
        let port = root.port();
        (root, port)
    }

    #[test]
    fn every_rank_gets_rank_zeros_id() {
        let (root, port) = root();
        let deadline = Instant::now() + 10 * SECOND;
        let ranks: Vec<_> = (1..4)
            .map(|rank| {
                thread::spawn(move || join("127.0.0.1", port, rank, 4, deadline, 10 * SECOND))
            })
            .collect();
        root.serve(4, &id(7), deadline, 10 * SECOND).unwrap();
        for r in ranks {
            assert_eq!(r.join().unwrap().unwrap(), id(7));
        }
    }

    #[test]
    fn a_rank_started_before_rank_zero_waits_for_it() {
        let (root, port) = root();
        let addr_free = root.port();
        drop(root); // nobody listens now
        let deadline = Instant::now() + 10 * SECOND;
        let early = thread::spawn(move || join("127.0.0.1", port, 1, 2, deadline, 10 * SECOND));
        thread::sleep(Duration::from_millis(300));
        let root = Root::bind("127.0.0.1", addr_free, far()).unwrap();
        root.serve(2, &id(9), deadline, 10 * SECOND).unwrap();
        assert_eq!(early.join().unwrap().unwrap(), id(9));
    }

    #[test]
    fn a_world_of_one_opens_no_socket() {
        let world = World::new(0, 1, 0, "nowhere.invalid", 1).unwrap();
        let got = exchange(&world, Instant::now(), SECOND, || Ok(id(3))).unwrap();
        assert_eq!(got, id(3));
    }

    #[test]
    fn a_rank_that_never_arrives_is_a_timeout_naming_it() {
        let (root, _) = root();
        let within = Duration::from_millis(400);
        let start = Instant::now();
        let e = root.serve(3, &id(1), start + within, within).unwrap_err();
        let took = start.elapsed();
        assert!(took >= within && took < within + SECOND, "{took:?}");
        assert_eq!(e.code(), ErrorCode::NcclTimeout, "{e}");
        assert_eq!(e.call(), CALL);
        assert!(
            detail(&e).starts_with("ranks 1, 2 of 3 did not arrive at rank 0 (0.0.0.0:"),
            "{e}"
        );
        assert!(detail(&e).contains("within 400ms"), "{e}");
    }

    #[test]
    fn rank_zero_that_never_answers_is_a_timeout() {
        let (root, port) = root();
        drop(root);
        let within = Duration::from_millis(400);
        let start = Instant::now();
        let e = join("127.0.0.1", port, 1, 2, start + within, within).unwrap_err();
        assert!(start.elapsed() < within + SECOND);
        assert_eq!(e.code(), ErrorCode::NcclTimeout, "{e}");
        assert!(
            detail(&e).starts_with(&format!(
                "rank 0 (the master, 127.0.0.1:{port}) did not answer within 400ms"
            )),
            "{e}"
        );
    }

    #[test]
    fn a_wrong_world_size_fails_both_sides_naming_it() {
        let (root, port) = root();
        let deadline = Instant::now() + 10 * SECOND;
        let rank1 = thread::spawn(move || join("127.0.0.1", port, 1, 3, deadline, 10 * SECOND));
        let e = root.serve(2, &id(1), deadline, 10 * SECOND).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NcclRendezvous, "{e}");
        assert!(detail(&e).starts_with("rank 1 (from 127.0.0.1:"), "{e}");
        assert!(
            detail(&e).contains("says the world has 3 ranks, rank 0 says 2"),
            "{e}"
        );
        let theirs = rank1.join().unwrap().unwrap_err();
        assert_eq!(theirs.code(), ErrorCode::NcclRendezvous, "{theirs}");
        assert!(
            detail(&theirs).starts_with(&format!(
                "rank 0 at 127.0.0.1:{port} refused rank 1: rank 1 (from"
            )),
            "{theirs}"
        );
        assert!(detail(&theirs).contains("says the world has 3 ranks, rank 0 says 2"));
    }

    #[test]
    fn a_rank_given_twice_is_refused_and_so_are_the_others() {
        let (root, port) = root();
        let deadline = Instant::now() + 10 * SECOND;
        let first = thread::spawn(move || join("127.0.0.1", port, 1, 3, deadline, 10 * SECOND));
        thread::sleep(Duration::from_millis(300)); // the first one arrives first
        let second = thread::spawn(move || join("127.0.0.1", port, 1, 3, deadline, 10 * SECOND));
        let e = root.serve(3, &id(1), deadline, 10 * SECOND).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NcclRendezvous);
        assert!(detail(&e).starts_with("rank 1 arrived twice"), "{e}");
        for r in [first, second] {
            let e = r.join().unwrap().unwrap_err();
            assert!(detail(&e).contains("rank 1 arrived twice"), "{e}");
        }
    }

    #[test]
    fn a_rank_out_of_range_is_refused() {
        let (root, port) = root();
        let deadline = Instant::now() + 10 * SECOND;
        let rank = thread::spawn(move || join("127.0.0.1", port, 5, 2, deadline, 10 * SECOND));
        let e = root.serve(5, &id(1), deadline, 10 * SECOND).unwrap_err();
        assert!(detail(&e).contains("says the world has 2 ranks"), "{e}");
        assert!(rank.join().unwrap().is_err());
        let (root, port) = super::tests::root();
        let rank = thread::spawn(move || join("127.0.0.1", port, 0, 2, deadline, 10 * SECOND));
        let e = root.serve(2, &id(1), deadline, 10 * SECOND).unwrap_err();
        assert!(
            detail(&e).contains("says it is rank 0, which is not a rank from 1 to 1"),
            "{e}"
        );
        assert!(rank.join().unwrap().is_err());
    }

    #[test]
    fn a_taken_port_is_an_error_naming_it() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = match Root::bind("127.0.0.1", port, far()) {
            Ok(_) => panic!("bound a taken port"),
            Err(e) => e,
        };
        assert_eq!(e.code(), ErrorCode::NcclRendezvous, "{e}");
        assert!(
            detail(&e).starts_with(&format!("rank 0 cannot listen on 0.0.0.0:{port}: ")),
            "{e}"
        );
        assert!(detail(&e).ends_with("the port is taken (another job, or another program, listens there): pick another MASTER_PORT"), "{e}");
    }

    #[test]
    fn strangers_on_the_port_are_ignored() {
        let (root, port) = root();
        let deadline = Instant::now() + 10 * SECOND;
        let stranger = thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        });
        thread::sleep(Duration::from_millis(200));
        let rank = thread::spawn(move || join("127.0.0.1", port, 1, 2, deadline, 10 * SECOND));
        root.serve(2, &id(4), deadline, 10 * SECOND).unwrap();
        assert_eq!(rank.join().unwrap().unwrap(), id(4));
        stranger.join().unwrap();
    }
    /// A connection to `port` that sends `bytes` one at a time, one every 100 ms.
    fn trickle(port: u16, bytes: Vec<u8>) {
        thread::spawn(move || {
            let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
                return;
            };
            for b in bytes {
                if s.write_all(&[b]).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
    }

    #[test]
    fn a_stranger_trickling_bytes_does_not_hold_rank_zero_past_its_deadline() {
        let (root, port) = root();
        trickle(port, vec![b'x'; 40]);
        let within = Duration::from_millis(300);
        let start = Instant::now();
        let e = root.serve(2, &id(1), start + within, within).unwrap_err();
        let took = start.elapsed();
        assert!(took < within + Duration::from_millis(700), "{took:?}");
        assert_eq!(e.code(), ErrorCode::NcclTimeout, "{e}");
    }

    #[test]
    fn a_listener_trickling_bytes_does_not_hold_a_rank_past_its_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            // a refusal of 65,535 bytes, one byte every 100 ms
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
            bytes.extend_from_slice(&[b'w'; 100]);
            for b in bytes {
                if s.write_all(&[b]).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
        let within = Duration::from_millis(300);
        let start = Instant::now();
        let e = join("127.0.0.1", port, 1, 2, start + within, within).unwrap_err();
        let took = start.elapsed();
        assert!(took < within + Duration::from_millis(700), "{took:?}");
        assert_eq!(e.code(), ErrorCode::NcclTimeout, "{e}");
    }

    #[test]
    fn a_huge_world_size_costs_rank_zero_nothing_per_absent_rank() {
        let (root, _) = root();
        let within = Duration::from_millis(200);
        let start = Instant::now();
        let e = root
            .serve(i32::MAX as usize, &id(1), start + within, within)
            .unwrap_err();
        assert!(start.elapsed() < within + SECOND, "{:?}", start.elapsed());
        assert_eq!(e.code(), ErrorCode::NcclTimeout, "{e}");
        assert!(
            detail(&e).starts_with(
                "ranks 1, 2, 3, 4, 5, 6, 7, 8, and 2147483638 more of 2147483647 did not arrive"
            ),
            "{e}"
        );
    }
}
