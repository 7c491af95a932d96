//! Who gets a connection: the accept loop, the connection cap and the idle connections that
//! give way to new ones.
//!
//! The rule that keeps a new client from being locked out: at the cap (`connections_max`, Redis'
//! `maxclients`), the connection that has waited longest for its next request, with nothing in
//! flight, is closed to admit the new one. Only when every connection is busy is the new one
//! refused, with Redis' `-ERR max number of clients reached`. Idle connections also close by
//! themselves after the idle timeout. The cap is lowered to what the process' file-descriptor
//! limit allows, after raising the soft limit to the hard one, so that `accept` does not fail
//! with EMFILE below the cap; accept errors (EMFILE, ENFILE, ENOBUFS...) are counted and followed
//! by a pause, doubling from 10 ms to 1 s, so that a persistent one does not spin a core.

use super::Gateway;
use super::session::ServerFacts;
use crate::host::Request;
use crate::metrics::Metrics;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};

/// Descriptors kept for everything but Redis connections (listeners, the UDP socket, the
/// durable file, metrics connections, the runtime's own).
const DESCRIPTORS_RESERVED: u64 = 128;

/// The first pause after an accept error, and the longest.
const ACCEPT_PAUSE_MIN: Duration = Duration::from_millis(10);
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Connections waiting for their next request with nothing in flight, with when they started
/// waiting and how to close them.
#[derive(Debug, Default)]
pub struct Idle {
    waiting: BTreeMap<u64, (Instant, Rc<Notify>)>,
    /// Connections told to close that have not yet seen it (their task had not run).
    evicted: std::collections::BTreeSet<u64>,
}

impl Idle {
    /// Records that connection `id` waits for a request from `now` (unless it already did:
    /// it keeps its earlier time); returns what wakes it to close.
    pub fn enter(&mut self, id: u64, now: Instant) -> Rc<Notify> {
        if self.evicted.contains(&id) {
            let closing = Rc::new(Notify::new());
            closing.notify_one();
            return closing;
        }
        self.waiting.entry(id).or_insert_with(|| (now, Rc::new(Notify::new()))).1.clone()
    }

    /// Connection `id` is no longer waiting (it read something, or closed).
    pub fn leave(&mut self, id: u64) {
        self.waiting.remove(&id);
        self.evicted.remove(&id);
    }

    /// Tells the connection idle the longest to close; its id, or None when none is idle.
    pub fn evict_idlest(&mut self) -> Option<u64> {
        let id = self.waiting.iter().min_by_key(|(id, (since, _))| (*since, **id)).map(|(id, _)| *id)?;
        let (_, notify) = self.waiting.remove(&id).expect("just found");
        // A permit is kept if the connection is not polling yet, and `enter` hands out another
        // to a connection whose task had not run yet, so it closes either way.
        notify.notify_one();
        self.evicted.insert(id);
        Some(id)
    }

    /// Connections waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// True when no connection waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// Raises the soft limit on open files to the hard limit and returns the most Redis
/// connections it leaves room for (at least 1).
fn descriptor_room() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write only the struct passed by reference.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return u64::MAX;
        }
        // An unlimited hard limit cannot be the soft one: the kernel caps it at `nr_open`.
        let ceiling = if limit.rlim_max == libc::RLIM_INFINITY { nr_open() } else { limit.rlim_max };
        if limit.rlim_cur < ceiling {
            let raised = libc::rlimit { rlim_cur: ceiling, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    // `rlim_t` is u64 on Linux but not on every target.
    #[allow(clippy::unnecessary_cast)]
    let files = limit.rlim_cur as u64;
    files.saturating_sub(DESCRIPTORS_RESERVED).max(1)
}

/// The kernel's most open files per process (Linux' `fs.nr_open`; its default when unreadable).
fn nr_open() -> libc::rlim_t {
    std::fs::read_to_string("/proc/sys/fs/nr_open").ok().and_then(|text| text.trim().parse().ok()).unwrap_or(1 << 20)
}

/// Serves Redis connections on `address`, sending commands to the host through `requests` and
/// counting accept errors and evictions in `metrics`.
pub async fn serve(
    address: SocketAddr,
    requests: mpsc::Sender<Request>,
    mut facts: ServerFacts,
    metrics: Arc<Mutex<Metrics>>,
) -> std::io::Result<()> {
    let room = descriptor_room();
    if (facts.connections_max as u64) > room {
        eprintln!(
            "gateway: connections_max {} lowered to {room}: the open-files limit leaves room for no more",
            facts.connections_max
        );
        facts.connections_max = room as usize;
    }
    let listener = TcpListener::bind(address).await?;
    let gateway = Rc::new(Gateway::new(facts));
    tokio::task::spawn_local(super::expiry::sweep(gateway.expiring.clone(), requests.clone()));
    let mut pause = ACCEPT_PAUSE_MIN;
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => {
                metrics.lock().expect("metrics lock").gateway.accept_errors += 1;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(ACCEPT_PAUSE_MAX);
                continue;
            }
        };
        pause = ACCEPT_PAUSE_MIN;
        let _ = stream.set_nodelay(true);
        if gateway.clients.borrow().len() >= gateway.facts.connections_max {
            if gateway.idle.borrow_mut().evict_idlest().is_none() {
                metrics.lock().expect("metrics lock").gateway.refused += 1;
                let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                continue;
            }
            metrics.lock().expect("metrics lock").gateway.evicted += 1;
        }
        let local = stream.local_addr().unwrap_or(address);
        let id = gateway.open(peer, local, stream.as_raw_fd());
        let requests = requests.clone();
        let gateway = gateway.clone();
        tokio::task::spawn_local(async move {
            let _ = super::pipeline::connection(&mut stream, requests, &gateway, id).await;
            gateway.close(id);
        });
    }
}
