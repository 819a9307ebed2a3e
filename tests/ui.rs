//! The compile-fail suite: every rule of the brand, pinned with the compiler's full error.
//!
//! `ui-tests/fail/*.rs` are complete programs that would be correct except for one misuse
//! (a guard leaving its closure, a guard sent to another thread, two contexts' values
//! mixed, something branded reaching a `static`, ...). Each must fail to compile, with
//! exactly the error committed next to it in the `.stderr` file of the same name; the
//! comment at the top of each case names the rule and says what the driver (or today's
//! Rust wrappers, see `shared/gpu/FACTS.md`) does at run time without it.
//!
//! `ui-tests/pass/*.rs` are the uses the rules must keep allowed (nested contexts, scoped
//! threads sharing a context, `?` with an inferred error type, ...). trybuild compiles
//! *and runs* them; they return early when `Device::get(0)` fails, so they pass on a
//! machine without a GPU.
//!
//! A new compiler version may word an error differently. Regenerate the `.stderr` files
//! with
//!
//! ```text
//! TRYBUILD=overwrite cargo test --test ui
//! ```
//!
//! and review every changed file before committing it: the error must still point at the
//! misuse and name the rule's reason (an escaping borrow, a missing `Send`, a lifetime that
//! does not live long enough), not an unrelated mistake in the case.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui-tests/fail/*.rs");
    t.pass("ui-tests/pass/*.rs");
}
