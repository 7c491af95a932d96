//! The node host: runs the nodes one process hosts (one replica or other role, or a gateway's
//! client nodes) over real UDP, real timers, a real clock and a real file. Each node sits in a
//! [`NodeRunner`], the effect interpreter the simulator and the testkit use too, so the contract
//! (held sends, timer generations, the multicast rule, tickets) is the same everywhere; the host
//! performs the runner's actions:
//!
//! - sends to a node of this process are delivered locally, others are packed into datagrams;
//! - a timer is armed on a heap of monotonic deadlines and handed back to the runner when due
//!   (an absolute timer whose clock jumped back is armed again for when the clock gets there);
//! - writes are appended in ticket order; after one `fsync` per loop turn (group commit) the
//!   runner hears how many are durable and releases the sends that waited; a restart reads the
//!   file back; `check_invariants` runs after each input in debug builds;
//! - a client node takes one submission at a time: the host queues requests and hands them to
//!   free client nodes; an operation that runs past the timeout is answered as unknown and
//!   abandoned at its client node (`Node::on_abandon`), which stops retrying it; so is one whose
//!   Redis connection closed while it ran.

mod bulk;
mod faults;
mod incoming;
mod outgoing;
mod publish;
mod requests;
mod timers;

use crate::clock::{SkewedClock, monotonic_ns};
use crate::config::{ClusterFile, ConfigError, FileRole};
use crate::faults::FaultShim;
use crate::metrics::{Metrics, Transport};
use crate::storage::{self, Storage};
use crate::timer::PreciseTimer;
use crate::wire::{self, Header, Sealer};
use faults::Faults;
use incoming::Incoming;
use ordo_core::{
    Action, ClockReading, Command, CommandResult, NodeId, NodeRunner, PersistMode, Protocol, Role, RunnerSetup,
    TimerFiring, Topology,
};
use outgoing::Outgoing;
use publish::Publisher;
use requests::Requests;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use thiserror::Error;
use timers::Timers;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

/// Datagrams read per loop turn before the effects are flushed (bounds latency under load).
const RECV_BATCH_MAX: usize = 256;
/// Requests taken from the channel per loop turn.
const REQUEST_BATCH_MAX: usize = 1_024;
/// Socket buffer size asked of the kernel.
const SOCKET_BUFFER_BYTES: libc::c_int = 8 * 1024 * 1024;

/// A failure that stops a host.
#[derive(Debug, Error)]
pub enum HostError {
    /// The cluster file does not fit the protocol.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A socket, timer or file failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The node started, then failed while it ran (a durable write or its socket failed).
    /// Kept apart from the errors above, which stop a node before it serves anything, so that
    /// `ordo node` can tell a refused start (exit 2) from a failure (exit 1).
    #[error("failed while running: {0}")]
    Running(Box<HostError>),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HostError {
    let what = what.into();
    move |source| HostError::Io { what, source }
}

/// How an operation submitted to a gateway ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The protocol completed it.
    Done(CommandResult),
    /// No answer within the timeout: it may or may not have taken effect.
    Timeout,
    /// The gateway's queue is full.
    Busy,
}

/// A command for the gateway's client nodes.
pub struct Request {
    /// What to execute.
    pub command: Command,
    /// Where the outcome goes.
    pub reply: oneshot::Sender<Outcome>,
}

/// One node this process hosts: its runner and its durable file.
struct Local<P: Protocol> {
    id: NodeId,
    runner: NodeRunner<P>,
    storage: Storage,
}

impl<P: Protocol> Local<P> {
    /// The node: a host's nodes run for the life of the process.
    fn node(&self) -> &dyn ordo_core::Node<P> {
        self.runner.node().expect("a hosted node runs until its process ends")
    }

    /// Carries out a write the runner issued. Writes reach the file in ticket order, so the
    /// file's count of durable writes is the runner's ticket count. A failed write (disk full,
    /// I/O error, a record over the cap) leaves the storage failed, and the host stops at the
    /// end of the turn ([`Host::commit`]): without its durable state the node cannot keep its
    /// promises, and no send that waits for the write is ever released.
    fn write(&mut self, record: P::Durable, mode: PersistMode) {
        let written = match mode {
            PersistMode::Append => self.storage.append(&record),
            PersistMode::Replace => self.storage.replace(&record),
            PersistMode::Compact => self.storage.compact(record),
        };
        debug_assert!(written.is_ok() || self.storage.failed(), "a failed write fails the storage");
    }
}

/// A message for a node of this process, decoded or sent locally.
struct Input<P: Protocol> {
    from: NodeId,
    message: P::Message,
}

/// Messages waiting for the local node at the given index.
type Inbox<P> = VecDeque<(usize, Input<P>)>;

/// Where each node of the cluster lives: its process's address, and its local index when this
/// process hosts it. Fixed for the life of the process.
struct Routes {
    addr_of: Vec<SocketAddr>,
    local_of: Vec<Option<usize>>,
}

impl Routes {
    /// The address of `node`'s process, if the node exists.
    fn address(&self, node: NodeId) -> Option<SocketAddr> {
        self.addr_of.get(node.index()).copied()
    }

    /// `node`'s local index, if this process hosts it.
    fn local(&self, node: NodeId) -> Option<usize> {
        self.local_of.get(node.index()).copied().flatten()
    }
}

/// Everything one process runs: its nodes and the inputs waiting for them, plus one struct per
/// concern of the loop (see the submodules), each borrowed alone by the code of that concern.
pub struct Host<P: Protocol> {
    topology: Arc<Topology>,
    socket: UdpSocket,
    clock: SkewedClock,
    locals: Vec<Local<P>>,
    /// Reused buffer of the runner's actions.
    actions: Vec<Action<P>>,
    inbox: Inbox<P>,
    routes: Routes,
    timers: Timers<P>,
    outgoing: Outgoing,
    incoming: Incoming,
    /// Large messages received over TCP ([`bulk`]); none under network faults.
    bulk_inbox: Option<mpsc::Receiver<bulk::Received>>,
    faults: Faults,
    requests: Requests,
    transport: Transport,
    publisher: Publisher,
}

fn set_buffers(socket: &UdpSocket) {
    for option in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: a valid socket and a c_int option value; failure only leaves the default.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&SOCKET_BUFFER_BYTES as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// The nodes of entry `entry`, with their durable files opened: the nodes, what each persisted,
/// and every cluster node's local index.
type Opened<P> = (Vec<Local<P>>, Vec<Vec<<P as Protocol>::Durable>>, Vec<Option<usize>>);

/// Opens the durable file of every node that entry `entry` of `cluster` hosts and sets up its
/// runner. A client node's file is removed first.
fn open_locals<P: Protocol>(
    cluster: &ClusterFile,
    entry: usize,
    entry_of: &[usize],
    setup: &RunnerSetup<P>,
) -> Result<Opened<P>, HostError> {
    let me = &cluster.nodes[entry];
    let mut locals = Vec::new();
    let mut booted = Vec::new();
    let mut local_of = vec![None; setup.topology.nodes.len()];
    for (index, &node_entry) in entry_of.iter().enumerate() {
        if node_entry != entry {
            continue;
        }
        let id = NodeId(index as u32);
        let path = cluster.data_dir.join(storage::durable_file_name(&me.name, id.0));
        if setup.topology.node(id).role == Role::Client {
            // Client nodes restart fresh: request numbers start at 1 again, under a new client
            // id (the boot number is its incarnation), so replicas never mistake them for retries.
            let _ = std::fs::remove_file(&path);
        }
        let (storage, durable) = Storage::open::<P::Durable>(&path, cluster.runtime.fsync)
            .map_err(io(format!("durable storage of {id}")))?;
        local_of[index] = Some(locals.len());
        // The boot number is the incarnation: it differs between a node's processes.
        locals.push(Local { id, runner: NodeRunner::new(id, setup.clone()), storage });
        booted.push(durable);
    }
    Ok((locals, booted, local_of))
}

impl<P: Protocol> Host<P> {
    /// Builds the host of the node entry `entry` of `cluster` (inside a tokio runtime): binds its
    /// socket, opens its files and boots its nodes from what they persisted.
    pub async fn new(cluster: &ClusterFile, entry: usize, metrics: Arc<Mutex<Metrics>>) -> Result<Self, HostError> {
        let config = cluster.protocol_config::<P>()?;
        let placement = cluster.placement::<P>(&config)?;
        let topology = Arc::new(placement.topology);
        let me = &cluster.nodes[entry];
        let socket = UdpSocket::bind(me.addr).await.map_err(io(format!("bind UDP {}", me.addr)))?;
        set_buffers(&socket);
        let addr_of: Vec<SocketAddr> = placement.entry_of.iter().map(|&e| cluster.nodes[e].addr).collect();
        let boot = crate::clock::realtime_ns() ^ (u64::from(std::process::id()) << 32);
        let setup = RunnerSetup {
            topology: topology.clone(),
            config: config.clone(),
            run_seed: cluster.runtime.seed,
            new_state_machine: ordo_core::KvStore::boxed,
            check_invariants: cfg!(debug_assertions),
        };
        let (locals, booted, local_of) = open_locals(cluster, entry, &placement.entry_of, &setup)?;
        let free_clients =
            (0..locals.len()).rev().filter(|&i| topology.node(locals[i].id).role == Role::Client).collect();
        let datagram_max = cluster.runtime.datagram_max.clamp(1_024, wire::DATAGRAM_MAX);
        let start_ns = monotonic_ns();
        let shim = FaultShim::new(&cluster.faults, &topology, cluster.runtime.seed ^ (entry as u64) << 17)?;
        let bulk_inbox = if shim.has_network_faults() {
            None
        } else {
            let listener = tokio::net::TcpListener::bind(me.addr)
                .await
                .map_err(io(format!("bind TCP {} (large messages)", me.addr)))?;
            Some(bulk::listen(listener))
        };
        let cluster_hash = cluster.cluster_hash();
        let key = cluster.cluster_key()?;
        // The wire's boot is the start time, so a restarted process's datagrams supersede its
        // earlier incarnation's in its peers' replay windows.
        let header = Header { cluster: cluster_hash, boot: crate::clock::realtime_ns() };
        let runtime = &cluster.runtime;
        let mut host = Host {
            socket,
            clock: SkewedClock::new(&me.clock),
            requests: Requests::new(
                free_clients,
                locals.len(),
                runtime.op_timeout_ns.max(1_000_000),
                runtime.gateway_queue_max.max(1),
            ),
            locals,
            actions: Vec::new(),
            inbox: VecDeque::new(),
            routes: Routes { addr_of, local_of },
            timers: Timers::new(),
            outgoing: Outgoing::new(header, Sealer::new(key.clone()), datagram_max, shim.has_network_faults()),
            incoming: Incoming::new(cluster_hash, key, datagram_max),
            bulk_inbox,
            faults: Faults::new(shim, start_ns),
            transport: Transport::default(),
            publisher: Publisher::new(metrics),
            topology,
        };
        for (index, durable) in booted.into_iter().enumerate() {
            host.step(index, |runner, now, actions| runner.boot(now, boot, durable, actions));
        }
        host.flush();
        host.commit()?;
        host.publish_metrics(true);
        host.publisher.label(P::NAME, me.name.clone(), format!("{:?}", me.role).to_lowercase());
        Ok(host)
    }

    /// Runs until `requests` closes (when given) or forever.
    pub async fn run(mut self, mut requests: Option<mpsc::Receiver<Request>>) -> Result<(), HostError> {
        let mut timer = PreciseTimer::new().map_err(io("timerfd"))?;
        let mut requests_open = requests.is_some();
        let mut bulk = self.bulk_inbox.take();
        loop {
            let now = monotonic_ns();
            let wake = self.next_wake(now);
            timer.arm_no_later_than(wake).map_err(io("arm timer"))?;
            let paused = self.faults.is_paused(now);
            tokio::select! {
                readable = self.socket.readable(), if !paused => {
                    readable.map_err(io("UDP readable"))?;
                    self.receive();
                }
                fired = timer.wait() => fired.map_err(io("timer"))?,
                received = async { bulk.as_mut().expect("listening").recv().await }, if bulk.is_some() && !paused => {
                    match received {
                        Some((peer, sealed)) => {
                            self.incoming.on_bulk(&sealed, peer, &self.routes, &mut self.inbox, &mut self.transport);
                            self.drain_inbox();
                        }
                        None => bulk = None,
                    }
                }
                request = async { requests.as_mut().expect("open").recv().await }, if requests_open => {
                    match request {
                        Some(request) => {
                            self.requests.enqueue(request, &mut self.transport);
                            let channel = requests.as_mut().expect("open");
                            for _ in 0..REQUEST_BATCH_MAX {
                                match channel.try_recv() {
                                    Ok(request) => self.requests.enqueue(request, &mut self.transport),
                                    Err(_) => break,
                                }
                            }
                        }
                        None => {
                            requests_open = false;
                            if self.locals.iter().all(|l| self.topology.node(l.id).role == Role::Client) {
                                return Ok(());
                            }
                        }
                    }
                }
            }
            self.turn()?;
        }
    }

    /// Everything done after the inputs of one wake-up: due timers, faults, local deliveries,
    /// dispatch, timeouts, flush, group commit, metrics.
    fn turn(&mut self) -> Result<(), HostError> {
        let now = monotonic_ns();
        self.faults.apply_node_faults(now, self.locals.iter().map(|l| l.id), &mut self.clock);
        self.fire_timers(now);
        self.outgoing.release_delayed(now, self.fd(), &mut self.transport);
        self.dispatch(now);
        for (index, op) in self.requests.expire(now, &mut self.transport) {
            self.step(index, |runner, now, actions| runner.abandon(now, op, actions));
        }
        for (index, op) in self.requests.abandon_closed(now, &mut self.transport) {
            self.step(index, |runner, now, actions| runner.abandon(now, op, actions));
        }
        self.drain_inbox();
        self.flush();
        self.commit()?;
        if let Some(digest) = self.publisher.due(now) {
            self.publish_metrics(digest);
        }
        Ok(())
    }

    fn next_wake(&self, now: u64) -> Option<u64> {
        let timers = self.timers.next_deadline();
        let delayed = self.outgoing.next_delayed();
        let operations = self.requests.next_deadline();
        let metrics = Some(self.publisher.next_due(now));
        let pause = self.faults.pause_end();
        [timers, delayed, operations, metrics, pause].into_iter().flatten().min()
    }

    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    // ---- inputs ------------------------------------------------------------------------

    /// Reads datagrams until the socket is drained or the turn's batch is full, delivering each
    /// read's messages before the next read.
    fn receive(&mut self) {
        let mut taken = 0;
        while taken < RECV_BATCH_MAX {
            let batch = self.incoming.read_batch(&self.socket, &self.routes, &mut self.inbox, &mut self.transport);
            taken += batch.count;
            // Urgent messages first, each class in arrival order (`Protocol::is_urgent`), as the
            // simulator serves a busy node's queue.
            self.inbox.make_contiguous().sort_by_key(|(_, input)| !P::is_urgent(&input.message));
            self.drain_inbox();
            if !batch.more {
                return;
            }
        }
    }

    fn drain_inbox(&mut self) {
        while let Some((index, Input { from, message })) = self.inbox.pop_front() {
            self.step(index, |runner, now, actions| runner.deliver(now, from, message, actions));
        }
    }

    fn fire_timers(&mut self, now: u64) {
        while let Some((index, generation, timer)) = self.timers.pop_due(now) {
            let mut not_yet = None;
            self.step(index, |runner, now, actions| {
                if let TimerFiring::NotYet(local_ns) = runner.fire_timer(now, timer.clone(), generation, actions) {
                    not_yet = Some(local_ns);
                }
            });
            if let Some(local_ns) = not_yet {
                // The clock jumped back: wait until it reads the target again.
                self.timers.rearm(&self.clock, now, index, generation, local_ns, timer);
            }
            self.drain_inbox();
        }
        self.timers.prune(&self.locals);
    }

    /// Hands queued requests to free client nodes.
    fn dispatch(&mut self, now: u64) {
        while let Some((index, submission)) = self.requests.next_submission(now) {
            self.step(index, |runner, now, actions| runner.submit(now, submission, actions));
        }
    }

    // ---- the node and its effects ----------------------------------------------------------

    /// Runs one step of a local node's runner with the clock's reading and performs its actions.
    fn step(&mut self, index: usize, step: impl FnOnce(&mut NodeRunner<P>, ClockReading, &mut Vec<Action<P>>)) {
        let reading = self.clock.now();
        let mut actions = std::mem::take(&mut self.actions);
        step(&mut self.locals[index].runner, reading, &mut actions);
        for action in actions.drain(..) {
            self.perform(index, action);
        }
        self.actions = actions;
    }

    /// Carries out one of the runner's actions for local node `index`.
    fn perform(&mut self, index: usize, action: Action<P>) {
        let id = self.locals[index].id;
        match action {
            Action::Send { to, message } => {
                self.outgoing.transmit(id, &to, message, &self.routes, &mut self.inbox, &mut self.transport)
            }
            Action::Complete { op, result } => self.requests.complete(index, op, result, &mut self.transport),
            Action::ArmTimer { timer, generation, deadline } => {
                self.timers.arm(&self.clock, index, generation, deadline, timer)
            }
            // Writes reach the file in ticket order, so the ticket needs no bookkeeping here.
            Action::Write { record, mode, ticket: _ } => self.locals[index].write(record, mode),
            // Global checkers run in simulation only.
            Action::Observe(_) => {}
        }
    }

    fn flush(&mut self) {
        let fd = self.fd();
        self.outgoing.flush(fd, &mut self.faults, &mut self.transport);
    }

    /// Group commit: one write and `fsync` per node for everything issued this turn, then the
    /// sends that waited on it leave.
    fn commit(&mut self) -> Result<(), HostError> {
        for index in 0..self.locals.len() {
            let local = &mut self.locals[index];
            // A `Replace` write is durable when it returns: its notice is still owed to the node.
            let unnoticed = local.runner.writes_durable_count() < local.storage.durable();
            let failed = local.storage.failed();
            // A compaction written in the background lands at the first sync after it is done.
            let compacting = local.storage.compacting();
            if !local.storage.dirty() && local.runner.held_count() == 0 && !unnoticed && !failed && !compacting {
                continue;
            }
            // A failed storage fails here again, and the error stops the host.
            let durable = local.storage.sync().map_err(io(format!("durable storage of {}", local.id)))?;
            self.step(index, |runner, now, actions| runner.writes_durable(now, durable, actions));
        }
        self.drain_inbox();
        self.flush();
        Ok(())
    }

    /// Refreshes the metrics snapshot (and the state digests when `digest`).
    fn publish_metrics(&mut self, digest: bool) {
        let mut transport = self.transport.clone();
        transport.reassembly_partial = self.incoming.reassembly_partial();
        transport.reassembly_abandoned = self.incoming.reassembly_abandoned();
        transport.fault_counts = self.faults.counts();
        transport.requests_queued = self.requests.queued();
        transport.clients_busy = self.requests.busy_count();
        self.publisher.publish(digest, &self.topology, &self.locals, transport, self.requests.latency());
    }

    /// True when this host runs a gateway's client nodes.
    pub fn is_gateway(cluster: &ClusterFile, entry: usize) -> bool {
        cluster.nodes[entry].role == FileRole::Gateway
    }
}
