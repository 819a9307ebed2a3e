//! How many C parameters a kernel has, learned without asking the driver about a parameter
//! the kernel does not have.
//!
//! The declaration check ([`Function::typed`](super::Function::typed)) and
//! [`Function::params`](super::Function::params) read each parameter with
//! `cuFuncGetParamInfo` (CUDA 12.4). Asked for the index past the last parameter, the
//! driver answers `CUDA_ERROR_INVALID_VALUE`, and compute-sanitizer reports that API error:
//! one per declaration, so every program declaring a kernel would fail a CI gate on
//! `compute-sanitizer --error-exitcode`. So the count comes first, from one of:
//!
//! 1. the driver, `cuFuncGetParamCount` (CUDA 13.2), where it has it;
//! 2. else the parameter table of the image the function's module or library was loaded
//!    from ([`ParamTable`](super::ParamTable), which the module layer's image reader
//!    makes: the PTX `.entry` signature, a cubin's `.nv.info` records, a fatbin's readable
//!    entries), kept here from the load on;
//! 3. else nothing: the driver is asked until it answers that there is no further
//!    parameter, one API error that compute-sanitizer reports. That is the case only for
//!    a kernel whose image has no table here: a fatbin whose entries are all compressed,
//!    a cubin whose `.nv.info.<kernel>` uses records not read here, PTX the reader does
//!    not understand, or images that disagree (documented on `Module::kernel`).
//!
//! The image's count is confirmed by the driver's own layout where the image gives one:
//! if the last parameter the driver reports does not end where the image's does, the
//! driver is asked on (as in 3). That comparison cannot see a table that is a prefix of the
//! driver's list; what keeps an image from making one is that a table is kept only where
//! it says what the driver reads (`image::params`: no PTX with preprocessor directives, no
//! cubin records of a kernel whose symbol and code disagree).
//!
//! # Where the tables live, and why
//!
//! A [`Function`](super::Function) is one pointer (pinned by the zero-cost assertions),
//! and [`Function::typed`](super::Function::typed) has nothing else to go on, so the count
//! cannot travel with the function. A [`Module`](crate::Module) keeps neither its image
//! (PTX text and images are borrowed for the load only) nor anything beyond its two
//! handles. So the table goes into one process-wide registry, and only where it is needed:
//! a driver with `cuFuncGetParamInfo` but without `cuFuncGetParamCount` (CUDA 12.4 to
//! 13.1). Elsewhere nothing is parsed or kept, and each call below returns after one look
//! at the loaded driver table.
//!
//! - At load, the module's or library's table (parsed once from the text or image it was
//!   loaded from) is kept under its handle, the *owner*.
//! - Taking a function (`Module::function`, `Library::function`) records the function
//!   handle's count, or removes any record for that handle where the table has none. So the
//!   record of a live function is always the one its own lookup made: a handle value reused
//!   after an unload is recorded afresh before anything reads it.
//! - Unloading (`Module`'s drop or `close`, `Library`'s drop) removes the owner's table and
//!   its functions' records *before* the unload, while no other module can have those
//!   handle values. A module leaked with `mem::forget` leaves its records behind; they are
//!   overwritten if a handle value comes back, and never read otherwise.
//!
//! Library functions taken for a context that has since been destroyed stay recorded
//! until the library is dropped (a few dozen bytes each).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::Function;
use super::ParamTable;
use crate::driver::{self, CUfunction};

/// What the crate knows about a function's parameter count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Count {
    /// `cuFuncGetParamCount` said.
    Driver(usize),
    /// The image's table said: the count, and where the last parameter ends where the
    /// table has the layout.
    Image { count: usize, bytes: Option<usize> },
    /// Nothing says.
    Unknown,
}

struct Registry {
    /// Each loaded module's or library's table, by its handle.
    owners: BTreeMap<usize, ParamTable>,
    /// Each function handle taken from an owner with a table: `(owner, count, bytes)`.
    functions: BTreeMap<usize, (usize, usize, Option<usize>)>,
}

impl Registry {
    const fn new() -> Registry {
        Registry {
            owners: BTreeMap::new(),
            functions: BTreeMap::new(),
        }
    }

    fn remember(&mut self, owner: usize, table: ParamTable) {
        if table.is_empty() {
            self.owners.remove(&owner);
        } else {
            self.owners.insert(owner, table);
        }
    }

    fn note_function(&mut self, owner: usize, name: &str, f: usize) {
        let known = self
            .owners
            .get(&owner)
            .and_then(|t| t.get(name.as_bytes()))
            .map(|list| (owner, list.count, list.bytes()));
        match known {
            Some(record) => self.functions.insert(f, record),
            None => self.functions.remove(&f),
        };
    }

    fn forget(&mut self, owner: usize) {
        if self.owners.remove(&owner).is_some() {
            self.functions.retain(|_, &mut (o, _, _)| o != owner);
        }
    }

    fn count(&self, f: usize) -> Count {
        match self.functions.get(&f) {
            Some(&(_, count, bytes)) => Count::Image { count, bytes },
            None => Count::Unknown,
        }
    }
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry::new());

fn registry() -> MutexGuard<'static, Registry> {
    // nothing below panics while holding the lock; a poisoned lock's data is still whole
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether tables are kept: the driver reports parameters one by one but not their count.
fn tables_needed() -> bool {
    driver::param_queries() == (true, false)
}

/// Keeps the parameter table of the module or library `owner` (a handle), made by
/// `table` from what it was loaded from: only where tables are needed.
pub(crate) fn remember(owner: usize, table: impl FnOnce() -> ParamTable) {
    if tables_needed() {
        let table = table();
        registry().remember(owner, table);
    }
}

/// Records the count of function `f`, the kernel `name` of `owner`, or removes any record
/// for `f` where `owner`'s table does not have it.
pub(crate) fn note_function(owner: usize, name: &str, f: CUfunction) {
    if tables_needed() {
        registry().note_function(owner, name, f as usize);
    }
}

/// Forgets `owner`'s table and its functions' records; called before it is unloaded.
pub(crate) fn forget(owner: usize) {
    if tables_needed() {
        registry().forget(owner);
    }
}

/// What is known about the parameter count of `function`.
pub(super) fn count_of(function: Function<'_, '_>) -> Count {
    match driver::param_queries() {
        (_, true) => {
            // SAFETY: the function is alive (it borrows its module or library).
            match unsafe { driver::func_param_count(function.raw()) } {
                Ok(n) => Count::Driver(n),
                Err(_) => Count::Unknown,
            }
        }
        (true, false) => registry().count(function.raw() as usize),
        (false, false) => Count::Unknown,
    }
}

/// The C parameters as `info` (`cuFuncGetParamInfo` of one function: `None` past its last
/// parameter) reports them, given what is known of their `count`: indices below a known
/// count only, unless the driver's last parameter does not end where the image's table
/// says, and then (as where nothing is known) on until `info` says there is no further
/// parameter. At most `max + 1` parameters.
pub(super) fn read_params<E>(
    count: Count,
    max: usize,
    mut info: impl FnMut(usize) -> Result<Option<(usize, usize)>, E>,
) -> Result<Vec<(usize, usize)>, E> {
    let (count, bytes) = match count {
        Count::Driver(n) => (Some(n), None),
        Count::Image { count, bytes } => (Some(count), bytes),
        Count::Unknown => (None, None),
    };
    let mut all = Vec::with_capacity(count.unwrap_or(0).min(max));
    if let Some(count) = count {
        for index in 0..count.min(max + 1) {
            match info(index)? {
                Some(param) => all.push(param),
                // fewer than the table said: the driver's answer stands
                None => return Ok(all),
            }
        }
        let end = all.last().map_or(0, |&(offset, size)| offset + size);
        if bytes.is_none_or(|bytes| bytes == end) || all.len() > max {
            return Ok(all);
        }
        // the table and the driver disagree about where the list ends: ask on
    }
    while all.len() <= max {
        let Some(param) = info(all.len())? else {
            break;
        };
        all.push(param);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::ParamList;

    /// The table the image reader makes of `kernels/kernels.ptx`, for the kernels used
    /// here (the module layer's image tests check the reader against that file): `scale`
    /// (3 parameters, 20 bytes), `vector_add` (6, 48) and `spin` (1, 8).
    fn kernels_ptx() -> ParamTable {
        let mut table = ParamTable::default();
        let list = |layout: Vec<(usize, usize)>| ParamList {
            count: layout.len(),
            layout: Some(layout),
        };
        table.add(b"scale", list(vec![(0, 8), (8, 8), (16, 4)]));
        table.add(b"vector_add", list((0..6).map(|i| (8 * i, 8)).collect()));
        table.add(b"spin", list(vec![(0, 8)]));
        table
    }

    /// A kernel whose parameters a fake `cuFuncGetParamInfo` reports, recording every
    /// index it is asked for.
    struct Fake<'a> {
        params: &'a [(usize, usize)],
        asked: std::cell::RefCell<Vec<usize>>,
    }

    impl Fake<'_> {
        fn info(&self, i: usize) -> Result<Option<(usize, usize)>, ()> {
            self.asked.borrow_mut().push(i);
            Ok(self.params.get(i).copied())
        }
    }

    fn driver(params: &[(usize, usize)]) -> Fake<'_> {
        Fake {
            params,
            asked: Default::default(),
        }
    }

    const SCALE: [(usize, usize); 3] = [(0, 8), (8, 8), (16, 4)];

    #[test]
    fn a_known_count_asks_only_about_parameters_the_kernel_has() {
        for count in [
            Count::Driver(3),
            Count::Image {
                count: 3,
                bytes: Some(20),
            },
            Count::Image {
                count: 3,
                bytes: None,
            },
        ] {
            let d = driver(&SCALE);
            assert_eq!(read_params(count, 100, |i| d.info(i)), Ok(SCALE.to_vec()));
            assert_eq!(*d.asked.borrow(), [0, 1, 2], "{count:?}");
        }
        // none at all: nothing asked
        let d = driver(&[]);
        assert_eq!(
            read_params(Count::Driver(0), 100, |i| d.info(i)),
            Ok(vec![])
        );
        assert!(d.asked.borrow().is_empty());
    }

    #[test]
    fn without_a_count_or_with_one_the_driver_contradicts_it_asks_to_the_end() {
        // nothing known: one index past the end
        let d = driver(&SCALE);
        assert_eq!(
            read_params(Count::Unknown, 100, |i| d.info(i)),
            Ok(SCALE.to_vec())
        );
        assert_eq!(*d.asked.borrow(), [0, 1, 2, 3]);
        // a table that undercounts, caught by its byte size
        let d = driver(&SCALE);
        let short = Count::Image {
            count: 2,
            bytes: Some(20),
        };
        assert_eq!(read_params(short, 100, |i| d.info(i)), Ok(SCALE.to_vec()));
        assert_eq!(*d.asked.borrow(), [0, 1, 2, 3]);
        // a table that overcounts: the driver's end stands
        let d = driver(&SCALE);
        assert_eq!(
            read_params(Count::Driver(5), 100, |i| d.info(i)),
            Ok(SCALE.to_vec())
        );
        assert_eq!(*d.asked.borrow(), [0, 1, 2, 3]);
        // the limit
        let many: Vec<(usize, usize)> = (0..50).map(|i| (8 * i, 8)).collect();
        let d = driver(&many);
        assert_eq!(
            read_params(Count::Unknown, 9, |i| d.info(i)).unwrap().len(),
            10
        );
        assert_eq!(
            read_params(Count::Driver(50), 9, |i| d.info(i))
                .unwrap()
                .len(),
            10
        );
        // an error (an old driver) is the caller's
        assert_eq!(
            read_params(Count::Driver(3), 9, |_| Err::<Option<(usize, usize)>, _>(7)),
            Err(7)
        );
    }

    #[test]
    fn the_registry_records_functions_of_owners_with_tables_and_forgets_them() {
        let mut r = Registry::new();
        let (module, other) = (0x1000, 0x2000);
        r.remember(module, kernels_ptx());
        r.note_function(module, "scale", 0xa);
        r.note_function(module, "vector_add", 0xb);
        assert_eq!(
            r.count(0xa),
            Count::Image {
                count: 3,
                bytes: Some(20)
            }
        );
        assert_eq!(
            r.count(0xb),
            Count::Image {
                count: 6,
                bytes: Some(48)
            }
        );
        // a name the table lacks, or an owner without a table: no record, and a stale one
        // for the same handle value is removed
        r.note_function(module, "not_there", 0xa);
        assert_eq!(r.count(0xa), Count::Unknown);
        r.remember(other, ParamTable::default()); // what the reader makes of "not PTX"
        r.note_function(other, "scale", 0xb);
        assert_eq!(r.count(0xb), Count::Unknown);
        // forgetting an owner removes its functions only
        r.note_function(module, "scale", 0xa);
        r.remember(other, kernels_ptx());
        r.note_function(other, "spin", 0xc);
        r.forget(module);
        assert_eq!(r.count(0xa), Count::Unknown);
        assert_eq!(
            r.count(0xc),
            Count::Image {
                count: 1,
                bytes: Some(8)
            }
        );
        r.forget(other);
        assert!(r.owners.is_empty() && r.functions.is_empty());
    }
}
