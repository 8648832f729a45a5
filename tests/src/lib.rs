//! Tests that span crates live in `tests/tests/`; this crate only builds the
//! worker daemon under a name the tests can start and kill.
