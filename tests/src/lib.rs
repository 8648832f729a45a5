//! Tests that span crates live in `tests/tests/`; this crate only builds the
//! worker daemon and the master under names the tests can start, kill and
//! put on a script's PATH.
