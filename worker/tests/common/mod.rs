//! What the daemon's tests share: a real `dls-worker` process on
//! 127.0.0.1 and a master's end of a connection to it.
#![allow(dead_code)]

use dls_protocol::{handshake, Connection, ErrorCode, Frame, FromWorker, ToWorker, Token};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::net::TcpStream;

pub const T: Duration = Duration::from_secs(20);

pub struct Daemon {
    pub child: Child,
    pub addr: String,
}

impl Daemon {
    pub fn start(extra: &[&str], token: Option<&str>) -> Daemon {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dls-worker"));
        cmd.args(["--listen", "127.0.0.1:0", "--threads", "1"])
            .args(extra)
            .env_remove("DLS_TOKEN")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(t) = token {
            cmd.env("DLS_TOKEN", t);
        }
        let mut child = cmd.spawn().expect("starts dls-worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("reads the listening line");
        let addr = line.trim().rsplit(' ').next().expect("an address").to_string();
        assert!(line.starts_with("dls-worker listening on"), "{line:?}");
        Daemon { child, addr }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub type Master = Connection<TcpStream, FromWorker, ToWorker>;

pub async fn raw(addr: &str) -> Master {
    let s = TcpStream::connect(addr).await.expect("connects");
    s.set_nodelay(true).expect("nodelay");
    Connection::new(s)
}

pub async fn master(addr: &str, token: Option<&str>) -> dls_protocol::Result<Master> {
    let mut c = raw(addr).await;
    let t = token.and_then(Token::parse);
    handshake::master(&mut c, t.as_ref(), 1 << 30, T).await?;
    Ok(c)
}

/// A master that follows one the daemon just refused or dropped: the
/// daemon frees its session slot a moment after it sends the error, so
/// Busy is retried for up to five seconds.
pub async fn next_master(addr: &str, token: Option<&str>) -> Master {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match master(addr, token).await {
            Ok(c) => return c,
            Err(dls_protocol::Error::Remote {
                code: ErrorCode::Busy, ..
            }) if std::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("handshake: {e:?}"),
        }
    }
}

pub async fn next(c: &mut Master) -> FromWorker {
    tokio::time::timeout(T, c.read_frame())
        .await
        .expect("in time")
        .expect("valid frame")
        .expect("a frame")
        .msg
}

pub async fn expect_error(c: &mut Master, code: ErrorCode) -> String {
    match tokio::time::timeout(T, c.read_frame()).await.expect("in time") {
        Ok(Some(Frame {
            msg: FromWorker::Error { code: got, message },
            ..
        })) => {
            assert_eq!(got, code, "{message}");
            message
        }
        other => panic!("expected an error frame {code:?}, got {other:?}"),
    }
}
