#![no_main]
//! Any bytes fed to the frame decoder (both directions, several limits) must
//! give a frame, "need more", or an error: never a panic, never an
//! allocation beyond the limit.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dls_protocol::frame::exercise_decoder(data);
});
