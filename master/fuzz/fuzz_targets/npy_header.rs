#![no_main]
//! Any bytes as the start of a `.npy` file (the first eight give the file's
//! length): the header parser gives a layout or an error, never a panic,
//! and a layout only when the file holds exactly M·rows·cols values of its
//! type after it.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((len, head)) = data.split_first_chunk::<8>() else { return };
    let file_len = u64::from_le_bytes(*len);
    if let Ok(l) = dls_master::output::npy::layout(head, file_len, "fuzz.npy") {
        let values = (l.count.unwrap_or(1) as u128) * (l.rows as u128) * (l.cols as u128);
        assert_eq!(l.prefix as u128 + l.dtype.size() as u128 * values, file_len as u128);
        assert!(l.prefix as usize <= head.len());
    }
});
