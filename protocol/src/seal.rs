//! Optional encryption of frames (`--encrypt`): ChaCha20-Poly1305 from the
//! RustCrypto `chacha20poly1305` crate, keys derived with HKDF-SHA256 from
//! the shared token and both handshake nonces, one key per direction, and
//! a 96-bit counter as the nonce of each record (keys are fresh for every
//! connection, so a nonce is never reused under one key).
//!
//! A sealed frame is two records: the frame's prefix and header
//! (`u32 LE` length of the ciphertext, ciphertext, 16-byte tag), then, if
//! the header announces a payload, the payload's ciphertext and its tag (its
//! length is the header's). The header is opened before the payload is
//! allocated, so the receiver's checks still come first.

use crate::auth::Token;
use crate::error::{Error, Result};
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{ChaCha20Poly1305, Key, KeyInit, Nonce, Tag};

/// Bytes of an authentication tag.
pub const TAG: usize = 16;

/// One direction's cipher and record counter.
pub struct Sealer {
    cipher: ChaCha20Poly1305,
    counter: u64,
}

impl Sealer {
    fn new(key: &[u8; 32]) -> Sealer {
        Sealer {
            cipher: ChaCha20Poly1305::new(Key::from_slice(key)),
            counter: 0,
        }
    }

    fn nonce(&mut self) -> Nonce {
        let mut n = [0u8; 12];
        n[..8].copy_from_slice(&self.counter.to_le_bytes());
        self.counter += 1;
        Nonce::from(n)
    }

    /// Encrypt `buf` in place; the tag to send after it.
    pub fn seal(&mut self, buf: &mut [u8]) -> Result<[u8; TAG]> {
        let nonce = self.nonce();
        let tag = self
            .cipher
            .encrypt_in_place_detached(&nonce, b"", buf)
            .map_err(|_| Error::Malformed("encryption failed".into()))?;
        Ok(tag.into())
    }

    /// Decrypt `buf` in place, checking `tag`: a changed byte anywhere, a
    /// record replayed, dropped or reordered, or another key all fail.
    pub fn open(&mut self, buf: &mut [u8], tag: &[u8; TAG]) -> Result<()> {
        let nonce = self.nonce();
        self.cipher
            .decrypt_in_place_detached(&nonce, b"", buf, Tag::from_slice(tag))
            .map_err(|_| {
                Error::Malformed(
                    "a frame failed its authentication check: changed in transit, or the peer uses another key".into(),
                )
            })
    }
}

/// Which end of the connection derives the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Master,
    Worker,
}

/// The (send, receive) sealers of `side` for a connection whose handshake
/// exchanged `nonce_m` and `nonce_w` under `token`.
pub fn sealers(token: &Token, nonce_m: &[u8; 32], nonce_w: &[u8; 32], side: Side) -> (Sealer, Sealer) {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(nonce_m);
    salt[32..].copy_from_slice(nonce_w);
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(&salt), token.bytes());
    let key = |info: &[u8]| {
        let mut k = [0u8; 32];
        // 32 bytes is far below HKDF-SHA256's limit of 8160: cannot fail.
        let _ = hk.expand(info, &mut k);
        k
    };
    let to_worker = key(b"dls frames master->worker");
    let to_master = key(b"dls frames worker->master");
    match side {
        Side::Master => (Sealer::new(&to_worker), Sealer::new(&to_master)),
        Side::Worker => (Sealer::new(&to_master), Sealer::new(&to_worker)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> ((Sealer, Sealer), (Sealer, Sealer)) {
        let t = Token::parse("seal-test-token-0123456789").expect("token");
        let (nm, nw) = ([1u8; 32], [2u8; 32]);
        (sealers(&t, &nm, &nw, Side::Master), sealers(&t, &nm, &nw, Side::Worker))
    }

    #[test]
    fn each_side_opens_what_the_other_sealed_in_order() {
        let ((mut m_send, mut m_recv), (mut w_send, mut w_recv)) = pair();
        for i in 0..5u8 {
            let plain = vec![i; 100 + i as usize];
            let mut buf = plain.clone();
            let tag = m_send.seal(&mut buf).expect("seals");
            assert_ne!(buf, plain, "the bytes on the wire are not the plaintext");
            w_recv.open(&mut buf, &tag).expect("opens");
            assert_eq!(buf, plain);
            let mut back = plain.clone();
            let tag = w_send.seal(&mut back).expect("seals");
            m_recv.open(&mut back, &tag).expect("opens");
            assert_eq!(back, plain);
        }
    }

    #[test]
    fn any_change_replay_or_other_key_fails() {
        let ((mut m_send, _), (_, mut w_recv)) = pair();
        let mut buf = b"some frame bytes".to_vec();
        let tag = m_send.seal(&mut buf).expect("seals");
        for bit in 0..buf.len() * 8 {
            let ((mut s, _), (_, mut r)) = pair();
            let mut b = b"some frame bytes".to_vec();
            let t = s.seal(&mut b).expect("seals");
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(r.open(&mut b, &t).is_err(), "bit {bit} flipped passed");
        }
        let mut bad_tag = tag;
        bad_tag[3] ^= 1;
        let mut b = buf.clone();
        assert!(w_recv.open(&mut b, &bad_tag).is_err());
        // The counter moved on: the same record again is a replay.
        let ((mut s, _), (_, mut r)) = pair();
        let mut b = b"x".to_vec();
        let t = s.seal(&mut b).expect("seals");
        let copy = b.clone();
        r.open(&mut b, &t).expect("first time");
        let mut again = copy;
        assert!(r.open(&mut again, &t).is_err(), "a replayed record passed");
        // Another token derives other keys.
        let other = Token::parse("another-token-0123456789").expect("token");
        let (mut s2, _) = sealers(&other, &[1; 32], &[2; 32], Side::Master);
        let (_, mut r1) = pair().1;
        let mut b = b"hello".to_vec();
        let t = s2.seal(&mut b).expect("seals");
        assert!(r1.open(&mut b, &t).is_err());
    }
}
