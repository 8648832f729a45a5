//! Who may hold a connection to the daemon. At most `cap` connections are
//! open at once; when a new one arrives at the cap, the oldest connection
//! that has not authenticated is dropped to make room (it is told why):
//! the oldest that has not even said Hello first, so that clients that
//! open connections and say nothing can never push out a master in the
//! middle of its handshake. Connections that have authenticated are never
//! dropped for a newcomer; only when every slot holds one is the newcomer
//! refused. Plain synchronous bookkeeping; the server does the I/O.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The daemon's connection slots.
pub struct Gate {
    cap: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// Unauthenticated connections, oldest first, each with the means to
    /// drop it and whether it has said Hello.
    waiting: VecDeque<Waiting>,
    authenticated: usize,
}

struct Waiting {
    id: u64,
    drop_it: oneshot::Sender<()>,
    greeted: bool,
}

/// What happened to a connection that knocked.
pub enum Entry {
    /// It has a slot: the ticket frees it when dropped; the receiver fires
    /// if a newcomer takes its place before it authenticates. `evicted` says
    /// whether an older connection was dropped for it.
    Admitted {
        ticket: Ticket,
        evict: oneshot::Receiver<()>,
        evicted: bool,
    },
    /// Every slot holds an authenticated connection.
    Full,
}

/// A connection's slot.
pub struct Ticket {
    gate: Arc<Gate>,
    id: u64,
    authenticated: AtomicBool,
}

impl Gate {
    pub fn new(cap: usize) -> Arc<Gate> {
        Arc::new(Gate {
            cap: cap.max(1),
            inner: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The bookkeeping stays consistent even if a holder panicked.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection knocks.
    pub fn enter(self: &Arc<Self>) -> Entry {
        let mut g = self.lock();
        let mut evicted = false;
        if g.waiting.len() + g.authenticated >= self.cap {
            let silent = g.waiting.iter().position(|w| !w.greeted);
            match silent.or((!g.waiting.is_empty()).then_some(0)) {
                Some(pos) => {
                    if let Some(w) = g.waiting.remove(pos) {
                        let _ = w.drop_it.send(());
                    }
                    evicted = true;
                }
                None => return Entry::Full,
            }
        }
        let id = g.next;
        g.next += 1;
        let (tx, rx) = oneshot::channel();
        g.waiting.push_back(Waiting {
            id,
            drop_it: tx,
            greeted: false,
        });
        Entry::Admitted {
            ticket: Ticket {
                gate: self.clone(),
                id,
                authenticated: AtomicBool::new(false),
            },
            evict: rx,
            evicted,
        }
    }

    /// Connections open: (unauthenticated, authenticated).
    pub fn open(&self) -> (usize, usize) {
        let g = self.lock();
        (g.waiting.len(), g.authenticated)
    }
}

impl Ticket {
    /// The connection said a well-formed Hello: it is dropped for a
    /// newcomer only when no silent connection is left to drop.
    pub fn greeted(&self) {
        let mut g = self.gate.lock();
        if let Some(w) = g.waiting.iter_mut().find(|w| w.id == self.id) {
            w.greeted = true;
        }
    }

    /// The connection proved the token: it can no longer be dropped for a
    /// newcomer. False if it was dropped already.
    pub fn authenticated(&self) -> bool {
        if self.authenticated.load(Ordering::Relaxed) {
            return true;
        }
        let mut g = self.gate.lock();
        let Some(pos) = g.waiting.iter().position(|w| w.id == self.id) else {
            return false;
        };
        g.waiting.remove(pos);
        g.authenticated += 1;
        self.authenticated.store(true, Ordering::Relaxed);
        true
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut g = self.gate.lock();
        if self.authenticated.load(Ordering::Relaxed) {
            g.authenticated -= 1;
        } else if let Some(pos) = g.waiting.iter().position(|w| w.id == self.id) {
            g.waiting.remove(pos);
        }
    }
}

/// Lets a kind of log line through at most once per `every`, counting the
/// ones held back so the next line can say how many.
#[derive(Debug)]
pub struct LogLimit {
    every: Duration,
    last: Option<Instant>,
    held: u64,
}

impl LogLimit {
    pub fn new(every: Duration) -> LogLimit {
        LogLimit {
            every,
            last: None,
            held: 0,
        }
    }

    /// `Some(held back since the last line)` if a line may be written now.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(t) if now.duration_since(t) < self.every => {
                self.held += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.held))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(e: Entry) -> (Ticket, oneshot::Receiver<()>, bool) {
        match e {
            Entry::Admitted { ticket, evict, evicted } => (ticket, evict, evicted),
            Entry::Full => panic!("refused"),
        }
    }

    #[test]
    fn at_the_cap_the_oldest_unauthenticated_makes_room() {
        let gate = Gate::new(3);
        let (t0, _e0, _) = admitted(gate.enter());
        assert!(t0.authenticated());
        let (_t1, mut e1, _) = admitted(gate.enter());
        let (_t2, mut e2, _) = admitted(gate.enter());
        assert_eq!(gate.open(), (2, 1));
        // Full: the newcomer takes the place of connection 1, the oldest
        // unauthenticated, not of 0, which has authenticated.
        let (_t3, _e3, evicted) = admitted(gate.enter());
        assert!(evicted);
        assert!(e1.try_recv().is_ok(), "connection 1 is told to go");
        assert!(e2.try_recv().is_err(), "connection 2 stays");
        assert_eq!(gate.open(), (2, 1));
    }

    #[test]
    fn a_dropped_connection_cannot_authenticate_and_frees_nothing_twice() {
        let gate = Gate::new(1);
        let (t0, _e0, _) = admitted(gate.enter());
        let (t1, _e1, evicted) = admitted(gate.enter());
        assert!(evicted);
        assert!(!t0.authenticated(), "evicted before it proved the token");
        drop(t0);
        assert_eq!(gate.open(), (1, 0));
        assert!(t1.authenticated());
        assert_eq!(gate.open(), (0, 1));
        drop(t1);
        assert_eq!(gate.open(), (0, 0));
    }

    #[test]
    fn only_authenticated_connections_fill_the_gate() {
        let gate = Gate::new(2);
        let (a, _, _) = admitted(gate.enter());
        let (b, _, _) = admitted(gate.enter());
        assert!(a.authenticated() && b.authenticated());
        assert!(matches!(gate.enter(), Entry::Full));
        drop(a);
        let (_c, _, evicted) = admitted(gate.enter());
        assert!(!evicted);
    }

    #[test]
    fn silent_connections_go_before_one_that_said_hello() {
        let gate = Gate::new(3);
        let (master, mut em, _) = admitted(gate.enter());
        master.greeted();
        let mut silent = Vec::new();
        for _ in 0..2 {
            silent.push(admitted(gate.enter()));
        }
        // 100 more silent knocks while the master is between Hello and Auth.
        for _ in 0..100 {
            silent.push(admitted(gate.enter()));
            assert!(em.try_recv().is_err(), "the master mid-handshake was dropped");
        }
        assert!(master.authenticated());
        // With only greeted connections waiting, the oldest of them goes.
        let gate = Gate::new(2);
        let (a, mut ea, _) = admitted(gate.enter());
        let (b, mut eb, _) = admitted(gate.enter());
        a.greeted();
        b.greeted();
        let _c = admitted(gate.enter());
        assert!(ea.try_recv().is_ok() && eb.try_recv().is_err());
    }

    #[test]
    fn a_flood_never_displaces_an_authenticated_master() {
        // 10,000 knocks that never authenticate, with one master among them.
        let gate = Gate::new(32);
        let mut held = VecDeque::new();
        let mut master = None;
        for i in 0..10_000 {
            let (t, e, _) = admitted(gate.enter());
            if i == 5_000 {
                assert!(t.authenticated(), "the master proves its token in time");
                master = Some((t, e));
            } else {
                held.push_back((t, e));
                if held.len() > 40 {
                    held.pop_front();
                }
            }
            let (waiting, auth) = gate.open();
            assert!(waiting + auth <= 32);
        }
        let (_ticket, mut e) = master.expect("the master got in");
        assert!(e.try_recv().is_err(), "the master was never told to go");
        assert_eq!(gate.open().1, 1);
    }

    #[test]
    fn log_lines_are_limited_and_count_what_was_held_back() {
        let mut l = LogLimit::new(Duration::from_secs(1));
        let t = Instant::now();
        assert_eq!(l.allow(t), Some(0));
        for i in 1..=99 {
            assert_eq!(l.allow(t + Duration::from_millis(i * 10)), None);
        }
        assert_eq!(l.allow(t + Duration::from_millis(1000)), Some(99));
        assert_eq!(l.allow(t + Duration::from_millis(1500)), None);
    }
}
