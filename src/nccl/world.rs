//! [`World`]: this process's place among the processes of a job, as its launcher describes
//! it in the environment (`torchrun` and other launchers with PyTorch's variables, Open
//! MPI's `mpirun`, Slurm's `srun`), read by a pure parser that tests feed with maps.

use std::fmt;

use crate::context::Device;
use crate::error::{Error, ErrorCode, Invalid, Result};

/// The port of the master when the launcher names none (Slurm, Open MPI without
/// `MASTER_PORT`): 29500, PyTorch's default.
///
/// ```
/// use cuda_brand::nccl::{DEFAULT_MASTER_PORT, World};
/// let vars = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2"), ("SLURM_LOCALID", "0"), ("SLURM_NODELIST", "a1")];
/// let world = World::from_vars(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()))?;
/// assert_eq!(world.master_port(), DEFAULT_MASTER_PORT);
/// # Ok::<(), cuda_brand::Error>(())
/// ```
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// Which launcher described the world ([`World::launcher`]).
///
/// ```
/// use cuda_brand::nccl::{Launcher, World};
/// let vars = [("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2"),
///             ("OMPI_COMM_WORLD_LOCAL_RANK", "1"), ("OMPI_COMM_WORLD_LOCAL_SIZE", "2")];
/// let world = World::from_vars(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()))?;
/// assert_eq!(world.launcher(), Launcher::OpenMpi);
/// assert_eq!(world.master_addr(), "127.0.0.1"); // one machine
/// # Ok::<(), cuda_brand::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Launcher {
    /// PyTorch's variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`,
    /// `MASTER_PORT`): `torchrun`, `torch.distributed.launch`, and any launcher or script
    /// that sets them.
    Torchrun,
    /// Open MPI's `mpirun` (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`,
    /// `OMPI_COMM_WORLD_LOCAL_RANK`, `OMPI_COMM_WORLD_LOCAL_SIZE`).
    OpenMpi,
    /// Slurm's `srun` (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, the node list).
    Slurm,
    /// None of them: a world of one process (rank 0 of 1, on the local machine).
    Single,
    /// Given by the program ([`World::new`]).
    Given,
}

/// This process's place in a job of several processes (the *world*): its rank, the number
/// of ranks, its rank among the processes of its machine (which picks its GPU:
/// [`World::device`]) and the address of rank 0's machine (the *master*), where the ranks
/// meet to exchange NCCL's unique id.
///
/// [`World::from_env`] reads it from the variables a launcher sets, in this order (the
/// first whose rank variable is set wins):
///
/// | launcher | rank, size, local rank | master |
/// |---|---|---|
/// | `torchrun` (PyTorch's variables) | `RANK`, `WORLD_SIZE`, `LOCAL_RANK` | `MASTER_ADDR`, `MASTER_PORT` |
/// | Open MPI (`mpirun`) | `OMPI_COMM_WORLD_RANK`, `_SIZE`, `_LOCAL_RANK` | `MASTER_ADDR` (`127.0.0.1` when `OMPI_COMM_WORLD_LOCAL_SIZE` equals the size: one machine), `MASTER_PORT` or 29500 |
/// | Slurm (`srun`) | `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID` | `MASTER_ADDR`, else the first host of `SLURM_STEP_NODELIST`, `SLURM_JOB_NODELIST` or `SLURM_NODELIST`; `MASTER_PORT` or 29500 |
/// | none of them | rank 0 of 1, local rank 0 | `127.0.0.1` (no socket is opened for one rank) |
///
/// Open MPI comes before Slurm because `mpirun` inside a Slurm allocation starts its
/// processes with the allocation's `SLURM_PROCID` (0, or the daemon's node), which is not
/// the rank. A variable that is set but wrong (not a number, a rank not below the size, a
/// size of 0, PyTorch's set given in part, a value that is not UTF-8) is an error naming
/// the variable and its value, never a silent world of one.
///
/// ```
/// use cuda_brand::nccl::{Launcher, World};
/// use std::collections::HashMap;
///
/// let vars = HashMap::from([
///     ("SLURM_PROCID", "5"),
///     ("SLURM_NTASKS", "8"),
///     ("SLURM_LOCALID", "1"),
///     ("SLURM_JOB_NODELIST", "gpu[07-10]"),
/// ]);
/// let world = World::from_vars(|name| vars.get(name).map(|v| v.to_string()))?;
/// assert_eq!((world.rank(), world.size(), world.local_rank()), (5, 8, 1));
/// assert_eq!((world.master_addr(), world.master_port()), ("gpu07", 29500));
/// assert_eq!(world.launcher(), Launcher::Slurm);
///
/// // nothing set: one process
/// let alone = World::from_vars(|_| None)?;
/// assert_eq!((alone.rank(), alone.size(), alone.launcher()), (0, 1, Launcher::Single));
/// # Ok::<(), cuda_brand::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World {
    rank: usize,
    size: usize,
    local_rank: usize,
    master_addr: String,
    master_port: u16,
    /// The port of the id's exchange ([`World::exchange_port`]).
    exchange_port: u16,
    launcher: Launcher,
}

const FROM_ENV: &str = "World::from_env";

impl World {
    /// The world the launcher of this process describes in its environment (see the
    /// [table](World)); a world of one process when no launcher's variables are set.
    ///
    /// A variable the parser reads whose value is not UTF-8 is an error naming it, never
    /// taken for unset (which would make every process of the job a world of one).
    pub fn from_env() -> Result<World> {
        from_lookup(|name| std::env::var_os(name))
    }

    /// The world that `lookup` (a variable's name to its value, `None` when unset)
    /// describes, read as [`World::from_env`] reads the environment: for tests, and for
    /// programs that take the variables from elsewhere.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<World> {
        let lookup = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        if lookup("RANK").is_some() || lookup("WORLD_SIZE").is_some() {
            torchrun(&lookup)
        } else if lookup("OMPI_COMM_WORLD_RANK").is_some() {
            open_mpi(&lookup)
        } else if lookup("SLURM_PROCID").is_some() {
            slurm(&lookup)
        } else {
            Ok(World::single())
        }
    }

    /// The world of one process: rank 0 of 1, local rank 0, master `127.0.0.1`.
    ///
    /// ```
    /// let one = cuda_brand::nccl::World::single();
    /// assert_eq!((one.rank(), one.size(), one.local_rank()), (0, 1, 0));
    /// ```
    pub fn single() -> World {
        World {
            rank: 0,
            size: 1,
            local_rank: 0,
            master_addr: "127.0.0.1".to_owned(),
            master_port: DEFAULT_MASTER_PORT,
            exchange_port: DEFAULT_MASTER_PORT,
            launcher: Launcher::Single,
        }
    }

    /// A world the program describes: rank `rank` of `size`, `local_rank` among the ranks of
    /// this machine, rank 0's machine at `master_addr:master_port` (a host name or an IP
    /// address). `rank < size` and a port other than 0 are checked.
    ///
    /// ```
    /// let w = cuda_brand::nccl::World::new(1, 2, 1, "10.0.0.5", 29500)?;
    /// assert_eq!(w.to_string(), "rank 1 of 2 (local rank 1), master 10.0.0.5:29500 (given)");
    /// # Ok::<(), cuda_brand::Error>(())
    /// ```
    pub fn new(
        rank: usize,
        size: usize,
        local_rank: usize,
        master_addr: impl Into<String>,
        master_port: u16,
    ) -> Result<World> {
        if size == 0 || rank >= size || size > i32::MAX as usize {
            return Err(Error::invalid_input(
                "World::new",
                Invalid::argument(format!(
                    "rank {rank} of {size}: a world has 1 or more ranks, numbered from 0"
                )),
            ));
        }
        if master_port == 0 {
            return Err(Error::invalid_input(
                "World::new",
                Invalid::argument(
                    "port 0 is not a master's port (1 to 65535): the other ranks could not connect to it",
                ),
            ));
        }
        Ok(World {
            rank,
            size,
            local_rank,
            master_addr: master_addr.into(),
            master_port,
            exchange_port: master_port,
            launcher: Launcher::Given,
        })
    }

    /// This process's rank, from 0.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks (processes) in the world.
    pub fn size(&self) -> usize {
        self.size
    }

    /// This process's rank among the ranks of its machine, from 0.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// The host name or address of rank 0's machine.
    pub fn master_addr(&self) -> &str {
        &self.master_addr
    }

    /// The master's port the launcher names (`MASTER_PORT`, or 29500).
    pub fn master_port(&self) -> u16 {
        self.master_port
    }

    /// The port where rank 0 listens for the other ranks while they exchange NCCL's id
    /// (when `NCCL_COMM_ID` is unset): the [master port](World::master_port), except under
    /// `torchrun`'s agent store (`TORCHELASTIC_USE_AGENT_STORE=True`, which `torchrun`
    /// sets by default), where `torchrun`'s own store already serves the master port: then
    /// the port after it.
    ///
    /// ```
    /// use cuda_brand::nccl::World;
    /// let vars = [
    ///     ("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"),
    ///     ("MASTER_ADDR", "node01"), ("MASTER_PORT", "29500"),
    ///     ("TORCHELASTIC_USE_AGENT_STORE", "True"),
    /// ];
    /// let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    /// let world = World::from_vars(lookup)?;
    /// assert_eq!((world.master_port(), world.exchange_port()), (29500, 29501));
    /// # Ok::<(), cuda_brand::Error>(())
    /// ```
    pub fn exchange_port(&self) -> u16 {
        self.exchange_port
    }

    /// Which launcher described the world.
    pub fn launcher(&self) -> Launcher {
        self.launcher
    }

    /// The GPU of this rank, picked by its local rank: device `local_rank` when there are
    /// that many, else device 0 when the process sees one device only (as `srun
    /// --gpus-per-task=1` or a per-rank `CUDA_VISIBLE_DEVICES` leave it). More local ranks
    /// than devices, with several devices visible, is an error: give each rank its own GPU.
    ///
    /// ```no_run
    /// let world = cuda_brand::nccl::World::from_env()?;
    /// let device = world.device()?;
    /// println!("rank {} of {} on GPU {}", world.rank(), world.size(), device.ordinal());
    /// # Ok::<(), cuda_brand::Error>(())
    /// ```
    pub fn device(&self) -> Result<Device> {
        let count = Device::count()?;
        match pick_device(self.local_rank, count) {
            Some(ordinal) => Device::get(ordinal),
            None => Err(Error::with_detail(
                "World::device",
                ErrorCode::InvalidDevice,
                format!(
                    "local rank {} but this process sees {count} devices: start at most one rank per GPU on each machine, or give each rank one GPU (CUDA_VISIBLE_DEVICES)",
                    self.local_rank
                ),
            )),
        }
    }
}

/// The ordinal [`World::device`] picks for `local_rank` among `count` devices.
fn pick_device(local_rank: usize, count: usize) -> Option<usize> {
    if local_rank < count {
        Some(local_rank)
    } else if count == 1 {
        Some(0)
    } else {
        None
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let launcher = match self.launcher {
            Launcher::Torchrun => "torchrun's variables",
            Launcher::OpenMpi => "Open MPI",
            Launcher::Slurm => "Slurm",
            Launcher::Single => "no launcher: one process",
            Launcher::Given => "given",
        };
        write!(
            f,
            "rank {} of {} (local rank {}), master {}:{} ({launcher})",
            self.rank, self.size, self.local_rank, self.master_addr, self.master_port
        )
    }
}

fn bad(detail: String) -> Error {
    Error::invalid_input(FROM_ENV, Invalid::argument(detail))
}

/// The variable `name`, required.
fn required(lookup: &dyn Fn(&str) -> Option<String>, name: &str, why: &str) -> Result<String> {
    lookup(name).ok_or_else(|| bad(format!("{name} is not set ({why})")))
}

/// `value` of `name` as a number.
fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| bad(format!("{name}={value:?} is not a number")))
}

/// Checks a rank against a size, both from the variables named.
fn ranked(rank: (&str, usize), size: (&str, usize), local: usize) -> Result<(usize, usize, usize)> {
    if size.1 == 0 || size.1 > i32::MAX as usize {
        return Err(bad(format!(
            "{}={} is not a world size (1 to {})",
            size.0,
            size.1,
            i32::MAX
        )));
    }
    if rank.1 >= size.1 {
        return Err(bad(format!(
            "{}={} is not a rank of a world of {}={} (ranks 0 to {})",
            rank.0,
            rank.1,
            size.0,
            size.1,
            size.1 - 1
        )));
    }
    Ok((rank.1, size.1, local))
}

fn master_port(lookup: &dyn Fn(&str) -> Option<String>) -> Result<u16> {
    match lookup("MASTER_PORT") {
        Some(port) => port_number(&port),
        None => Ok(DEFAULT_MASTER_PORT),
    }
}

fn port_number(value: &str) -> Result<u16> {
    match value.trim().parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(bad(format!(
            "MASTER_PORT={value:?} is not a port (1 to 65535)"
        ))),
    }
}

fn torchrun(lookup: &dyn Fn(&str) -> Option<String>) -> Result<World> {
    const WHY: &str = "torchrun sets RANK, WORLD_SIZE and LOCAL_RANK together";
    let rank = required(lookup, "RANK", WHY)?;
    let size = required(lookup, "WORLD_SIZE", WHY)?;
    let local = required(lookup, "LOCAL_RANK", WHY)?;
    let (rank, size, local_rank) = ranked(
        ("RANK", number("RANK", &rank)?),
        ("WORLD_SIZE", number("WORLD_SIZE", &size)?),
        number("LOCAL_RANK", &local)?,
    )?;
    let (master_addr, master_port) = if size == 1 {
        let addr = lookup("MASTER_ADDR").unwrap_or_else(|| "127.0.0.1".to_owned());
        (addr, master_port(lookup)?)
    } else {
        const MASTER: &str = "the ranks meet at MASTER_ADDR:MASTER_PORT, rank 0's machine";
        let addr = required(lookup, "MASTER_ADDR", MASTER)?;
        let port = required(lookup, "MASTER_PORT", MASTER)?;
        (addr, port_number(&port)?)
    };
    // torchrun's agent keeps serving its store on MASTER_PORT for the workers
    let agent_store = lookup("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.trim() == "True");
    let exchange_port = if agent_store && size > 1 {
        master_port.checked_add(1).ok_or_else(|| {
            bad(format!(
                "MASTER_PORT={master_port} is torchrun's store (TORCHELASTIC_USE_AGENT_STORE=True), and the ranks exchange NCCL's id on the port after it, which does not exist: give torchrun another --master-port"
            ))
        })?
    } else {
        master_port
    };
    Ok(World {
        rank,
        size,
        local_rank,
        master_addr: master_addr.trim().to_owned(),
        master_port,
        exchange_port,
        launcher: Launcher::Torchrun,
    })
}

fn open_mpi(lookup: &dyn Fn(&str) -> Option<String>) -> Result<World> {
    const WHY: &str =
        "mpirun sets OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK and _LOCAL_SIZE together";
    let rank = required(lookup, "OMPI_COMM_WORLD_RANK", WHY)?;
    let size = required(lookup, "OMPI_COMM_WORLD_SIZE", WHY)?;
    let local = required(lookup, "OMPI_COMM_WORLD_LOCAL_RANK", WHY)?;
    let (rank, size, local_rank) = ranked(
        (
            "OMPI_COMM_WORLD_RANK",
            number("OMPI_COMM_WORLD_RANK", &rank)?,
        ),
        (
            "OMPI_COMM_WORLD_SIZE",
            number("OMPI_COMM_WORLD_SIZE", &size)?,
        ),
        number("OMPI_COMM_WORLD_LOCAL_RANK", &local)?,
    )?;
    let local_size = match lookup("OMPI_COMM_WORLD_LOCAL_SIZE") {
        Some(v) => Some(number::<usize>("OMPI_COMM_WORLD_LOCAL_SIZE", &v)?),
        None => None,
    };
    let master_addr = match lookup("MASTER_ADDR") {
        Some(addr) => addr.trim().to_owned(),
        None if size == 1 || local_size == Some(size) => "127.0.0.1".to_owned(),
        None => {
            return Err(bad(format!(
                "MASTER_ADDR is not set: Open MPI names no master, and its {size} ranks are on several machines (OMPI_COMM_WORLD_LOCAL_SIZE={}); pass rank 0's host with mpirun -x MASTER_ADDR=<host>",
                local_size.map_or("unset".to_owned(), |n| n.to_string())
            )));
        }
    };
    let port = master_port(lookup)?;
    Ok(World {
        rank,
        size,
        local_rank,
        master_addr,
        master_port: port,
        exchange_port: port,
        launcher: Launcher::OpenMpi,
    })
}

fn slurm(lookup: &dyn Fn(&str) -> Option<String>) -> Result<World> {
    const WHY: &str = "srun sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID together";
    let rank = required(lookup, "SLURM_PROCID", WHY)?;
    let size = required(lookup, "SLURM_NTASKS", WHY)?;
    let local = required(lookup, "SLURM_LOCALID", WHY)?;
    let (rank, size, local_rank) = ranked(
        ("SLURM_PROCID", number("SLURM_PROCID", &rank)?),
        ("SLURM_NTASKS", number("SLURM_NTASKS", &size)?),
        number("SLURM_LOCALID", &local)?,
    )?;
    let master_addr = match lookup("MASTER_ADDR") {
        Some(addr) => addr.trim().to_owned(),
        None => {
            let (name, list) = ["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"]
                .into_iter()
                .find_map(|name| lookup(name).map(|list| (name, list)))
                .ok_or_else(|| {
                    bad("neither MASTER_ADDR nor SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or SLURM_NODELIST is set: the ranks meet at rank 0's machine".to_owned())
                })?;
            first_host(&list)
                .ok_or_else(|| bad(format!("{name}={list:?} is not a Slurm host list")))?
        }
    };
    let port = master_port(lookup)?;
    Ok(World {
        rank,
        size,
        local_rank,
        master_addr,
        master_port: port,
        exchange_port: port,
        launcher: Launcher::Slurm,
    })
}

/// The first host of a Slurm host list: `node07` of `node07`, `node07,node08`,
/// `node[07-10,12]`, `gpu-a[3,5],gpu-b1`, and of several ranges in one name
/// (`rack[1-2]-n[01-04]` is `rack1-n01`). `None` for an empty or unbalanced list.
pub(crate) fn first_host(list: &str) -> Option<String> {
    let list = list.trim();
    // the first item: up to the first comma outside brackets
    let mut depth = 0usize;
    let mut end = list.len();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let item = &list[..end];
    // each bracket becomes the first number of its first range
    let mut host = String::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        host.push_str(&rest[..open]);
        let close = open + rest[open..].find(']')?;
        let inside = &rest[open + 1..close];
        let first = inside.split([',', '-']).next()?.trim();
        if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        host.push_str(first);
        rest = &rest[close + 1..];
    }
    if rest.contains(']') {
        return None;
    }
    host.push_str(rest);
    (!host.is_empty()).then_some(host)
}

/// [`World::from_env`] with the variables read by `lookup` (the environment's bytes): the
/// first variable the parser reads whose value is not UTF-8 is an error naming it,
/// whatever the parser made of it (it sees a value with replacement characters, so it
/// never takes the variable for unset).
fn from_lookup(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<World> {
    let not_utf8: std::cell::RefCell<Option<(String, std::ffi::OsString)>> = Default::default();
    let parsed = World::from_vars(|name| {
        let value = lookup(name)?;
        match value.into_string() {
            Ok(text) => Some(text),
            Err(raw) => {
                let lossy = raw.to_string_lossy().into_owned();
                not_utf8.borrow_mut().get_or_insert((name.to_owned(), raw));
                Some(lossy)
            }
        }
    });
    match not_utf8.into_inner() {
        Some((name, raw)) => Err(not_utf8_error(FROM_ENV, &name, &raw)),
        None => parsed,
    }
}

/// The error for a variable whose value is not UTF-8.
fn not_utf8_error(call: &'static str, name: &str, raw: &std::ffi::OsStr) -> Error {
    Error::invalid_input(
        call,
        Invalid::argument(format!(
            "{name} is set to bytes that are not UTF-8 ({raw:?}): the launcher's variables are text"
        )),
    )
}

/// Whether NCCL will find `NCCL_COMM_ID` in this process's environment, where NCCL reads
/// it: then every rank derives the same unique id from it (`ncclGetUniqueId`), and rank
/// 0's NCCL serves the bootstrap at that address itself. A value that is not UTF-8 is an
/// error (NCCL would read its bytes while the crate took it for unset).
pub(crate) fn nccl_comm_id(call: &'static str) -> Result<Option<String>> {
    comm_id_of(call, std::env::var_os("NCCL_COMM_ID"))
}

/// [`nccl_comm_id`] of the value `raw`.
fn comm_id_of(call: &'static str, raw: Option<std::ffi::OsString>) -> Result<Option<String>> {
    match raw.map(std::ffi::OsString::into_string) {
        None => Ok(None),
        Some(Ok(text)) => Ok(Some(text).filter(|v| !v.trim().is_empty())),
        Some(Err(raw)) => Err(not_utf8_error(call, "NCCL_COMM_ID", &raw)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn world(vars: &[(&str, &str)]) -> Result<World> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        World::from_vars(|name| map.get(name).cloned())
    }

    /// Rank, size, local rank, master address and port.
    fn facts(w: &World) -> (usize, usize, usize, &str, u16) {
        (
            w.rank(),
            w.size(),
            w.local_rank(),
            w.master_addr(),
            w.master_port(),
        )
    }

    fn detail(e: Error) -> String {
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
        assert_eq!(e.call(), FROM_ENV);
        e.invalid().unwrap().to_string()
    }

    const TORCHRUN: &[(&str, &str)] = &[
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "node01"),
        ("MASTER_PORT", "29400"),
    ];

    #[test]
    fn torchrun_variables_give_the_world() {
        let w = world(TORCHRUN).unwrap();
        assert_eq!(facts(&w), (3, 4, 1, "node01", 29400));
        assert_eq!(w.launcher(), Launcher::Torchrun);
        assert_eq!(
            w.to_string(),
            "rank 3 of 4 (local rank 1), master node01:29400 (torchrun's variables)"
        );
    }

    #[test]
    fn torchrun_wins_over_slurm_and_open_mpi() {
        let mut vars = TORCHRUN.to_vec();
        vars.extend([
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
            ("SLURM_LOCALID", "0"),
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ]);
        assert_eq!(world(&vars).unwrap().launcher(), Launcher::Torchrun);
    }

    #[test]
    fn a_partial_or_wrong_torchrun_set_names_the_variable() {
        let without = |name: &str| -> Vec<(&str, &str)> {
            TORCHRUN
                .iter()
                .copied()
                .filter(|(k, _)| *k != name)
                .collect()
        };
        for missing in [
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
        ] {
            let d = detail(world(&without(missing)).unwrap_err());
            assert!(d.starts_with(&format!("{missing} is not set (")), "{d}");
        }
        let with = |name: &'static str, value: &'static str| -> Vec<(&'static str, &'static str)> {
            let mut v = without(name);
            v.push((name, value));
            v
        };
        for (name, value, want) in [
            ("RANK", "three", "RANK=\"three\" is not a number"),
            (
                "RANK",
                "4",
                "RANK=4 is not a rank of a world of WORLD_SIZE=4 (ranks 0 to 3)",
            ),
            (
                "WORLD_SIZE",
                "0",
                "WORLD_SIZE=0 is not a world size (1 to 2147483647)",
            ),
            ("LOCAL_RANK", "-1", "LOCAL_RANK=\"-1\" is not a number"),
            (
                "MASTER_PORT",
                "70000",
                "MASTER_PORT=\"70000\" is not a port (1 to 65535)",
            ),
            (
                "MASTER_PORT",
                "0",
                "MASTER_PORT=\"0\" is not a port (1 to 65535)",
            ),
        ] {
            let d = detail(world(&with(name, value)).unwrap_err());
            assert_eq!(d, want, "{name}={value}");
        }
    }

    #[test]
    fn under_torchruns_agent_store_the_exchange_takes_the_next_port() {
        let mut vars = TORCHRUN.to_vec();
        assert_eq!(world(&vars).unwrap().exchange_port(), 29400);
        vars.push(("TORCHELASTIC_USE_AGENT_STORE", "True"));
        let w = world(&vars).unwrap();
        assert_eq!((w.master_port(), w.exchange_port()), (29400, 29401));
        vars.retain(|(k, _)| *k != "MASTER_PORT");
        vars.push(("MASTER_PORT", "65535"));
        let d = detail(world(&vars).unwrap_err());
        assert!(
            d.starts_with("MASTER_PORT=65535 is torchrun's store"),
            "{d}"
        );
        vars.retain(|(k, _)| *k != "TORCHELASTIC_USE_AGENT_STORE");
        vars.push(("TORCHELASTIC_USE_AGENT_STORE", "False"));
        assert_eq!(world(&vars).unwrap().exchange_port(), 65535);
    }

    #[test]
    fn a_torchrun_world_of_one_needs_no_master() {
        let w = world(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")]).unwrap();
        assert_eq!(
            (w.size(), w.master_addr(), w.master_port()),
            (1, "127.0.0.1", 29500)
        );
    }

    #[test]
    fn empty_values_count_as_unset() {
        let w = world(&[("RANK", " "), ("SLURM_PROCID", "")]).unwrap();
        assert_eq!(w, World::single());
    }

    #[test]
    fn nothing_set_is_a_world_of_one() {
        let w = world(&[("PATH", "/usr/bin")]).unwrap();
        assert_eq!(w, World::single());
        assert_eq!((w.rank(), w.size(), w.local_rank()), (0, 1, 0));
        assert_eq!(w.launcher(), Launcher::Single);
    }

    const SLURM: &[(&str, &str)] = &[
        ("SLURM_PROCID", "6"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_LOCALID", "2"),
        ("SLURM_JOB_NODELIST", "node[01-04,07]"),
    ];

    #[test]
    fn slurm_gives_the_first_node_and_the_default_port() {
        let w = world(SLURM).unwrap();
        assert_eq!(facts(&w), (6, 8, 2, "node01", DEFAULT_MASTER_PORT));
        assert_eq!(w.launcher(), Launcher::Slurm);
        // the step's list first; MASTER_ADDR and MASTER_PORT override
        let mut vars = SLURM.to_vec();
        vars.push(("SLURM_STEP_NODELIST", "gpu-a[3,5],gpu-b1"));
        assert_eq!(world(&vars).unwrap().master_addr(), "gpu-a3");
        vars.extend([("MASTER_ADDR", "10.1.2.3"), ("MASTER_PORT", "12345")]);
        let w = world(&vars).unwrap();
        assert_eq!((w.master_addr(), w.master_port()), ("10.1.2.3", 12345));
        // SLURM_NODELIST alone
        let w = world(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODELIST", "solo"),
        ])
        .unwrap();
        assert_eq!(w.master_addr(), "solo");
    }

    #[test]
    fn slurm_errors_name_the_variable() {
        let mut no_local: Vec<_> = SLURM.to_vec();
        no_local.retain(|(k, _)| *k != "SLURM_LOCALID");
        assert!(detail(world(&no_local).unwrap_err()).starts_with("SLURM_LOCALID is not set ("),);
        let mut no_list: Vec<_> = SLURM.to_vec();
        no_list.retain(|(k, _)| *k != "SLURM_JOB_NODELIST");
        assert!(detail(world(&no_list).unwrap_err()).starts_with("neither MASTER_ADDR nor"));
        let mut bad_list: Vec<_> = SLURM.to_vec();
        bad_list.retain(|(k, _)| *k != "SLURM_JOB_NODELIST");
        bad_list.push(("SLURM_JOB_NODELIST", "node[01-"));
        assert_eq!(
            detail(world(&bad_list).unwrap_err()),
            "SLURM_JOB_NODELIST=\"node[01-\" is not a Slurm host list"
        );
        let mut beyond: Vec<_> = SLURM.to_vec();
        beyond.retain(|(k, _)| *k != "SLURM_PROCID");
        beyond.push(("SLURM_PROCID", "8"));
        assert_eq!(
            detail(world(&beyond).unwrap_err()),
            "SLURM_PROCID=8 is not a rank of a world of SLURM_NTASKS=8 (ranks 0 to 7)"
        );
    }

    #[test]
    fn first_hosts_of_slurm_host_lists() {
        for (list, first) in [
            ("node01", "node01"),
            ("node01,node02", "node01"),
            ("node[01-04,07]", "node01"),
            ("node[07]", "node07"),
            ("gpu-a[3,5],gpu-b1", "gpu-a3"),
            ("rack[1-2]-n[01-04]", "rack1-n01"),
            (" n[001-128] ", "n001"),
        ] {
            assert_eq!(first_host(list).as_deref(), Some(first), "{list}");
        }
        for bad in ["", "[", "node[", "node]", "node[]", "node[a-b]", "n[1-2"] {
            assert_eq!(first_host(bad), None, "{bad:?}");
        }
    }

    const OMPI: &[(&str, &str)] = &[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
    ];

    #[test]
    fn open_mpi_needs_a_master_address_across_machines() {
        let d = detail(world(OMPI).unwrap_err());
        assert!(
            d.starts_with("MASTER_ADDR is not set: Open MPI names no master"),
            "{d}"
        );
        assert!(d.contains("OMPI_COMM_WORLD_LOCAL_SIZE=2"), "{d}");
        let mut vars = OMPI.to_vec();
        vars.push(("MASTER_ADDR", "head"));
        let w = world(&vars).unwrap();
        assert_eq!(facts(&w), (1, 4, 1, "head", DEFAULT_MASTER_PORT));
        assert_eq!(w.launcher(), Launcher::OpenMpi);
    }

    #[test]
    fn open_mpi_on_one_machine_meets_on_localhost() {
        let mut vars = OMPI.to_vec();
        vars.retain(|(k, _)| *k != "OMPI_COMM_WORLD_LOCAL_SIZE");
        vars.push(("OMPI_COMM_WORLD_LOCAL_SIZE", "4"));
        vars.push(("MASTER_PORT", "4000"));
        let w = world(&vars).unwrap();
        assert_eq!((w.master_addr(), w.master_port()), ("127.0.0.1", 4000));
    }

    #[test]
    fn open_mpi_wins_over_the_slurm_allocation_around_mpirun() {
        let mut vars = OMPI.to_vec();
        vars.push(("MASTER_ADDR", "head"));
        vars.extend(SLURM.iter().copied());
        let w = world(&vars).unwrap();
        assert_eq!((w.launcher(), w.rank()), (Launcher::OpenMpi, 1));
    }

    #[test]
    fn worlds_given_by_the_program_are_checked() {
        let w = World::new(0, 3, 0, "h", 1).unwrap();
        assert_eq!((w.rank(), w.size(), w.launcher()), (0, 3, Launcher::Given));
        for (rank, size) in [(3, 3), (0, 0)] {
            let e = World::new(rank, size, 0, "h", 1).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidInput);
        }
        // port 0 is no master's port: the other ranks could not connect to it
        let e = World::new(1, 2, 0, "h", 0).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert!(e.invalid().unwrap().to_string().contains("port 0"), "{e}");
    }

    #[test]
    fn devices_are_picked_by_local_rank() {
        assert_eq!(pick_device(0, 8), Some(0));
        assert_eq!(pick_device(3, 8), Some(3));
        assert_eq!(pick_device(3, 1), Some(0), "one visible device per process");
        assert_eq!(pick_device(3, 2), None, "more local ranks than devices");
        assert_eq!(pick_device(0, 0), None);
    }

    /// Every variable the parser reads is read as text: bytes that are not UTF-8 are an
    /// error naming the variable, for each launcher's variables and for `NCCL_COMM_ID`,
    /// never a world of one (as `std::env::var(name).ok()` read them).
    #[test]
    #[cfg(unix)]
    fn a_variable_that_is_not_utf8_is_an_error_naming_it() {
        use std::ffi::OsString;
        use std::os::unix::ffi::OsStringExt;
        let garbled = || OsString::from_vec(vec![b'1', 0xff]);
        let sets: [&[(&str, &str)]; 3] = [TORCHRUN, OMPI, SLURM];
        for set in sets {
            for &(name, _) in set {
                let lookup = |n: &str| match set.iter().find(|(k, _)| *k == n) {
                    Some(_) if n == name => Some(garbled()),
                    Some((_, v)) => Some(OsString::from(v)),
                    None => None,
                };
                let e = from_lookup(lookup).unwrap_err();
                assert_eq!((e.call(), e.code()), (FROM_ENV, ErrorCode::InvalidInput));
                let detail = e.invalid().unwrap().to_string();
                assert!(
                    detail.starts_with(&format!("{name} is set to bytes that are not UTF-8")),
                    "{detail}"
                );
            }
        }
        // alone, a launcher's rank variable is still a launcher's, not a world of one
        let e = from_lookup(|n| (n == "RANK").then(garbled)).unwrap_err();
        assert!(
            e.invalid().unwrap().to_string().starts_with("RANK is set"),
            "{e}"
        );
        // text is read as before
        let w = from_lookup(|n| {
            TORCHRUN
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| OsString::from(v))
        })
        .unwrap();
        assert_eq!(w, world(TORCHRUN).unwrap());
        assert_eq!(from_lookup(|_| None).unwrap(), World::single());
        let e = comm_id_of("x", Some(garbled())).unwrap_err();
        assert!(
            e.invalid()
                .unwrap()
                .to_string()
                .starts_with("NCCL_COMM_ID is set"),
            "{e}"
        );
        assert_eq!(comm_id_of("x", None).unwrap(), None);
        assert_eq!(comm_id_of("x", Some(" ".into())).unwrap(), None);
        assert_eq!(
            comm_id_of("x", Some("h:1".into())).unwrap().as_deref(),
            Some("h:1")
        );
    }
}
