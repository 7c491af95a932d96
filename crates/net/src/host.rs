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
//!   free client nodes; an operation that runs past the timeout is answered as unknown, and the
//!   next submission to that client abandons it (as `Submission` documents).

use crate::clock::{SkewedClock, monotonic_ns};
use crate::config::{ClusterFile, ConfigError, FileRole};
use crate::faults::{FaultShim, NodeFault, Verdict};
use crate::metrics::{LocalNodeMetrics, Metrics, Transport};
use crate::storage::{self, Storage};
use crate::timer::PreciseTimer;
use crate::udp::{Receiver, Sender, Sent};
use crate::wire::{self, Body, Header, Packer, Reassembly};
use ordo_core::{
    Action, ClockReading, Command, CommandResult, Deadline, NodeId, NodeRunner, PersistMode, Protocol, Role,
    RunnerSetup, Submission, Targets, TimerFiring, Topology,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use thiserror::Error;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

/// Datagrams read per loop turn before the effects are flushed (bounds latency under load).
const RECV_BATCH_MAX: usize = 256;
/// Datagrams taken per `recvmmsg` call.
const RECV_SLOTS: usize = 32;
/// Requests taken from the channel per loop turn.
const REQUEST_BATCH_MAX: usize = 1_024;
/// Partial fragmented messages held per process.
const REASSEMBLY_ENTRIES_MAX: usize = 256;
/// Fragmented messages not completed within this are dropped.
const REASSEMBLY_EXPIRY_NS: u64 = 5_000_000_000;
/// Socket buffer size asked of the kernel.
const SOCKET_BUFFER_BYTES: libc::c_int = 8 * 1024 * 1024;
/// How often the metrics snapshot is refreshed.
const METRICS_PERIOD_NS: u64 = 200_000_000;
/// How often the replicas' state digests are recomputed (they walk every key).
const DIGEST_PERIOD_NS: u64 = 1_000_000_000;

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

/// A client node's current operation.
struct Busy {
    op: u64,
    deadline_ns: u64,
    started_ns: u64,
    reply: oneshot::Sender<Outcome>,
}

/// One node this process hosts.
struct Local<P: Protocol> {
    id: NodeId,
    runner: NodeRunner<P>,
    storage: Storage,
    busy: Option<Busy>,
}

impl<P: Protocol> Local<P> {
    /// The node: a host's nodes run for the life of the process.
    fn node(&self) -> &dyn ordo_core::Node<P> {
        self.runner.node().expect("a hosted node runs until its process ends")
    }
}

/// A message for a node of this process, decoded or sent locally.
struct Input<P: Protocol> {
    from: NodeId,
    message: P::Message,
}

/// Pending timers ordered by deadline: (monotonic deadline, local node, generation, timer).
type TimerHeap<T> = BinaryHeap<Reverse<(u64, usize, u64, T)>>;
/// Datagrams the fault shim holds back: (release time, sequence, bytes, destination).
type DelayedHeap = BinaryHeap<Reverse<(u64, u64, Vec<u8>, SocketAddr)>>;

/// Which datagrams a message shares: those to the same process. When the fault shim has
/// network faults, also the same sending and receiving node, so that a datagram's fate (a
/// partition between two nodes, say) concerns one link, as in the simulator.
type PackerKey = (SocketAddr, Option<(u32, u32)>);

/// Everything one process runs.
pub struct Host<P: Protocol> {
    topology: Arc<Topology>,
    cluster_hash: u64,
    boot: u64,
    addr_of: Vec<SocketAddr>,
    socket: UdpSocket,
    clock: SkewedClock,
    locals: Vec<Local<P>>,
    local_of: Vec<Option<usize>>,
    actions: Vec<Action<P>>,
    inbox: VecDeque<(usize, Input<P>)>,
    timer_heap: TimerHeap<P::Timer>,
    packers: BTreeMap<PackerKey, Packer>,
    /// Per-link packing (see [`PackerKey`]).
    packing_per_link: bool,
    sender: Sender,
    receiver: Receiver,
    /// Reused buffer for encoding one message.
    encoded: Vec<u8>,
    datagram_max: usize,
    message_len_max: usize,
    next_message_number: u64,
    reassembly: Reassembly,
    shim: FaultShim,
    delayed: DelayedHeap,
    start_ns: u64,
    paused_until_ns: u64,
    requests: VecDeque<Request>,
    free_clients: Vec<usize>,
    /// Outstanding operations by number, so by deadline too (every operation gets the same
    /// timeout from a monotonic start): the first is the next to expire. Bounded by the client
    /// nodes, which take one operation each.
    outstanding: BTreeMap<u64, usize>,
    next_op: u64,
    op_timeout_ns: u64,
    queue_max: usize,
    transport: Transport,
    metrics: Arc<Mutex<Metrics>>,
    latency: hdrhistogram::Histogram<u64>,
    metrics_due_ns: u64,
    digest_due_ns: u64,
    digests: BTreeMap<u32, u64>,
}

fn set_buffers(socket: &UdpSocket) {
    use std::os::fd::AsRawFd;
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

fn new_state_machine() -> Box<dyn ordo_core::StateMachine> {
    Box::new(ordo_core::KvStore::new())
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
            new_state_machine,
            check_invariants: cfg!(debug_assertions),
        };
        let mut locals = Vec::new();
        let mut booted = Vec::new();
        let mut local_of = vec![None; topology.nodes.len()];
        for (index, &node_entry) in placement.entry_of.iter().enumerate() {
            if node_entry != entry {
                continue;
            }
            let id = NodeId(index as u32);
            let path = cluster.data_dir.join(storage::durable_file_name(&me.name, id.0));
            if topology.node(id).role == Role::Client {
                // Client nodes restart fresh: request numbers start at 1 again, under a new client
                // id (the boot number is its incarnation), so replicas never mistake them for retries.
                let _ = std::fs::remove_file(&path);
            }
            let (storage, durable) = Storage::open::<P::Durable>(&path, cluster.runtime.fsync)
                .map_err(io(format!("open {}", path.display())))?;
            local_of[index] = Some(locals.len());
            // The boot number is the incarnation: it differs between a node's processes.
            locals.push(Local { id, runner: NodeRunner::new(id, setup.clone()), storage, busy: None });
            booted.push(durable);
        }
        let free_clients =
            (0..locals.len()).rev().filter(|&i| topology.node(locals[i].id).role == Role::Client).collect();
        let datagram_max = cluster.runtime.datagram_max.clamp(1_024, wire::DATAGRAM_MAX);
        let start_ns = monotonic_ns();
        let shim = FaultShim::new(&cluster.faults, cluster.runtime.seed ^ (entry as u64) << 17);
        let mut host = Host {
            cluster_hash: cluster.cluster_hash(),
            boot,
            addr_of,
            socket,
            clock: SkewedClock::new(&me.clock),
            locals,
            local_of,
            actions: Vec::new(),
            inbox: VecDeque::new(),
            timer_heap: BinaryHeap::new(),
            packers: BTreeMap::new(),
            packing_per_link: shim.has_network_faults(),
            sender: Sender::default(),
            receiver: Receiver::new(RECV_SLOTS),
            encoded: Vec::new(),
            datagram_max,
            message_len_max: wire::message_len_max(datagram_max),
            next_message_number: 0,
            reassembly: Reassembly::new(
                REASSEMBLY_ENTRIES_MAX,
                wire::message_len_max(datagram_max),
                REASSEMBLY_EXPIRY_NS,
            ),
            shim,
            delayed: BinaryHeap::new(),
            start_ns,
            paused_until_ns: 0,
            requests: VecDeque::new(),
            free_clients,
            outstanding: BTreeMap::new(),
            next_op: 0,
            op_timeout_ns: cluster.runtime.op_timeout_ns.max(1_000_000),
            queue_max: cluster.runtime.gateway_queue_max.max(1),
            transport: Transport::default(),
            metrics,
            latency: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
            metrics_due_ns: 0,
            digest_due_ns: 0,
            digests: BTreeMap::new(),
            topology,
        };
        for (index, durable) in booted.into_iter().enumerate() {
            host.step(index, |runner, now, actions| runner.boot(now, boot, durable, actions));
        }
        host.flush();
        host.commit()?;
        host.publish_metrics(true);
        {
            let mut m = host.metrics.lock().expect("metrics lock");
            m.protocol = P::NAME;
            m.name = me.name.clone();
            m.role = format!("{:?}", me.role).to_lowercase();
        }
        Ok(host)
    }

    /// Runs until `requests` closes (when given) or forever.
    pub async fn run(mut self, mut requests: Option<mpsc::Receiver<Request>>) -> Result<(), HostError> {
        let mut timer = PreciseTimer::new().map_err(io("timerfd"))?;
        let mut requests_open = requests.is_some();
        loop {
            let now = monotonic_ns();
            let wake = self.next_wake(now);
            timer.arm_no_later_than(wake).map_err(io("arm timer"))?;
            let paused = self.paused_until_ns > now.saturating_sub(self.start_ns);
            tokio::select! {
                readable = self.socket.readable(), if !paused => {
                    readable.map_err(io("UDP readable"))?;
                    self.receive();
                }
                fired = timer.wait() => fired.map_err(io("timer"))?,
                request = async { requests.as_mut().expect("open").recv().await }, if requests_open => {
                    match request {
                        Some(request) => {
                            self.enqueue(request);
                            let channel = requests.as_mut().expect("open");
                            for _ in 0..REQUEST_BATCH_MAX {
                                match channel.try_recv() {
                                    Ok(request) => self.enqueue(request),
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
        self.node_faults(now);
        self.fire_timers(now);
        self.release_delayed(now);
        self.dispatch(now);
        self.expire_operations(now);
        self.drain_inbox();
        self.flush();
        self.commit()?;
        if now >= self.metrics_due_ns {
            self.metrics_due_ns = now + METRICS_PERIOD_NS;
            let digest = now >= self.digest_due_ns;
            if digest {
                self.digest_due_ns = now + DIGEST_PERIOD_NS;
            }
            self.publish_metrics(digest);
        }
        Ok(())
    }

    fn next_wake(&self, now: u64) -> Option<u64> {
        let timers = self.timer_heap.peek().map(|Reverse((at, ..))| *at);
        let delayed = self.delayed.peek().map(|Reverse((at, ..))| *at);
        let operations =
            self.outstanding.first_key_value().and_then(|(_, &i)| self.locals[i].busy.as_ref()).map(|b| b.deadline_ns);
        let metrics = Some(self.metrics_due_ns.max(now + 1));
        let pause = (self.paused_until_ns > 0).then_some(self.start_ns + self.paused_until_ns);
        [timers, delayed, operations, metrics, pause].into_iter().flatten().min()
    }

    fn node_faults(&mut self, now: u64) {
        if self.shim.is_empty() {
            return;
        }
        let elapsed = now - self.start_ns;
        for index in 0..self.locals.len() {
            for fault in self.shim.due_node_faults(elapsed, self.locals[index].id.0) {
                match fault {
                    NodeFault::Crash => {
                        eprintln!("fault plan: crashing {}", self.locals[index].id);
                        std::process::exit(137);
                    }
                    NodeFault::Pause(until_ns) => self.paused_until_ns = self.paused_until_ns.max(until_ns),
                    NodeFault::ClockJump(delta_ns) => self.clock.jump(delta_ns),
                    NodeFault::ClockDrift(drift_ppm) => self.clock.set_drift(drift_ppm),
                }
            }
        }
    }

    // ---- inputs ------------------------------------------------------------------------

    fn receive(&mut self) {
        use std::os::fd::AsRawFd;
        let fd = self.socket.as_raw_fd();
        let slots = self.receiver.slots();
        let mut taken = 0;
        while taken < RECV_BATCH_MAX {
            let receiver = &mut self.receiver;
            // A call that fills fewer slots than it has found the queue empty: report WouldBlock
            // to tokio then, so it clears the socket's readiness without one more, failing, call.
            // Datagrams arriving later raise a new readiness event (epoll is edge-triggered here),
            // so none is missed.
            let mut count = 0;
            let result = self.socket.try_io(tokio::io::Interest::READABLE, || {
                count = receiver.receive(fd)?;
                if count < slots { Err(std::io::ErrorKind::WouldBlock.into()) } else { Ok(()) }
            });
            for index in 0..count {
                let Some(datagram) = self.receiver.get(index) else { break };
                self.transport.datagrams_received += 1;
                self.transport.bytes_received += datagram.bytes.len() as u64;
                if datagram.truncated {
                    *self.transport.dropped.entry("datagram_truncated").or_default() += 1;
                    continue;
                }
                let Some(source) = datagram.source else {
                    *self.transport.dropped.entry("unknown_sender").or_default() += 1;
                    continue;
                };
                // The receiver's buffer is borrowed while its datagram is decoded, so decoding
                // borrows the fields it needs, not the whole host.
                on_datagram(
                    &mut Decoding {
                        cluster_hash: self.cluster_hash,
                        addr_of: &self.addr_of,
                        local_of: &self.local_of,
                        reassembly: &mut self.reassembly,
                        transport: &mut self.transport,
                        inbox: &mut self.inbox,
                    },
                    datagram.bytes,
                    source,
                );
            }
            taken += count;
            self.transport.receive_calls += u64::from(count > 0);
            self.drain_inbox();
            match result {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.transport.receive_errors += 1;
                    return;
                }
            }
        }
    }

    fn drain_inbox(&mut self) {
        while let Some((index, Input { from, message })) = self.inbox.pop_front() {
            self.step(index, |runner, now, actions| runner.deliver(now, from, message, actions));
        }
    }

    fn fire_timers(&mut self, now: u64) {
        while let Some(Reverse((at, ..))) = self.timer_heap.peek() {
            if *at > now {
                break;
            }
            let Reverse((_, index, generation, timer)) = self.timer_heap.pop().expect("peeked");
            let mut not_yet = None;
            self.step(index, |runner, now, actions| {
                if let TimerFiring::NotYet(local_ns) = runner.fire_timer(now, timer.clone(), generation, actions) {
                    not_yet = Some(local_ns);
                }
            });
            if let Some(local_ns) = not_yet {
                // The clock jumped back: wait until it reads the target again.
                let at = self.clock.monotonic_at(local_ns).max(now + 1_000);
                self.timer_heap.push(Reverse((at, index, generation, timer)));
            }
            self.drain_inbox();
        }
        // Stale entries of moved or cancelled timers are skipped lazily; drop them when they pile up.
        let live: usize = self.locals.iter().map(|l| l.runner.timer_count()).sum();
        if self.timer_heap.len() > 4 * live + 1_024 {
            let locals = &self.locals;
            self.timer_heap.retain(|Reverse((_, index, generation, timer))| {
                locals[*index].runner.is_timer_pending(timer, *generation)
            });
        }
    }

    fn enqueue(&mut self, request: Request) {
        if self.requests.len() >= self.queue_max {
            let _ = request.reply.send(Outcome::Busy);
            self.transport.requests_rejected += 1;
            return;
        }
        self.requests.push_back(request);
    }

    fn dispatch(&mut self, now: u64) {
        while !self.requests.is_empty() {
            let Some(index) = self.free_clients.pop() else { return };
            let request = self.requests.pop_front().expect("not empty");
            if request.reply.is_closed() {
                self.free_clients.push(index);
                continue;
            }
            let op = self.next_op;
            self.next_op += 1;
            self.outstanding.insert(op, index);
            self.locals[index].busy =
                Some(Busy { op, deadline_ns: now + self.op_timeout_ns, started_ns: now, reply: request.reply });
            let submission = Submission { op, command: request.command };
            self.step(index, |runner, now, actions| runner.submit(now, submission, actions));
        }
    }

    fn expire_operations(&mut self, now: u64) {
        while let Some((&op, &index)) = self.outstanding.first_key_value() {
            let current = self.locals[index].busy.as_ref().is_some_and(|b| b.op == op);
            debug_assert!(current, "outstanding operations are their client's current one");
            if current && self.locals[index].busy.as_ref().is_some_and(|b| b.deadline_ns > now) {
                break;
            }
            self.outstanding.remove(&op);
            if let Some(busy) = self.locals[index].busy.take_if(|b| b.op == op) {
                let _ = busy.reply.send(Outcome::Timeout);
                self.transport.operations_timed_out += 1;
                self.free_clients.push(index);
            }
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

    fn perform(&mut self, index: usize, action: Action<P>) {
        let id = self.locals[index].id;
        match action {
            Action::Send { to, message } => self.transmit(id, &to, message),
            Action::Complete { op, result } => {
                let local = &mut self.locals[index];
                if let Some(busy) = local.busy.take_if(|b| b.op == op) {
                    self.outstanding.remove(&op);
                    let now = monotonic_ns();
                    let _ = self.latency.record((now - busy.started_ns) / 1_000);
                    let _ = busy.reply.send(Outcome::Done(result));
                    self.transport.operations_completed += 1;
                    self.free_clients.push(index);
                }
            }
            Action::ArmTimer { timer, generation, deadline } => {
                let at = match deadline {
                    Deadline::After(local_ns) => monotonic_ns() + self.clock.monotonic_duration(local_ns).max(1),
                    Deadline::At(local_ns) => self.clock.monotonic_at(local_ns),
                };
                self.timer_heap.push(Reverse((at, index, generation, timer)));
            }
            Action::Write { record, mode, ticket } => {
                let storage = &mut self.locals[index].storage;
                match mode {
                    PersistMode::Append => storage.append(&record),
                    PersistMode::Replace => {
                        if let Err(error) = storage.replace(&record) {
                            // Without its durable state the node cannot keep its promises.
                            panic!("{id}: durable write failed: {error}");
                        }
                    }
                }
                // Writes reach the file in ticket order, so the file's count is the ticket's.
                let _ = ticket;
            }
            // Global checkers run in simulation only.
            Action::Observe(_) => {}
        }
    }

    /// Sends `message` to every target: packed for the network, or queued for a node of this
    /// process (no encoding then).
    fn transmit(&mut self, from: NodeId, to: &Targets, message: P::Message) {
        let mut encoded = false;
        for target in to.iter() {
            self.transport.messages_sent += 1;
            if let Some(Some(local)) = self.local_of.get(target.index()).copied() {
                self.inbox.push_back((local, Input { from, message: message.clone() }));
                continue;
            }
            let Some(&address) = self.addr_of.get(target.index()) else {
                *self.transport.dropped.entry("send_to_unknown_node").or_default() += 1;
                continue;
            };
            if !encoded {
                // Encoded once per message, whatever the number of targets, into a reused buffer.
                self.encoded.clear();
                let buffer = std::mem::take(&mut self.encoded);
                self.encoded = postcard::to_extend(&message, buffer).expect("messages serialize");
                encoded = true;
            }
            if self.encoded.len() > self.message_len_max {
                *self.transport.dropped.entry("message_too_large").or_default() += 1;
                continue;
            }
            let header = Header { cluster: self.cluster_hash, boot: self.boot };
            let datagram_max = self.datagram_max;
            let link = self.packing_per_link.then_some((from.0, target.0));
            let packer = self.packers.entry((address, link)).or_insert_with(|| Packer::new(header, datagram_max));
            packer.push(from.0, target.0, &self.encoded, self.next_message_number);
            self.next_message_number += 1;
        }
    }

    /// Sends every packed datagram, all in one `sendmmsg` call when the kernel takes them.
    /// With network faults, each datagram first goes through the fault shim.
    fn flush(&mut self) {
        use std::os::fd::AsRawFd;
        let fd = self.socket.as_raw_fd();
        let mut any = false;
        for packer in self.packers.values_mut() {
            packer.finish();
            any |= !packer.is_empty();
        }
        if !any {
            return;
        }
        let sent = if self.packing_per_link {
            self.flush_through_shim(fd)
        } else {
            self.sender
                .send(fd, self.packers.iter().flat_map(|(&(address, _), p)| p.datagrams().map(move |d| (d, address))))
        };
        self.count_sent(sent);
        for packer in self.packers.values_mut() {
            packer.clear();
        }
    }

    fn flush_through_shim(&mut self, fd: std::os::fd::RawFd) -> Sent {
        let now = monotonic_ns();
        let elapsed = now - self.start_ns;
        let mut now_out: Vec<(&[u8], SocketAddr)> = Vec::new();
        for (&(address, link), packer) in &self.packers {
            let (from, to) = link.expect("per-link packing names the link");
            for datagram in packer.datagrams() {
                let Verdict::Send { copies, delay_ns } = self.shim.decide(elapsed, from, to) else { continue };
                for _ in 0..copies {
                    if delay_ns > 0 {
                        let sequence = self.next_message_number;
                        self.next_message_number += 1;
                        self.delayed.push(Reverse((now + delay_ns, sequence, datagram.to_vec(), address)));
                    } else {
                        now_out.push((datagram, address));
                    }
                }
            }
        }
        self.sender.send(fd, now_out)
    }

    fn release_delayed(&mut self, now: u64) {
        use std::os::fd::AsRawFd;
        let mut due = Vec::new();
        while self.delayed.peek().is_some_and(|Reverse((at, ..))| *at <= now) {
            let Reverse((_, _, datagram, address)) = self.delayed.pop().expect("peeked");
            due.push((datagram, address));
        }
        if !due.is_empty() {
            let sent = self.sender.send(self.socket.as_raw_fd(), due.iter().map(|(d, a)| (&d[..], *a)));
            self.count_sent(sent);
        }
    }

    fn count_sent(&mut self, sent: Sent) {
        self.transport.datagrams_sent += sent.datagrams;
        self.transport.bytes_sent += sent.bytes;
        self.transport.send_calls += sent.calls;
        if sent.failed > 0 {
            // UDP may lose datagrams anyway; a full socket buffer is one more way.
            *self.transport.dropped.entry("send_failed").or_default() += sent.failed;
        }
    }

    /// Group commit: one write and `fsync` per node for everything issued this turn, then the
    /// sends that waited on it leave.
    fn commit(&mut self) -> Result<(), HostError> {
        for index in 0..self.locals.len() {
            let local = &mut self.locals[index];
            if !local.storage.dirty() && local.runner.held_count() == 0 {
                continue;
            }
            let durable = local.storage.sync().map_err(io(format!("sync storage of {}", local.id)))?;
            self.step(index, |runner, now, actions| runner.writes_durable(now, durable, actions));
        }
        self.drain_inbox();
        self.flush();
        Ok(())
    }

    // ---- metrics ---------------------------------------------------------------------------

    fn publish_metrics(&mut self, digest: bool) {
        if digest {
            for local in &self.locals {
                if let Some(machine) = local.node().state_machine() {
                    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
                    for key in machine.key_digests() {
                        hasher.update(&key.key);
                        hasher.update(&key.version.to_le_bytes());
                        hasher.update(&key.chain.to_le_bytes());
                    }
                    self.digests.insert(local.id.0, hasher.digest());
                }
            }
        }
        let nodes: Vec<LocalNodeMetrics> = self
            .locals
            .iter()
            .filter(|l| self.topology.node(l.id).role != Role::Client || l.id == self.first_client())
            .map(|l| LocalNodeMetrics {
                id: l.id.0,
                role: format!("{:?}", self.topology.node(l.id).role).to_lowercase(),
                status: l.node().status(),
                stats: l.node().stats().clone(),
                timers: l.runner.timer_count(),
                held_sends: l.runner.held_count(),
                durable_writes: l.storage.durable(),
                fsyncs: l.storage.syncs,
                digest: self.digests.get(&l.id.0).copied(),
            })
            .collect();
        let mut client_stats = ordo_core::NodeStats::default();
        for local in self.locals.iter().filter(|l| self.topology.node(l.id).role == Role::Client) {
            client_stats.absorb(local.node().stats());
        }
        let mut metrics = self.metrics.lock().expect("metrics lock");
        metrics.nodes = nodes;
        metrics.transport = self.transport.clone();
        metrics.transport.reassembly_partial = self.reassembly.len();
        metrics.transport.reassembly_abandoned = self.reassembly.abandoned;
        metrics.transport.fault_counts = self.shim.counts;
        metrics.transport.requests_queued = self.requests.len();
        metrics.transport.clients_busy = self.locals.iter().filter(|l| l.busy.is_some()).count();
        metrics.client_stats = client_stats;
        metrics.latency_us = [0.5, 0.9, 0.99, 0.999].map(|q| (q, self.latency.value_at_quantile(q)));
        metrics.latency_count = self.latency.len();
    }

    fn first_client(&self) -> NodeId {
        self.locals.iter().find(|l| self.topology.node(l.id).role == Role::Client).map_or(NodeId(u32::MAX), |l| l.id)
    }

    /// True when this host runs a gateway's client nodes.
    pub fn is_gateway(cluster: &ClusterFile, entry: usize) -> bool {
        cluster.nodes[entry].role == FileRole::Gateway
    }
}

/// The fields of the host that decoding a datagram touches.
struct Decoding<'a, P: Protocol> {
    cluster_hash: u64,
    addr_of: &'a [SocketAddr],
    local_of: &'a [Option<usize>],
    reassembly: &'a mut Reassembly,
    transport: &'a mut Transport,
    inbox: &'a mut VecDeque<(usize, Input<P>)>,
}

/// Checks a datagram and queues its messages for their nodes. Each frame is checked on its own:
/// its sender must live at the datagram's source address, and its receiver here.
fn on_datagram<P: Protocol>(decoding: &mut Decoding<'_, P>, datagram: &[u8], source: SocketAddr) {
    let (header, frames) = match wire::decode(datagram, decoding.cluster_hash) {
        Ok(decoded) => decoded,
        Err(error) => {
            *decoding.transport.dropped.entry(wire_reason(error)).or_default() += 1;
            return;
        }
    };
    for frame in frames {
        let from = frame.from as usize;
        if decoding.addr_of.get(from) != Some(&source) {
            *decoding.transport.dropped.entry("unknown_sender").or_default() += 1;
            continue;
        }
        let Some(Some(local)) = decoding.local_of.get(frame.to as usize).copied() else {
            *decoding.transport.dropped.entry("not_hosted_here").or_default() += 1;
            continue;
        };
        let whole = match frame.body {
            Body::Whole(bytes) => postcard::from_bytes::<P::Message>(bytes),
            Body::Fragment { message, index, count, bytes } => {
                let now = monotonic_ns();
                match decoding.reassembly.add(now, frame.from, header.boot, message, index, count, bytes) {
                    Some(whole) => postcard::from_bytes::<P::Message>(&whole),
                    None => continue,
                }
            }
        };
        match whole {
            Ok(message) => {
                decoding.transport.messages_received += 1;
                decoding.inbox.push_back((local, Input { from: NodeId(frame.from), message }));
            }
            Err(_) => *decoding.transport.dropped.entry("undecodable_message").or_default() += 1,
        }
    }
}

fn wire_reason(error: wire::WireError) -> &'static str {
    match error {
        wire::WireError::TooShort => "datagram_too_short",
        wire::WireError::BadMagic => "bad_magic",
        wire::WireError::Version(_) => "bad_version",
        wire::WireError::Checksum => "bad_checksum",
        wire::WireError::OtherCluster => "other_cluster",
        wire::WireError::BadFrame => "bad_frame",
        wire::WireError::BadFragment => "bad_fragment",
    }
}
