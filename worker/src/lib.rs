//! The `dls` worker daemon: it accepts one authenticated master at a time,
//! receives chunks of matrix products, computes them with a real GEMM
//! ([`kernel`]), and returns each chunk's results only when the master grants
//! it the port.
//!
//! ```no_run
//! # async fn doc() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let cfg = dls_worker::Config::new(1, 1 << 30);
//! dls_worker::serve(listener, cfg, async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

pub mod cli;
pub mod gate;
pub mod kernel;
pub mod server;
mod session;
pub mod throttle;

pub use server::{serve, Config};

/// A field of /proc/meminfo (e.g. "MemTotal", "MemAvailable") in bytes,
/// where the system says.
pub fn meminfo_bytes(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.split(':').next() == Some(key))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok()?.checked_mul(1024)
}

/// Half the machine's memory (from /proc/meminfo), or 4 GiB where it is unknown.
pub fn default_memory_limit() -> u64 {
    meminfo_bytes("MemTotal").map_or(4 << 30, |b| b / 2)
}

/// Shorter tokens are refused: they can be guessed.
pub const MIN_TOKEN_BYTES: usize = 16;

/// How to make a good token file, for error messages.
fn token_advice(file: &str) -> String {
    format!("make one with: head -c 32 /dev/urandom | base64 > {file} && chmod 600 {file}")
}

/// The shared token from `file`, else the `DLS_TOKEN` environment variable,
/// else none. Master and workers take it the same two ways. Refused: a
/// token file that group or others may read (or write), and a token
/// shorter than [`MIN_TOKEN_BYTES`].
pub fn load_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<dls_protocol::Token>> {
    use anyhow::{bail, Context};
    let (text, origin, advice) = match file {
        Some(path) => {
            let shown = path.display().to_string();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(path)
                    .with_context(|| format!("reading token file {shown}"))?
                    .permissions()
                    .mode();
                if mode & 0o077 != 0 {
                    bail!(
                        "token file {shown} may be read by other users (mode {:o}); restrict it with: chmod 600 {shown}",
                        mode & 0o777
                    );
                }
            }
            let text = std::fs::read_to_string(path).with_context(|| format!("reading token file {shown}"))?;
            (text, format!("token file {shown}"), token_advice(&shown))
        }
        None => match std::env::var("DLS_TOKEN") {
            Ok(v) => (v, "DLS_TOKEN".to_string(), token_advice("FILE")),
            Err(_) => return Ok(None),
        },
    };
    let Some(token) = dls_protocol::Token::parse(&text) else {
        bail!("{origin} is empty; {advice}");
    };
    if token.len() < MIN_TOKEN_BYTES {
        bail!(
            "{origin} holds a token of {} bytes; use at least {MIN_TOKEN_BYTES}: {advice}",
            token.len()
        );
    }
    Ok(Some(token))
}

/// Turn on TCP keepalive (probes after 10 s idle, every 5 s, 3 lost probes
/// end the connection): a peer whose host vanished without closing is
/// noticed within about 25 s even when nothing is being sent. Best effort.
pub fn keepalive(stream: &tokio::net::TcpStream) {
    let ka = socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(10))
        .with_interval(std::time::Duration::from_secs(5));
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd"))]
    let ka = ka.with_retries(3);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&ka);
}

#[cfg(test)]
mod token_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(tag: &str, text: &str, mode: u32) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("dls-token-{tag}-{}", std::process::id()));
        std::fs::write(&p, text).expect("writes");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        p
    }

    #[test]
    fn token_files_others_may_read_and_short_tokens_are_refused() {
        let open = file("open", "0123456789abcdef0123", 0o644);
        let e = load_token(Some(&open)).expect_err("refused").to_string();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        let short = file("short", "abc\n", 0o600);
        let e = load_token(Some(&short)).expect_err("refused").to_string();
        assert!(e.contains("3 bytes") && e.contains("at least 16"), "{e}");
        let empty = file("empty", " \n", 0o600);
        let e = load_token(Some(&empty)).expect_err("refused").to_string();
        assert!(e.contains("is empty"), "{e}");
        let good = file("good", "0123456789abcdef\n", 0o600);
        let t = load_token(Some(&good)).expect("accepted").expect("a token");
        assert_eq!(t.len(), 16);
        for p in [open, short, empty, good] {
            std::fs::remove_file(p).expect("cleans up");
        }
    }
}
