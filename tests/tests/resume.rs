//! A master killed (SIGKILL) or stopped (SIGINT) in the middle of
//! `dls run --output`: the same command again finishes C, exact against
//! the naive product, computing only what the journal did not hold.
//! Real `dls` and worker processes; multi-round plans, so that results
//! come back all along the run.

mod common;
use common::Proc;
use dls_master::output::journal::Journal;
use dls_master::output::npy;
use dls_protocol::Values;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const M: usize = 240;
const N: usize = 48;

/// Two slowed workers (a run lasts seconds) and a batch in two files.
struct Bed {
    workers: Vec<Proc>,
    dir: PathBuf,
    a: Vec<f64>,
    b: Vec<f64>,
}

/// How many times their kernel's time the workers take. The journal is
/// made durable every `SYNC_EVERY` (0.5 s): a run must outlast a few
/// syncs. At 2,000 a processor with AVX-512 ran the whole batch in about a
/// second, and a kill at half the batch or ten products past the last
/// came after the run had ended.
const SLOWDOWN: &str = "8000";

impl Bed {
    fn new(tag: &str) -> Bed {
        let workers = vec![
            Proc::start(&["--slowdown", SLOWDOWN]),
            Proc::start(&["--slowdown", SLOWDOWN]),
        ];
        let dir = std::env::temp_dir().join(format!("dls-resume-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let a: Vec<f64> = (0..M * N * N).map(|i| ((i * 7 + 3) % 19) as f64 - 9.0).collect();
        let b: Vec<f64> = (0..M * N * N).map(|i| ((i * 5 + 1) % 17) as f64 - 8.0).collect();
        let bed = Bed { workers, dir, a, b };
        bed.write_inputs();
        let mut platform = String::new();
        for w in &bed.workers {
            platform.push_str(&format!(
                "[[worker]]\nname = \"{}\"\nc = 0.001\nw = 0.02\nd = 0.0005\n",
                w.addr
            ));
        }
        std::fs::write(bed.dir.join("platform.toml"), platform).expect("platform");
        bed
    }

    fn write_inputs(&self) {
        self.write_input("a.npy");
        self.write_input("b.npy");
    }

    fn write_input(&self, name: &str) {
        let v = if name == "a.npy" { &self.a } else { &self.b };
        let m = npy::Matrices {
            count: Some(M),
            rows: N,
            cols: N,
            data: Values::F64(v.clone()),
        };
        npy::write(&self.dir.join(name), &m).expect("writes an input");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn journal(&self) -> PathBuf {
        self.path(".c.npy.dls-journal")
    }

    fn start(&self, extra: &[&str]) -> Child {
        let list: Vec<&str> = self.workers.iter().map(|w| w.addr.as_str()).collect();
        Command::new(env!("CARGO_BIN_EXE_dls-under-test"))
            .args(["run", "--workers", &list.join(","), "--platform"])
            .arg(self.path("platform.toml"))
            .arg("--input")
            .args([self.path("a.npy"), self.path("b.npy")])
            .arg("--output")
            .arg(self.path("c.npy"))
            .args(["--strategy", "rounds", "--verify", "0", "--json"])
            .args(extra)
            .env_remove("DLS_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts dls")
    }

    /// Products the journal holds now.
    fn journalled(&self) -> usize {
        Journal::read(&self.journal())
            .expect("a readable journal")
            .map_or(0, |f| f.products_done())
    }

    /// Start a run and SIGKILL it once the journal holds at least `at`
    /// products; how many it held then.
    fn kill_after(&self, at: usize) -> usize {
        let mut child = self.start(&[]);
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.journalled() < at {
            assert!(
                child.try_wait().expect("waits").is_none(),
                "the run ended before it was killed"
            );
            assert!(Instant::now() < deadline, "the journal never reached {at}");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        self.journalled()
    }

    /// Run to the end; the `--json` summary.
    fn finish(&self, extra: &[&str]) -> serde_json::Value {
        let out = self.start(extra).wait_with_output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
    }

    /// C on disk is the naive product of the inputs, product by product.
    fn assert_c_exact(&self) {
        let c = npy::read(&self.path("c.npy")).expect("C");
        assert_eq!(c.count, Some(M));
        let c = c.data.to_f64(0..M * N * N);
        for i in 0..M {
            let r = i * N * N..(i + 1) * N * N;
            let want = dls_worker::kernel::naive(&self.a[r.clone()], &self.b[r.clone()], N);
            assert!(c[r].iter().zip(&want).all(|(x, y)| x == y), "product {i} differs");
        }
        assert!(!self.journal().exists(), "the journal goes once C is complete");
        assert!(!self.path(".c.npy.dls-partial").exists());
    }
}

fn resumed(summary: &serde_json::Value) -> (usize, usize) {
    let r = summary["resumed"].as_u64().expect("resumed") as usize;
    let load = summary["load"].as_u64().expect("load") as usize;
    (r, load)
}

#[test]
fn killed_early_or_late_the_same_command_finishes_c() {
    for (k, at) in [1usize, M / 2].into_iter().enumerate() {
        let bed = Bed::new(&format!("kill{k}"));
        let held = bed.kill_after(at);
        assert!(held >= at);
        let s = bed.finish(&[]);
        let (r, load) = resumed(&s);
        assert!(r >= held, "resumed {r}, but the journal held {held}");
        assert_eq!(r + load, M);
        bed.assert_c_exact();
    }
}

#[test]
fn killed_twice_in_a_row_then_finished() {
    let bed = Bed::new("twice");
    let first = bed.kill_after(10);
    let second = bed.kill_after(first + 10);
    assert!(second >= first + 10);
    let (r, load) = resumed(&bed.finish(&[]));
    assert!(r >= second);
    assert_eq!(r + load, M);
    bed.assert_c_exact();
}

#[test]
fn sigint_stops_within_seconds_and_the_rerun_finishes() {
    let bed = Bed::new("sigint");
    let mut child = bed.start(&[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while bed.journalled() < 5 {
        assert!(Instant::now() < deadline, "no results came back");
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent = Instant::now();
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok);
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break s;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "dls did not stop within 5 s of SIGINT"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(!status.success(), "an interrupted run exits non-zero");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err).expect("reads");
    assert!(err.contains("run the same command again"), "{err}");
    let held = bed.journalled();
    let (r, _) = resumed(&bed.finish(&[]));
    assert!(r >= held && held >= 5);
    bed.assert_c_exact();
}

#[test]
fn changed_inputs_are_refused_and_restart_takes_nothing_from_the_journal() {
    let mut bed = Bed::new("changed");
    let held = bed.kill_after(20);
    assert!(held >= 20);
    // B changes: the journal is not for this batch any more.
    bed.b[0] += 1.0;
    bed.write_input("b.npy");
    let out = bed.start(&[]).wait_with_output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("b.npy") && err.contains("--restart"), "{err}");
    let s = bed.finish(&["--restart"]);
    assert_eq!(resumed(&s), (0, M), "nothing taken from the journal");
    bed.assert_c_exact();
}
