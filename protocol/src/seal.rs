//! Optional encryption of frames (`--encrypt`): an AEAD from the `ring`
//! crate, AES-256-GCM when both ends have AES instructions (and carry-less
//! multiplication), ChaCha20-Poly1305 otherwise, agreed in the handshake
//! ([`agree`]). Keys are derived with HKDF-SHA256 from the shared token,
//! both handshake nonces and the cipher's name, one key per direction; a
//! 96-bit counter is the nonce of each record (keys are fresh for every
//! connection, so a nonce is never reused under one key).
//!
//! A sealed frame is a header record (`u32 LE` length of the ciphertext,
//! the ciphertext of the frame's prefix and header, 16-byte tag), then, if
//! the header announces a payload, the payload in records of [`RECORD`]
//! bytes (the last shorter), each its ciphertext and its tag (lengths follow
//! from the header's). The header is opened before the payload is
//! allocated, so the receiver's checks still come first; each payload
//! record is opened as soon as it is in.

use crate::auth::Token;
use crate::error::{Error, Result};
use crate::message::Cipher;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

/// Bytes of an authentication tag.
pub const TAG: usize = 16;

/// Most bytes of a payload sealed as one record: large enough that tags
/// and calls cost nothing, small enough that the receiver opens one record
/// while the sender seals the next (two cores busy, not one after the other).
pub const RECORD: usize = 1 << 20;

/// The ciphers this machine runs at speed, best first: AES-256-GCM where
/// the processor has AES and carry-less multiplication instructions, then
/// ChaCha20-Poly1305 (fast anywhere).
pub fn fast_ciphers() -> Vec<Cipher> {
    let mut v = Vec::with_capacity(2);
    if aes_in_hardware() {
        v.push(Cipher::Aes256Gcm);
    }
    v.push(Cipher::ChaCha20Poly1305);
    v
}

#[cfg(target_arch = "x86_64")]
fn aes_in_hardware() -> bool {
    std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq")
}

#[cfg(target_arch = "aarch64")]
fn aes_in_hardware() -> bool {
    std::arch::is_aarch64_feature_detected!("aes") && std::arch::is_aarch64_feature_detected!("pmull")
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn aes_in_hardware() -> bool {
    false
}

/// The cipher of a connection: the master's first choice that the worker
/// also runs at speed, else ChaCha20-Poly1305 (which both always have).
pub fn agree(master: &[Cipher], worker: &[Cipher]) -> Cipher {
    master
        .iter()
        .copied()
        .find(|c| worker.contains(c))
        .unwrap_or(Cipher::ChaCha20Poly1305)
}

/// One direction's cipher and record counter.
pub struct Sealer {
    key: LessSafeKey,
    counter: u64,
}

impl Sealer {
    fn new(cipher: Cipher, key: &[u8; 32]) -> Sealer {
        let alg = match cipher {
            Cipher::Aes256Gcm => &aead::AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        };
        // Both algorithms take 32-byte keys: this cannot fail.
        let unbound = UnboundKey::new(alg, key).unwrap_or_else(|_| unreachable!("a 32-byte key for a 256-bit AEAD"));
        Sealer {
            key: LessSafeKey::new(unbound),
            counter: 0,
        }
    }

    fn nonce(&mut self) -> Nonce {
        let mut n = [0u8; 12];
        n[..8].copy_from_slice(&self.counter.to_le_bytes());
        self.counter += 1;
        Nonce::assume_unique_for_key(n)
    }

    /// Encrypt `buf` in place; the tag to send after it.
    pub fn seal(&mut self, buf: &mut [u8]) -> Result<[u8; TAG]> {
        let nonce = self.nonce();
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::empty(), buf)
            .map_err(|_| Error::Malformed("encryption failed".into()))?;
        let mut out = [0u8; TAG];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Decrypt `buf` in place, checking `tag`: a changed byte anywhere, a
    /// record replayed, dropped or reordered, or another key all fail.
    pub fn open(&mut self, buf: &mut [u8], tag: &[u8; TAG]) -> Result<()> {
        let nonce = self.nonce();
        let tag = aead::Tag::from(*tag);
        self.key
            .open_in_place_separate_tag(nonce, Aad::empty(), tag, buf, 0..)
            .map(|_| ())
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
/// exchanged `nonce_m` and `nonce_w` under `token` and agreed on `cipher`
/// (whose name enters the keys: the two never share a key).
pub fn sealers(token: &Token, nonce_m: &[u8; 32], nonce_w: &[u8; 32], side: Side, cipher: Cipher) -> (Sealer, Sealer) {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(nonce_m);
    salt[32..].copy_from_slice(nonce_w);
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(&salt), token.bytes());
    let key = |direction: &str| {
        let mut k = [0u8; 32];
        let info = format!("dls frames {direction} {}", cipher.name());
        // 32 bytes is far below HKDF-SHA256's limit of 8160: cannot fail.
        let _ = hk.expand(info.as_bytes(), &mut k);
        k
    };
    let to_worker = key("master->worker");
    let to_master = key("worker->master");
    let sealer = |k: &[u8; 32]| Sealer::new(cipher, k);
    match side {
        Side::Master => (sealer(&to_worker), sealer(&to_master)),
        Side::Worker => (sealer(&to_master), sealer(&to_worker)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair_of(cipher: Cipher) -> ((Sealer, Sealer), (Sealer, Sealer)) {
        let t = Token::parse("seal-test-token-0123456789").expect("token");
        let (nm, nw) = ([1u8; 32], [2u8; 32]);
        (
            sealers(&t, &nm, &nw, Side::Master, cipher),
            sealers(&t, &nm, &nw, Side::Worker, cipher),
        )
    }

    fn pair() -> ((Sealer, Sealer), (Sealer, Sealer)) {
        pair_of(Cipher::ChaCha20Poly1305)
    }

    #[test]
    fn both_ciphers_round_trip_and_never_open_each_other() {
        for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
            let ((mut send, _), (_, mut recv)) = pair_of(cipher);
            let plain: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
            let mut buf = plain.clone();
            let tag = send.seal(&mut buf).expect("seals");
            assert_ne!(buf, plain);
            recv.open(&mut buf, &tag).expect("opens");
            assert_eq!(buf, plain, "{cipher:?}");
        }
        // Sealed under one cipher, opened under the other: refused.
        let ((mut aes, _), _) = pair_of(Cipher::Aes256Gcm);
        let (_, (_, mut chacha)) = pair_of(Cipher::ChaCha20Poly1305);
        let mut buf = b"frame".to_vec();
        let tag = aes.seal(&mut buf).expect("seals");
        assert!(chacha.open(&mut buf, &tag).is_err());
    }

    #[test]
    fn the_masters_first_choice_the_worker_runs_fast_is_agreed() {
        use Cipher::*;
        assert_eq!(
            agree(&[Aes256Gcm, ChaCha20Poly1305], &[Aes256Gcm, ChaCha20Poly1305]),
            Aes256Gcm
        );
        assert_eq!(
            agree(&[Aes256Gcm, ChaCha20Poly1305], &[ChaCha20Poly1305]),
            ChaCha20Poly1305
        );
        assert_eq!(
            agree(&[ChaCha20Poly1305], &[Aes256Gcm, ChaCha20Poly1305]),
            ChaCha20Poly1305
        );
        // Nothing in common, or nothing said: the cipher every end has.
        assert_eq!(agree(&[], &[Aes256Gcm]), ChaCha20Poly1305);
        assert_eq!(agree(&[Aes256Gcm], &[]), ChaCha20Poly1305);
        assert_eq!(fast_ciphers().last(), Some(&ChaCha20Poly1305));
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
        let (mut s2, _) = sealers(&other, &[1; 32], &[2; 32], Side::Master, Cipher::ChaCha20Poly1305);
        let (_, mut r1) = pair().1;
        let mut b = b"hello".to_vec();
        let t = s2.seal(&mut b).expect("seals");
        assert!(r1.open(&mut b, &t).is_err());
    }
}
