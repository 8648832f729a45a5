//! Shared-token authentication: HMAC-SHA256 challenge–response in both
//! directions. The token itself never crosses the wire.

use crate::message::{Nonce, Proof};
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// A shared secret. Surrounding white space (a trailing newline in a token
/// file) is not part of it.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// `None` when the text is empty or only white space.
    pub fn parse(text: &str) -> Option<Token> {
        let t = text.trim();
        (!t.is_empty()).then(|| Token(t.as_bytes().to_vec()))
    }

    /// The secret itself (key derivation only).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true for a parsed token; here for completeness with `len`.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Which side proves: the tags keep a worker's proof from being replayed as
/// a master's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Master,
    Worker,
}

impl Role {
    fn tag(self) -> &'static [u8] {
        match self {
            Role::Master => b"dls-master-v1",
            Role::Worker => b"dls-worker-v1",
        }
    }
}

fn mac(token: &Token, role: Role, own: &Nonce, other: &Nonce) -> HmacSha256 {
    // HMAC accepts keys of any length.
    let mut m = match HmacSha256::new_from_slice(&token.0) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    };
    m.update(role.tag());
    m.update(other);
    m.update(own);
    m
}

/// The proof `role` sends: MAC over its tag, the peer's nonce and its own.
pub fn prove(token: &Token, role: Role, own: &Nonce, other: &Nonce) -> Proof {
    mac(token, role, own, other).finalize().into_bytes().into()
}

/// Check in constant time a proof made by `role`.
pub fn verify(token: &Token, role: Role, their: &Nonce, ours: &Nonce, proof: &Proof) -> bool {
    mac(token, role, their, ours).verify_slice(proof).is_ok()
}

/// A fresh random nonce.
pub fn nonce() -> Nonce {
    rand::random()
}
