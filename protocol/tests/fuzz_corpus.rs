//! The fuzz target's body over its committed corpus, so it cannot rot
//! between fuzzing runs.

#[test]
fn corpus_runs_through_the_decoder() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode_frame");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory exists") {
        let data = std::fs::read(entry.expect("entry").path()).expect("readable");
        dls_protocol::frame::exercise_decoder(&data);
        // Every prefix too: "need more bytes" must never be an error or a panic.
        for cut in 0..data.len() {
            dls_protocol::frame::exercise_decoder(&data[..cut]);
        }
        seen += 1;
    }
    assert!(seen >= 16, "corpus has only {seen} seeds");
}
