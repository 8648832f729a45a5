//! What both `dls` binaries share and neither owns: sizes as people write
//! them, logging, the shared token, TCP keepalive, freed buffers given
//! back, one heap for every thread, a check that every command-line flag
//! is documented, and matrices as both sides describe them (`matrix`). The
//! master links this, not the worker daemon, for them.

pub mod matrix;

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

/// A size in bytes as people write it: `1048576`, `512K`, `512M`, `2G`,
/// `1T` (powers of 1024; a trailing `B` or `iB` is allowed), or `50%` of
/// `total` (the machine's memory). Zero, fractions of a byte and anything
/// else are refused, with what is accepted.
pub fn parse_size(text: &str, total: Option<u64>) -> Result<u64, String> {
    let bad = || {
        format!("{text:?} is not a size: give bytes, or a number with K, M, G or T (powers of 1024), or a percentage of the machine's memory such as 50%")
    };
    let t = text.trim();
    let bytes = if let Some(pct) = t.strip_suffix('%') {
        let p: f64 = pct.trim().parse().map_err(|_| bad())?;
        if !(p > 0.0 && p <= 100.0) {
            return Err(format!(
                "{text:?}: a percentage of the machine's memory is between 0 and 100"
            ));
        }
        let total =
            total.ok_or_else(|| format!("{text:?}: this machine does not say how much memory it has; give a size"))?;
        (total as f64 * p / 100.0) as u64
    } else {
        let upper = t.to_ascii_uppercase();
        let num = upper.trim_end_matches("IB").trim_end_matches('B');
        let (digits, shift) = match num.chars().last() {
            Some('K') => (&num[..num.len() - 1], 10),
            Some('M') => (&num[..num.len() - 1], 20),
            Some('G') => (&num[..num.len() - 1], 30),
            Some('T') => (&num[..num.len() - 1], 40),
            _ => (num, 0),
        };
        let v: f64 = digits.trim().parse().map_err(|_| bad())?;
        if !v.is_finite() || v < 0.0 {
            return Err(bad());
        }
        let b = v * (1u64 << shift) as f64;
        if b >= u64::MAX as f64 {
            return Err(format!("{text:?} is more bytes than can be counted"));
        }
        b as u64
    };
    if bytes == 0 {
        return Err(format!("{text:?} is no memory at all: give more than 0 bytes"));
    }
    Ok(bytes)
}

/// `n,k,m` (or `n` for a square n×n·n×n product), each at least 1.
pub fn parse_shape(s: &str) -> std::result::Result<dls_protocol::Shape, String> {
    let dims: Vec<u32> = s
        .split(',')
        .map(|d| {
            d.trim()
                .parse::<u32>()
                .map_err(|_| format!("{d:?} is not a dimension (a whole number from 1 to {})", u32::MAX))
        })
        .collect::<std::result::Result<_, _>>()?;
    let shape = match dims[..] {
        [n] => dls_protocol::Shape::square(n),
        [n, k, m] => dls_protocol::Shape { n, k, m },
        _ => return Err(format!("{s:?}: give n,k,m (A n×k, B k×m)")),
    };
    if shape.n == 0 || shape.k == 0 || shape.m == 0 {
        return Err(format!("{s:?}: every dimension must be at least 1"));
    }
    Ok(shape)
}

/// `float32` or `float64` (also `f32`, `f64`).
pub fn parse_dtype(s: &str) -> std::result::Result<dls_protocol::DType, String> {
    dls_protocol::DType::parse(s).ok_or_else(|| format!("{s:?}: the type is float32 or float64"))
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event.
    #[default]
    Text,
    /// One JSON object per line (timestamp, level, target, fields).
    Json,
}

/// Make freed buffers of 128 KiB or more go back to the system at once.
/// A master running one large product makes and frees panels and pieces of
/// C of hundreds of kilobytes to megabytes on many threads; glibc's malloc
/// raises its threshold for mapping such buffers after the first is freed
/// and then keeps later ones in per-thread heaps: streaming a 4096²
/// product the master held 20–22% of A + B + C, 10–11% with this. The
/// worker daemon calls it first thing (a batch on four daemons ran as fast
/// with it, 9.2 s against 9.8 s); the master only for `dls run` with one
/// product: in one process with its workers (the demo), mapping every
/// buffer afresh cost a batch of small products 70% of its speed.
pub fn return_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
}

/// Keep every thread's allocations in one heap. glibc's malloc gives the
/// threads that contend for it heaps of their own (up to eight per core)
/// and keeps what is freed in each for reuse: a master streaming chunks of
/// megabytes through its async and blocking threads held the buffers of
/// past chunks in every heap. The README's streaming batch behind a shared
/// uplink (340 products of 512², two workers on loopback, release build)
/// peaked at 211-270 MB with a heap per thread, 95-128 MB in one, at the
/// same speed (`scripts/stream-memory.sh`); a batch of 600 products of
/// 256² from memory ran as fast too. Call it before the threads start.
pub fn one_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    mallopt(libc::M_ARENA_MAX, 1);
}

/// Set one parameter of glibc's allocator (a failure leaves the default).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn mallopt(param: libc::c_int, value: libc::c_int) {
    // SAFETY: mallopt only sets a parameter of glibc's allocator; it takes
    // the allocator's own lock and touches no memory of ours.
    unsafe {
        libc::mallopt(param, value);
    }
}

/// Start logging to stderr: `RUST_LOG` if set, else `default` (a level or
/// filter); colour only on a terminal and never when `NO_COLOR` is set.
pub fn init_logging(default: &str, format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into());
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
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

/// Bytes written to a connection but not yet sent that make its writer
/// wait ([`short_send_queue`]).
pub const NOT_SENT_LOW: u32 = 128 << 10;

/// Keep what is written to `stream` and not yet sent under about
/// [`NOT_SENT_LOW`] bytes (`TCP_NOTSENT_LOWAT`): a short message written
/// after a long one then waits for that much, not for the megabytes the
/// kernel would otherwise queue (a grant for a worker's results behind
/// the next chunk sent to it). Best effort.
pub fn short_send_queue(stream: &tokio::net::TcpStream) {
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "ios"))]
    let _ = socket2::SockRef::from(stream).set_tcp_notsent_lowat(NOT_SENT_LOW);
    #[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "ios")))]
    let _ = stream;
}

/// Hold what this end sends on `stream` to `bytes_per_sec` (the kernel
/// paces the segments: `SO_MAX_PACING_RATE`), or lift the limit (`None`).
/// Linux only: elsewhere an error says pacing is not available. `stream`
/// may be a duplicate of the socket's descriptor (the limit is the
/// socket's).
#[allow(unsafe_code)]
pub fn pace(stream: &impl std::os::fd::AsFd, bytes_per_sec: Option<u64>) -> std::io::Result<()> {
    #[cfg(all(
        target_os = "linux",
        not(any(
            target_arch = "mips",
            target_arch = "mips64",
            target_arch = "sparc",
            target_arch = "sparc64"
        ))
    ))]
    {
        use std::os::fd::AsRawFd;
        let stream = stream.as_fd();
        // <asm-generic/socket.h>; libc does not export it on every target.
        const SO_MAX_PACING_RATE: libc::c_int = 47;
        // u64::MAX is "no limit"; a rate of 0 would stop the socket.
        let rate: u64 = bytes_per_sec.map_or(u64::MAX, |r| r.max(1));
        // SAFETY: setsockopt reads `size_of::<u64>()` bytes from a live u64
        // for a descriptor this stream owns; it keeps no pointer.
        let rc = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_MAX_PACING_RATE,
                (&rate as *const u64).cast(),
                std::mem::size_of::<u64>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
    #[cfg(not(all(
        target_os = "linux",
        not(any(
            target_arch = "mips",
            target_arch = "mips64",
            target_arch = "sparc",
            target_arch = "sparc64"
        ))
    )))]
    {
        let _ = (stream, bytes_per_sec);
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "pacing a socket needs Linux",
        ))
    }
}

/// Every option and argument of `cmd` and its subcommands that has no help
/// line, as "command subcommand option" (for the tests that keep `--help`
/// complete, here and in `dls`).
pub fn undocumented(cmd: &clap::Command) -> Vec<String> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                out.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut out = Vec::new();
    walk(cmd, cmd.get_name(), &mut out);
    out
}

#[cfg(test)]
mod size_tests {
    use super::parse_size;

    #[test]
    fn sizes_take_units_and_percentages_and_refuse_nonsense_by_name() {
        let gib = 1u64 << 30;
        for (text, want) in [
            ("1048576", 1 << 20),
            ("512K", 512 << 10),
            ("512M", 512 << 20),
            ("512MiB", 512 << 20),
            ("2G", 2 * gib),
            ("2gb", 2 * gib),
            ("1.5G", 3 * gib / 2),
            ("1T", 1 << 40),
            ("50%", 8 * gib),
            ("12.5%", 2 * gib),
        ] {
            assert_eq!(parse_size(text, Some(16 * gib)), Ok(want), "{text}");
        }
        for (text, needle) in [
            ("0", "no memory"),
            ("0M", "no memory"),
            ("0.1", "no memory"),
            ("-3G", "not a size"),
            ("12X", "not a size"),
            ("", "not a size"),
            ("G", "not a size"),
            ("150%", "between 0 and 100"),
            ("0%", "between 0 and 100"),
            ("nan", "not a size"),
            ("1e30T", "more bytes than"),
        ] {
            let e = parse_size(text, Some(16 * gib)).expect_err(text);
            assert!(e.contains(needle) && e.contains(&format!("{text:?}")), "{text}: {e}");
        }
        assert!(parse_size("50%", None).expect_err("unknown").contains("give a size"));
    }
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
