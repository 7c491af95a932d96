//! Real-process tests of the Redis gateway's defences (issue 20, item 5): a one-replica
//! cluster of `ordo node` processes, written by hand so that every port it uses is in
//! 31000–31999 (`cluster up` puts metrics ports 1000 above the UDP ones).
//!
//! - `requirepass_locks_clients_out_until_auth`: with `requirepass` in the cluster file, a
//!   client without the password gets NOAUTH, a wrong password WRONGPASS, the right one works.
//! - `idle_connections_do_not_keep_a_new_client_out`: 2,000 idle TCP connections (more than the
//!   old cap of 1,024) are held, and a new Redis client is still served.
//! - `at_the_cap_idle_connections_make_room`: with `connections_max = 100`, 300 idle
//!   connections come and the oldest give way; a new client is served and the metrics count the
//!   evictions.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// Ports of this binary: 31000 up, 20 per cluster, spread by process id so that two runs of
/// the test binary at once do not collide.
fn ports() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    31_000 + (std::process::id() % 40) as u16 * 20 + NEXT.fetch_add(1, Ordering::SeqCst) * 5
}

/// A replica and a gateway, as two `ordo node` processes; killed on drop.
struct Gateway {
    children: Vec<Child>,
    redis_port: u16,
    metrics_port: u16,
    data_dir: PathBuf,
}

impl Gateway {
    /// Starts the cluster with `top` (top-level keys) and `runtime` (lines of `[runtime]`)
    /// added to its file, and waits until a SET goes through (with `password`, if given).
    fn start(top: &str, runtime: &str, password: Option<&str>) -> Gateway {
        let base = ports();
        let data_dir = std::env::temp_dir().join(format!("ordo-gateway-limits-{}-{base}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data_dir);
        std::fs::create_dir_all(&data_dir).expect("data dir");
        let (redis_port, metrics_port) = (base + 2, base + 3);
        let file = format!(
            "{top}\nprotocol = \"unreplicated\"\ndata_dir = \"{dir}\"\n[runtime]\nfsync = false\n{runtime}\n\
             [[node]]\nname = \"r1\"\nrole = \"replica\"\naddr = \"127.0.0.1:{base}\"\n\
             [[node]]\nname = \"gw\"\nrole = \"gateway\"\naddr = \"127.0.0.1:{gw}\"\nredis = \"127.0.0.1:{redis_port}\"\n\
             metrics = \"127.0.0.1:{metrics_port}\"\nclients = 4\n",
            dir = data_dir.display(),
            gw = base + 1,
        );
        let config = data_dir.join("cluster.toml");
        std::fs::write(&config, file).expect("cluster file");
        let children = ["r1", "gw"]
            .iter()
            .map(|name| {
                Command::new(env!("CARGO_BIN_EXE_ordo"))
                    .args(["node", "--config"])
                    .arg(&config)
                    .args(["--id", name])
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("ordo node starts")
            })
            .collect();
        let gateway = Gateway { children, redis_port, metrics_port, data_dir };
        gateway.wait_ready(password);
        gateway
    }

    fn url(&self, userinfo: &str) -> String {
        format!("redis://{userinfo}127.0.0.1:{}/", self.redis_port)
    }

    /// A connection that gave `userinfo` (`:password@`, `user:password@` or nothing).
    fn redis(&self, userinfo: &str) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url(userinfo)).expect("url");
        let connection = client.get_connection_with_timeout(Duration::from_secs(10))?;
        connection.set_read_timeout(Some(Duration::from_secs(15))).expect("timeout");
        Ok(connection)
    }

    fn wait_ready(&self, password: Option<&str>) {
        let userinfo = password.map(|p| format!(":{p}@")).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let set =
                self.redis(&userinfo).and_then(|mut c| redis::cmd("SET").arg("ready").arg("1").query::<()>(&mut c));
            match set {
                Ok(()) => return,
                Err(error) if Instant::now() > deadline => panic!("the gateway did not get ready: {error}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The gateway's Prometheus text.
    fn metrics(&self) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.metrics_port)).expect("metrics");
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        stream.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").expect("request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response");
        response
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// A SET and a GET on a fresh connection.
fn set_and_get(gateway: &Gateway, userinfo: &str, key: &str) -> Option<String> {
    let mut redis = gateway.redis(userinfo).expect("a new client connects");
    let () = redis::cmd("SET").arg(key).arg("value").query(&mut redis).expect("SET");
    redis::cmd("GET").arg(key).query(&mut redis).expect("GET")
}

#[test]
fn requirepass_locks_clients_out_until_auth() {
    // Goal: AUTH with Redis' semantics through a real client library. Method: a gateway whose
    // cluster file sets requirepass; connect without a password, with a wrong one, and with the
    // right one in both AUTH forms (`:pass@` sends `AUTH pass`, `default:pass@` `AUTH default pass`).
    let gateway = Gateway::start("requirepass = \"s3cret\"", "", Some("s3cret"));
    let mut anonymous = gateway.redis("").expect("connecting needs no password");
    let refused = redis::cmd("GET").arg("k").query::<Option<String>>(&mut anonymous).expect_err("NOAUTH");
    assert_eq!(refused.code(), Some("NOAUTH"), "{refused}");
    let ping = redis::cmd("PING").query::<String>(&mut anonymous).expect_err("NOAUTH");
    assert_eq!(ping.code(), Some("NOAUTH"), "{ping}");
    let wrong = gateway.redis(":wrong@").err().expect("a wrong password is refused");
    assert_eq!(wrong.kind(), redis::ErrorKind::AuthenticationFailed, "{wrong}");
    // Redis' exact bytes, on a raw socket.
    let mut raw = TcpStream::connect(("127.0.0.1", gateway.redis_port)).expect("connect");
    raw.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    raw.write_all(b"PING\r\nAUTH wrong\r\nAUTH s3cret\r\nPING\r\n").expect("requests");
    let expected = "-NOAUTH Authentication required.\r\n\
                    -WRONGPASS invalid username-password pair or user is disabled.\r\n+OK\r\n+PONG\r\n";
    let mut replies = vec![0u8; expected.len()];
    raw.read_exact(&mut replies).expect("four replies");
    assert_eq!(String::from_utf8_lossy(&replies), expected);
    assert_eq!(set_and_get(&gateway, ":s3cret@", "a").as_deref(), Some("value"));
    assert_eq!(set_and_get(&gateway, "default:s3cret@", "b").as_deref(), Some("value"));
    let () = redis::cmd("AUTH").arg("s3cret").query(&mut anonymous).expect("AUTH on the open connection");
    let value: Option<String> = redis::cmd("GET").arg("a").query(&mut anonymous).expect("GET after AUTH");
    assert_eq!(value.as_deref(), Some("value"));
}

/// Opens `count` TCP connections to the gateway that send nothing.
fn idle_connections(gateway: &Gateway, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map(|i| {
            TcpStream::connect_timeout(&([127, 0, 0, 1], gateway.redis_port).into(), Duration::from_secs(10))
                .unwrap_or_else(|error| panic!("idle connection {i}: {error}"))
        })
        .collect()
}

#[test]
fn idle_connections_do_not_keep_a_new_client_out() {
    // Goal: the test: 2,000 idle connections do not keep a new client from being served
    // (the old cap of 1,024 idle ones locked everyone out). Method: hold 2,000 connections that
    // send nothing, then run SET/GET on a new one, and check the gateway holds them all.
    let gateway = Gateway::start("", "", None);
    let idle = idle_connections(&gateway, 2_000);
    assert_eq!(set_and_get(&gateway, "", "k").as_deref(), Some("value"));
    let mut redis = gateway.redis("").expect("connects");
    let info: String = redis::cmd("INFO").arg("clients").query(&mut redis).expect("INFO");
    let connected: usize = info
        .lines()
        .find_map(|line| line.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("connected_clients");
    assert!(connected > 2_000, "the idle connections are held, not refused: {connected}");
    drop(idle);
}

#[test]
fn at_the_cap_idle_connections_make_room() {
    // Goal: the rule holds at any cap: when it is reached, the longest-idle connection is closed
    // for the new one. Method: `connections_max = 100`, 300 idle connections, then a new client;
    // the metrics count at least 200 evictions and the first idle connection was closed.
    let gateway = Gateway::start("", "connections_max = 100", None);
    let mut idle = idle_connections(&gateway, 300);
    assert_eq!(set_and_get(&gateway, "", "k").as_deref(), Some("value"));
    let metrics = gateway.metrics();
    let evicted: f64 = metrics
        .lines()
        .find(|line| line.starts_with("ordo_gateway_evicted_total"))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .expect("ordo_gateway_evicted_total");
    assert!(evicted >= 200.0, "evictions counted: {evicted}");
    idle[0].set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut nothing = Vec::new();
    assert!(matches!(idle[0].read_to_end(&mut nothing), Ok(0)), "the oldest idle connection was closed");
}
