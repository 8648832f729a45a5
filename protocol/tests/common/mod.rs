//! What the handshake tests share: a time limit and a worker's answer.

use dls_protocol::Capabilities;
use std::time::Duration;

/// How long any step of a test may take.
pub const T: Duration = Duration::from_secs(5);

/// A worker's capabilities as the tests announce them.
pub fn caps() -> Capabilities {
    Capabilities {
        cores: 2,
        threads: 1,
        memory_limit: 1 << 30,
        kernel: "test".into(),
        emulated: false,
        ciphers: dls_protocol::seal::fast_ciphers(),
        session: 1,
    }
}

/// A worker's side of the handshake: `token`, `caps`, frames up to 1 GiB,
/// the test's time limit, encryption optional, no status answers.
pub fn worker_side<'a>(
    token: Option<&'a dls_protocol::Token>,
    caps: &'a Capabilities,
) -> dls_protocol::handshake::WorkerSide<'a> {
    dls_protocol::handshake::WorkerSide {
        token,
        caps,
        frame_cap: 1 << 30,
        timeout: T,
        require_encrypt: false,
        status: None,
    }
}
