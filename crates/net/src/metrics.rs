//! Metrics: a snapshot the host refreshes every 200 ms, served as Prometheus text on
//! `GET /metrics` and as JSON on `GET /status` by a small HTTP responder (one request per
//! connection, bounded request size).

use ordo_core::NodeStats;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Largest HTTP request head read.
const REQUEST_HEAD_MAX: usize = 8 * 1024;
/// Most HTTP connections served at once; more are answered 503 and closed, so clients that
/// open connections and never finish them cannot pile up tasks and descriptors.
pub const HTTP_CONNECTIONS_MAX: usize = 64;
/// How long one HTTP connection may take to send its request and take the response: a slow or
/// idle client is cut off after it.
pub const HTTP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Transport counters of one process.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Transport {
    /// Datagrams sent.
    pub datagrams_sent: u64,
    /// Datagrams received.
    pub datagrams_received: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Protocol messages sent (local deliveries included).
    pub messages_sent: u64,
    /// Protocol messages received from the network.
    pub messages_received: u64,
    /// `sendmmsg` calls (several datagrams each when a loop turn has several).
    pub send_calls: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub receive_calls: u64,
    /// Socket receive errors.
    pub receive_errors: u64,
    /// Datagrams or messages dropped, by reason.
    pub dropped: BTreeMap<&'static str, u64>,
    /// Fragmented messages being reassembled.
    pub reassembly_partial: usize,
    /// Fragmented messages given up.
    pub reassembly_abandoned: u64,
    /// Fault shim: dropped by partition, by loss, duplicated, delayed.
    pub fault_counts: [u64; 4],
    /// Gateway: requests waiting for a free client node.
    pub requests_queued: usize,
    /// Gateway: client nodes with an operation outstanding.
    pub clients_busy: usize,
    /// Gateway: requests refused because the queue was full.
    pub requests_rejected: u64,
    /// Gateway: operations completed.
    pub operations_completed: u64,
    /// Gateway: operations answered as unknown after the timeout.
    pub operations_timed_out: u64,
    /// Gateway: operations given up because their Redis connection closed while they ran.
    pub operations_abandoned: u64,
}

/// One hosted node's metrics.
#[derive(Clone, Debug, Serialize)]
pub struct LocalNodeMetrics {
    /// Node id.
    pub id: u32,
    /// Role.
    pub role: String,
    /// The node's `status()` line.
    pub status: String,
    /// The node's counters.
    #[serde(serialize_with = "serialize_stats")]
    pub stats: NodeStats,
    /// Pending timers.
    pub timers: usize,
    /// Sends waiting for a durable write.
    pub held_sends: usize,
    /// Durable writes since boot.
    pub durable_writes: u64,
    /// fsync calls since boot.
    pub fsyncs: u64,
    /// Compactions (checkpoints written in the background) landed since boot.
    pub compactions: u64,
    /// Hash of the replica's state-machine key digests (equal on replicas that agree).
    pub digest: Option<u64>,
}

fn serialize_stats<S: serde::Serializer>(stats: &NodeStats, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut s = serializer.serialize_struct("NodeStats", 5)?;
    s.serialize_field("fast_path_commits", &stats.fast_path_commits)?;
    s.serialize_field("slow_path_commits", &stats.slow_path_commits)?;
    s.serialize_field("executed", &stats.executed)?;
    s.serialize_field("dropped", &stats.dropped)?;
    s.serialize_field("events", &stats.events)?;
    s.end()
}

/// What a process reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Metrics {
    /// Protocol name.
    pub protocol: &'static str,
    /// Node name in the cluster file.
    pub name: String,
    /// Role in the cluster file.
    pub role: String,
    /// Hosted nodes (a gateway shows its first client node).
    pub nodes: Vec<LocalNodeMetrics>,
    /// Sum of a gateway's client nodes' counters.
    #[serde(serialize_with = "serialize_stats")]
    pub client_stats: NodeStats,
    /// Transport counters.
    pub transport: Transport,
    /// Gateway: operation latency quantiles in µs.
    pub latency_us: [(f64, u64); 4],
    /// Gateway: operations in the latency histogram.
    pub latency_count: u64,
    /// Gateway: what happened to Redis connections (the gateway counts these itself).
    pub gateway: GatewayConnections,
}

/// A gateway's connection counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GatewayConnections {
    /// `accept` calls that failed (EMFILE and the like), each followed by a pause.
    pub accept_errors: u64,
    /// Idle connections closed to admit a new one at the connection cap.
    pub evicted: u64,
    /// Connections refused at the cap because none was idle.
    pub refused: u64,
}

fn label(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', " ")
}

/// Prometheus text being written: each family's samples carry the process's base labels.
struct Exposition {
    out: String,
    base: String,
}

impl Exposition {
    /// One metric family: its help and type lines, then a sample per (extra labels, value).
    fn family(&mut self, name: &str, help: &str, kind: &str, values: Vec<(String, f64)>) {
        let _ = writeln!(self.out, "# HELP ordo_{name} {help}\n# TYPE ordo_{name} {kind}");
        for (labels, value) in values {
            let _ = writeln!(self.out, "ordo_{name}{{{}{labels}}} {value}", self.base);
        }
    }
}

impl Metrics {
    /// Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let base = format!("protocol=\"{}\",process=\"{}\"", self.protocol, label(&self.name));
        let mut exposition = Exposition { out: String::new(), base };
        self.expose_nodes(&mut exposition);
        self.expose_transport(&mut exposition);
        self.expose_latency(&mut exposition);
        exposition.out
    }

    /// The hosted nodes' counters and gauges, labelled by node.
    fn expose_nodes(&self, exposition: &mut Exposition) {
        let per_node = |f: &dyn Fn(&LocalNodeMetrics) -> f64| -> Vec<(String, f64)> {
            self.nodes.iter().map(|n| (format!(",node=\"n{}\",role=\"{}\"", n.id, n.role), f(n))).collect()
        };
        exposition.family(
            "fast_path_commits_total",
            "Commands committed on the fast path.",
            "counter",
            per_node(&|n| n.stats.fast_path_commits as f64),
        );
        exposition.family(
            "slow_path_commits_total",
            "Commands committed on the slow (or only) path.",
            "counter",
            per_node(&|n| n.stats.slow_path_commits as f64),
        );
        exposition.family(
            "executed_total",
            "Commands applied to the state machine.",
            "counter",
            per_node(&|n| n.stats.executed as f64),
        );
        exposition.family("timers", "Pending timers.", "gauge", per_node(&|n| n.timers as f64));
        exposition.family(
            "held_sends",
            "Sends waiting for a durable write.",
            "gauge",
            per_node(&|n| n.held_sends as f64),
        );
        exposition.family("fsyncs_total", "fsync calls.", "counter", per_node(&|n| n.fsyncs as f64));
        exposition.family(
            "compactions_total",
            "Checkpoints written in the background and landed.",
            "counter",
            per_node(&|n| n.compactions as f64),
        );
        let mut events = Vec::new();
        let mut drops = Vec::new();
        for n in &self.nodes {
            for (event, count) in &n.stats.events {
                events.push((format!(",node=\"n{}\",event=\"{event}\"", n.id), *count as f64));
            }
            for (reason, count) in &n.stats.dropped {
                drops.push((format!(",node=\"n{}\",reason=\"{reason}\"", n.id), *count as f64));
            }
        }
        exposition.family(
            "protocol_events_total",
            "Protocol events (view changes, state transfers...).",
            "counter",
            events,
        );
        exposition.family("protocol_dropped_total", "Inputs the protocol ignored, by reason.", "counter", drops);
    }

    /// The transport's and gateway's counters, the transport's drops and the fault shim's tally.
    fn expose_transport(&self, exposition: &mut Exposition) {
        let t = &self.transport;
        for (name, help, value) in [
            ("datagrams_sent_total", "UDP datagrams sent.", t.datagrams_sent as f64),
            ("datagrams_received_total", "UDP datagrams received.", t.datagrams_received as f64),
            ("send_calls_total", "sendmmsg system calls.", t.send_calls as f64),
            ("receive_calls_total", "recvmmsg system calls that returned datagrams.", t.receive_calls as f64),
            ("bytes_sent_total", "UDP bytes sent.", t.bytes_sent as f64),
            ("bytes_received_total", "UDP bytes received.", t.bytes_received as f64),
            ("messages_sent_total", "Protocol messages sent.", t.messages_sent as f64),
            ("messages_received_total", "Protocol messages received.", t.messages_received as f64),
            ("gateway_queue_length", "Requests waiting for a client node.", t.requests_queued as f64),
            ("gateway_clients_busy", "Client nodes with an operation outstanding.", t.clients_busy as f64),
            ("gateway_completed_total", "Operations completed.", t.operations_completed as f64),
            ("gateway_timed_out_total", "Operations answered as unknown.", t.operations_timed_out as f64),
            (
                "gateway_abandoned_total",
                "Operations given up because their connection closed.",
                t.operations_abandoned as f64,
            ),
            ("gateway_rejected_total", "Requests refused (queue full).", t.requests_rejected as f64),
            ("reassembly_partial", "Fragmented messages being reassembled.", t.reassembly_partial as f64),
            ("gateway_accept_errors_total", "Failed accepts of Redis connections.", self.gateway.accept_errors as f64),
            ("gateway_evicted_total", "Idle Redis connections closed to admit new ones.", self.gateway.evicted as f64),
            ("gateway_refused_total", "Redis connections refused at the cap.", self.gateway.refused as f64),
        ] {
            let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
            exposition.family(name, help, kind, vec![(String::new(), value)]);
        }
        exposition.family(
            "transport_dropped_total",
            "Datagrams or messages dropped by the transport, by reason.",
            "counter",
            t.dropped.iter().map(|(r, c)| (format!(",reason=\"{r}\""), *c as f64)).collect(),
        );
        let faults = ["partition", "loss", "duplicate", "delay"];
        exposition.family(
            "fault_shim_total",
            "Datagrams affected by the fault shim.",
            "counter",
            faults.iter().zip(t.fault_counts).map(|(f, c)| (format!(",fault=\"{f}\""), c as f64)).collect(),
        );
    }

    /// A gateway's operation latency summary (quantiles and count), once it has operations.
    fn expose_latency(&self, exposition: &mut Exposition) {
        if self.latency_count == 0 {
            return;
        }
        let Exposition { out, base } = exposition;
        let quantiles = self.latency_us.iter().map(|(q, v)| (format!(",quantile=\"{q}\""), *v as f64 * 1e-6));
        let _ = writeln!(out, "# HELP ordo_operation_latency_seconds Gateway operation latency.");
        let _ = writeln!(out, "# TYPE ordo_operation_latency_seconds summary");
        for (labels, value) in quantiles {
            let _ = writeln!(out, "ordo_operation_latency_seconds{{{base}{labels}}} {value}");
        }
        let _ = writeln!(out, "ordo_operation_latency_seconds_count{{{base}}} {}", self.latency_count);
    }
}

/// Serves `/metrics` and `/status` on `address` until the task is dropped, at most
/// [`HTTP_CONNECTIONS_MAX`] connections at once, each closed [`HTTP_TIMEOUT`] after it was
/// accepted whether or not it sent its request and took the response.
pub async fn serve(address: SocketAddr, metrics: Arc<Mutex<Metrics>>) -> std::io::Result<()> {
    let listener = TcpListener::bind(address).await?;
    let slots = Arc::new(tokio::sync::Semaphore::new(HTTP_CONNECTIONS_MAX));
    let mut pause = std::time::Duration::from_millis(10);
    loop {
        let mut stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // EMFILE and the like: pause rather than spin on an error that persists.
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
                continue;
            }
        };
        pause = std::time::Duration::from_millis(10);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            let busy = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            // Not waited for long: this task must get back to accepting.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(10), stream.write_all(busy)).await;
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(HTTP_TIMEOUT, respond(&mut stream, &metrics)).await;
            drop(slot);
        });
    }
}

/// Reads one request head and writes its response (the caller bounds the time).
async fn respond(stream: &mut tokio::net::TcpStream, metrics: &Mutex<Metrics>) {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < REQUEST_HEAD_MAX {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let path = line.split(|&b| b == b' ').nth(1).unwrap_or_default();
    let (status, kind, body) = {
        let snapshot = metrics.lock().expect("metrics lock");
        match path {
            b"/metrics" => ("200 OK", "text/plain; version=0.0.4", snapshot.prometheus()),
            b"/status" => ("200 OK", "application/json", serde_json::to_string(&*snapshot).expect("metrics serialize")),
            _ => ("404 Not Found", "text/plain", "try /metrics or /status\n".to_string()),
        }
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

/// Fetches `path` from a metrics endpoint (for `cluster up` and tests): the body, or None.
pub fn fetch(address: SocketAddr, path: &str, timeout: std::time::Duration) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).ok()?;
    let mut response = String::new();
    stream.take(64 * 1024 * 1024).read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[test]
    fn the_endpoint_caps_its_connections_and_cuts_off_idle_ones() {
        // Goal: idle HTTP clients cannot exhaust the metrics endpoint. Method: hold
        // HTTP_CONNECTIONS_MAX idle connections; one more is answered 503 at once; an idle one is
        // closed by the endpoint after HTTP_TIMEOUT; once they are gone, /metrics answers.
        let address: SocketAddr = "127.0.0.1:31901".parse().expect("address");
        // The endpoint on a thread of its own, as in a node; it ends with the test process.
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let _ = runtime.block_on(serve(address, Arc::new(Mutex::new(Metrics::default()))));
        });
        let connect = || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                match TcpStream::connect(address) {
                    Ok(stream) => return stream,
                    Err(error) if std::time::Instant::now() > deadline => panic!("metrics endpoint: {error}"),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        };
        let idle: Vec<TcpStream> = (0..HTTP_CONNECTIONS_MAX).map(|_| connect()).collect();
        // The endpoint takes the idle connections' slots as it accepts them; give it a moment.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut extra = connect();
        extra.set_read_timeout(Some(std::time::Duration::from_secs(2))).expect("timeout");
        let mut refused = String::new();
        let _ = extra.read_to_string(&mut refused);
        assert!(refused.starts_with("HTTP/1.1 503"), "over the cap: {refused:?}");
        let mut first = &idle[0];
        first.set_read_timeout(Some(HTTP_TIMEOUT * 3)).expect("timeout");
        let mut nothing = Vec::new();
        let closed = first.read_to_end(&mut nothing);
        assert!(matches!(closed, Ok(0)), "an idle connection is closed by the endpoint: {closed:?}");
        drop(idle);
        let mut client = connect();
        client.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").expect("request");
        let mut response = String::new();
        client.read_to_string(&mut response).expect("response");
        assert!(response.starts_with("HTTP/1.1 200"), "{response:?}");
    }
}
