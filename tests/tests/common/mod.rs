//! Worker daemons as real processes, for the cross-crate tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct Proc {
    pub child: Child,
    pub addr: String,
    /// Lines the daemon logs (stderr), as they come.
    pub log: mpsc::Receiver<String>,
}

impl Proc {
    pub fn start(extra: &[&str]) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dls-worker-under-test"))
            .args(["--listen", "127.0.0.1:0", "--threads", "1"])
            .args(extra)
            .env_remove("DLS_TOKEN")
            .env("RUST_LOG", "dls_worker=debug")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts the worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("reads the listening line");
        let addr = line.trim().rsplit(' ').next().expect("address").to_string();
        let (tx, log) = mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { child, addr, log }
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill {sig} failed");
    }

    /// Block until the daemon logs a line containing `needle` (at most 60 s).
    pub fn wait_for(log: &mpsc::Receiver<String>, needle: &str) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match log.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.signal_quiet("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn signal_quiet(&self, sig: &str) -> std::io::Result<std::process::ExitStatus> {
        Command::new("kill").args([sig, &self.child.id().to_string()]).status()
    }
}

/// The token of [`token_file`].
pub const TOKEN: &str = "access-test-token-0123456789";

/// A token file only its owner can read, in a directory of its own.
pub fn token_file(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dls-access-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("token");
    std::fs::write(&path, TOKEN).expect("writes the token");
    std::fs::set_permissions(
        &path,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600),
    )
    .expect("chmod 600");
    path
}

/// `p` workers w0, w1, ... with the same costs.
pub fn equal_platform(p: usize, c: f64, w: f64, d: f64) -> dls_lp::Platform {
    dls_lp::Platform::new((0..p).map(|i| dls_lp::Worker::new(format!("w{i}"), c, w, d)).collect()).expect("platform")
}

/// A pool of every worker of the comma-separated `list`, named w0, w1, ...
/// in its order.
pub async fn pool_of(
    list: &str,
    token: Option<&dls_protocol::Token>,
    t: dls_master::session::ConnectOptions,
) -> dls_master::session::Pool {
    let cluster = dls_master::config::cluster::Cluster::from_list_indexed(list).expect("cluster");
    dls_master::session::Pool::connect(&cluster, token, t)
        .await
        .expect("connects")
}

/// Accept one master on `listener` and complete the handshake as a worker
/// without a token whose kernel is called `kernel`.
pub async fn fake_worker(
    listener: tokio::net::TcpListener,
    kernel: &str,
) -> dls_protocol::Connection<tokio::net::TcpStream, dls_protocol::ToWorker, dls_protocol::FromWorker> {
    use dls_protocol::{handshake, Capabilities, Connection};
    let (stream, _) = listener.accept().await.expect("accepts");
    let mut conn = Connection::new(stream);
    let caps = Capabilities {
        cores: 1,
        threads: 1,
        memory_limit: 1 << 30,
        kernel: kernel.into(),
        emulated: false,
        ciphers: Vec::new(),
        session: 0,
    };
    let side = handshake::WorkerSide {
        token: None,
        caps: &caps,
        frame_cap: 1 << 32,
        timeout: Duration::from_secs(5),
        require_encrypt: false,
        status: None,
    };
    handshake::worker(&mut conn, &side, || {}, || Ok(()))
        .await
        .expect("handshake");
    conn
}
