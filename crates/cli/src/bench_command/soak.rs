//! `ordo bench --soak DURATION`: drives a real cluster through its Redis gateway with
//! redis-benchmark (SETs over a large key space, pipelined) for as long as asked, and records
//! every `--soak-every` the gateway's throughput and each process's resident memory and CPU time.
//!
//! It writes `soak.csv` (one row per process per sample), `soak-throughput.png`,
//! `soak-memory.png` and `soak-summary.md`, which compares an early window (the second minute,
//! or the second fifth of a shorter soak) with the last one: a cluster that holds for months keeps
//! every process's memory within 20% and its throughput at least 0.9× (issue 21's rule). The exit
//! code is 1 when a protocol misses either bound.

use super::{BenchArgs, up_args};
use crate::cluster_command::{LocalCluster, cluster_file};
use ordo_bench::plot::{Series, plot_series};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Most memory growth between the early and the late window (fraction of the early window).
const MEMORY_GROWTH_MAX: f64 = 0.2;
/// Least throughput in the late window, as a fraction of the early window's.
const THROUGHPUT_KEPT_MIN: f64 = 0.9;
/// Length of the compared windows, for a soak of at least five of them.
const WINDOW_MAX: Duration = Duration::from_secs(60);

/// One sample of one process.
struct ProcessSample {
    name: String,
    rss_mib: f64,
    cpu_s: f64,
}

/// What was measured at one instant.
struct Sample {
    t_s: f64,
    ops_per_s: f64,
    /// CPU time summed over every process since the previous sample, per operation completed.
    cpu_us_per_op: f64,
    processes: Vec<ProcessSample>,
}

/// One protocol's soak.
struct Soak {
    protocol: String,
    samples: Vec<Sample>,
}

/// The load redis-benchmark applies, from the command line.
fn benchmark_arguments(args: &BenchArgs, port: u16) -> Vec<String> {
    let mut arguments: Vec<String> = vec!["-h".into(), "127.0.0.1".into(), "-p".into(), port.to_string()];
    for (flag, value) in [("-c", args.soak_connections), ("-P", args.soak_pipeline), ("-r", args.soak_keys)] {
        arguments.extend([flag.to_string(), value.to_string()]);
    }
    // As many requests as a soak can send: redis-benchmark stops when killed at the end.
    arguments.extend(["-t", "set", "-n", "2000000000", "-q"].map(String::from));
    arguments
}

/// The value redis-benchmark's SET writes (`-d 3`).
const FILL_VALUE: &str = "xxx";
/// Connections that fill the key space, and SETs each sends before reading their replies.
const FILL_CONNECTIONS: u64 = 8;
const FILL_PIPELINE: u64 = 64;

/// Writes every key of the soak's key space once, as redis-benchmark names them (`key:` and
/// twelve digits), so that the measured windows compare a full state with a full state: on an
/// empty one, memory grows until most of a million keys exist (minutes at 10k SET/s), and the
/// early window would measure the state filling, not the protocol holding.
fn fill_key_space(port: u16, keys: u64) -> Result<(), String> {
    let chunk = keys.div_ceil(FILL_CONNECTIONS);
    let fillers: Vec<_> = (0..FILL_CONNECTIONS)
        .map(|i| (i * chunk, ((i + 1) * chunk).min(keys)))
        .filter(|(from, to)| from < to)
        .map(|range| std::thread::spawn(move || fill_range(port, range)))
        .collect();
    for filler in fillers {
        filler.join().map_err(|_| "a filler thread panicked".to_string())??;
    }
    Ok(())
}

/// SETs keys `from..to` over one connection, `FILL_PIPELINE` at a time; an error reply stops it.
fn fill_range(port: u16, (from, to): (u64, u64)) -> Result<(), String> {
    use std::io::{BufRead, BufReader, Write};
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|error| format!("fill: {error}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(|error| error.to_string())?;
    let mut writer = stream.try_clone().map_err(|error| error.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut next = from;
    while next < to {
        let end = (next + FILL_PIPELINE).min(to);
        let mut request = String::new();
        for key in next..end {
            let name = format!("key:{key:012}");
            let _ = write!(
                request,
                "*3\r\n$3\r\nSET\r\n${}\r\n{name}\r\n${}\r\n{FILL_VALUE}\r\n",
                name.len(),
                FILL_VALUE.len()
            );
        }
        writer.write_all(request.as_bytes()).map_err(|error| format!("fill: {error}"))?;
        for _ in next..end {
            line.clear();
            reader.read_line(&mut line).map_err(|error| format!("fill: {error}"))?;
            if !line.starts_with('+') {
                return Err(format!("fill: SET answered {:?}", line.trim_end()));
            }
        }
        next = end;
    }
    Ok(())
}

/// Runs the soak of every protocol in turn and writes the files; see the module's header. A soak
/// that stops early (a node or redis-benchmark exited) still writes what it sampled, and the
/// next protocol's soak runs; the command then exits 1. One that cannot start ends the command.
pub(super) fn run(args: &BenchArgs, protocols: &[String], duration: Duration) -> ExitCode {
    let mut soaks = Vec::new();
    let mut stopped_early = Vec::new();
    let mut failed = None;
    for (index, protocol) in protocols.iter().enumerate() {
        match soak_one(args, protocol, index, duration) {
            Ok((soak, stopped)) => {
                soaks.push(soak);
                stopped_early.extend(stopped.map(|error| format!("{protocol}: {error}")));
            }
            Err((code, error)) => {
                failed = Some((code, format!("{protocol}: {error}")));
                break;
            }
        }
    }
    let written =
        if soaks.is_empty() { Ok(true) } else { write_files(&args.out, &soaks, duration, !args.soak_no_fill) };
    for error in &stopped_early {
        eprintln!("error: {error}");
    }
    if let Some((code, error)) = failed {
        eprintln!("error: {error}");
        return code;
    }
    if !stopped_early.is_empty() {
        return ExitCode::from(1);
    }
    match written {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("soak: memory or throughput moved beyond the bounds (see soak-summary.md)");
            ExitCode::from(1)
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

type Failure = (ExitCode, String);

/// One protocol's soak, with why it stopped early if it did; an error when it could not start.
fn soak_one(
    args: &BenchArgs,
    protocol: &str,
    index: usize,
    duration: Duration,
) -> Result<(Soak, Option<String>), Failure> {
    let mut up = up_args(args, protocol, index);
    // Node i uses port_base + i; 20 ports per protocol leave the last for the Redis port.
    up.redis_port = up.port_base + 19;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let data_dir = std::env::temp_dir().join(format!("ordo-soak-{}-{stamp}", std::process::id()));
    let file = cluster_file(&up, data_dir.clone()).map_err(|error| (ExitCode::from(2), error))?;
    eprintln!("== {protocol}: soak of {} s, {} replicas", duration.as_secs(), args.replicas);
    let mut cluster = LocalCluster::start(file, !up.no_key).map_err(|error| (ExitCode::from(1), error))?;
    cluster.wait_ready(Duration::from_secs(20)).map_err(|error| (ExitCode::from(1), error))?;
    if !args.soak_no_fill {
        let started = Instant::now();
        fill_key_space(up.redis_port, args.soak_keys).map_err(|error| (ExitCode::from(1), error))?;
        eprintln!("  filled {} keys in {:.0} s; the clock starts now", args.soak_keys, started.elapsed().as_secs_f64());
    }
    // redis-benchmark's output is kept: when it exits early, its last lines say why.
    let benchmark_log = args.out.join(format!("soak-{protocol}-redis-benchmark.log"));
    let output = std::fs::create_dir_all(&args.out)
        .and_then(|()| std::fs::File::create(&benchmark_log))
        .map_err(|error| (ExitCode::from(2), format!("{}: {error}", benchmark_log.display())))?;
    let errors = output.try_clone().map_err(|error| (ExitCode::from(2), error.to_string()))?;
    let benchmark = Command::new("redis-benchmark")
        .args(benchmark_arguments(args, up.redis_port))
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(errors)
        .spawn()
        .map_err(|error| {
            let hint = "redis-benchmark drives the soak: install it (Debian/Ubuntu: apt install redis-tools)";
            (ExitCode::from(2), format!("redis-benchmark: {error}; {hint}"))
        })?;
    let mut benchmark = KillOnDrop(benchmark);
    let mut samples = Vec::new();
    let stopped =
        sample_until(&mut cluster, &mut benchmark.0, duration, Duration::from_nanos(args.soak_every), &mut samples);
    print_events(&cluster);
    cluster.stop();
    let stopped = match stopped {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&data_dir);
            None
        }
        // The nodes' logs say what went wrong: keep them.
        Err(error) => Some(format!(
            "{error}; redis-benchmark's output is in {}, the nodes' logs and files in {}",
            benchmark_log.display(),
            data_dir.display()
        )),
    };
    Ok((Soak { protocol: protocol.to_string(), samples }, stopped))
}

/// A child process killed and reaped when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Samples into `samples` every `every` until `duration` has passed; stops with an error when a
/// node or redis-benchmark exits.
fn sample_until(
    cluster: &mut LocalCluster,
    benchmark: &mut Child,
    duration: Duration,
    every: Duration,
    samples: &mut Vec<Sample>,
) -> Result<(), String> {
    let started = Instant::now();
    let mut previous = (completed(cluster), cpu_total(&process_samples(cluster)));
    while started.elapsed() < duration {
        std::thread::sleep(every.min(duration.saturating_sub(started.elapsed())).max(Duration::from_millis(100)));
        if let Ok(Some(status)) = benchmark.try_wait() {
            return Err(format!("redis-benchmark exited early ({status})"));
        }
        for (name, child) in &mut cluster.children {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("{name} exited during the soak ({status})"));
            }
        }
        let t_s = started.elapsed().as_secs_f64();
        let processes = process_samples(cluster);
        let (done, cpu) = (completed(cluster), cpu_total(&processes));
        let elapsed_s = t_s - samples.last().map_or(0.0, |s: &Sample| s.t_s);
        let operations = done.saturating_sub(previous.0) as f64;
        let cpu_us_per_op = if operations > 0.0 { (cpu - previous.1) * 1e6 / operations } else { 0.0 };
        let sample = Sample { t_s, ops_per_s: operations / elapsed_s.max(1e-9), cpu_us_per_op, processes };
        eprintln!(
            "  {:>6.0} s {:>9.0} ops/s {:>6.1} µs/op CPU  {}",
            t_s,
            sample.ops_per_s,
            cpu_us_per_op,
            rss_text(&sample)
        );
        samples.push(sample);
        previous = (done, cpu);
    }
    Ok(())
}

/// Prints each node's protocol events (view changes, checkpoints, state transfers...): what a
/// dip in throughput or a jump in memory is to be read against.
fn print_events(cluster: &LocalCluster) {
    for node in &cluster.file.nodes {
        let Some(status) = node.metrics.and_then(status) else { continue };
        let Some(events) = status["nodes"][0]["stats"]["events"].as_object().filter(|events| !events.is_empty()) else {
            continue;
        };
        let each: Vec<String> = events.iter().map(|(event, count)| format!("{event} {count}")).collect();
        eprintln!("  events of {}: {}", node.name, each.join(", "));
    }
}

fn rss_text(sample: &Sample) -> String {
    let each: Vec<String> = sample.processes.iter().map(|p| format!("{} {:.0} MiB", p.name, p.rss_mib)).collect();
    each.join(", ")
}

/// Operations the gateway completed so far (its metrics' `operations_completed`).
fn completed(cluster: &LocalCluster) -> u64 {
    let gateway = cluster.file.nodes.iter().find(|node| node.redis.is_some());
    gateway
        .and_then(|node| node.metrics)
        .and_then(status)
        .and_then(|status| status["transport"]["operations_completed"].as_u64())
        .unwrap_or(0)
}

/// A node's `/status` document, if it answers within a second.
fn status(metrics: std::net::SocketAddr) -> Option<serde_json::Value> {
    ordo_net::metrics::fetch(metrics, "/status", Duration::from_secs(1))
        .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
}

/// One sample of every node process of `cluster`.
fn process_samples(cluster: &LocalCluster) -> Vec<ProcessSample> {
    cluster.children.iter().map(|(name, child)| process_sample(name, child.id())).collect()
}

fn cpu_total(processes: &[ProcessSample]) -> f64 {
    processes.iter().map(|p| p.cpu_s).sum()
}

/// Resident memory and CPU time (user + system) of process `pid`, from /proc; zeros when it is
/// gone.
fn process_sample(name: &str, pid: u32) -> ProcessSample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    ProcessSample { name: name.to_string(), rss_mib: rss_kib / 1024.0, cpu_s: cpu_seconds(pid) }
}

fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the first, utime the 12th.
    let Some((_, rest)) = stat.rsplit_once(')') else { return 0.0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / per_second
}

/// The early and late windows' bounds for a soak of `duration`.
fn windows(duration: Duration) -> ((f64, f64), (f64, f64)) {
    let window = WINDOW_MAX.min(duration / 5).as_secs_f64();
    let end = duration.as_secs_f64();
    ((window, 2.0 * window), (end - window, end + 1.0))
}

/// The mean of `value` over the samples inside `range` (seconds), or 0 when none is.
fn mean_in(samples: &[Sample], (from, to): (f64, f64), value: impl Fn(&Sample) -> f64) -> f64 {
    let inside: Vec<f64> = samples.iter().filter(|s| s.t_s > from && s.t_s <= to).map(value).collect();
    if inside.is_empty() { 0.0 } else { inside.iter().sum::<f64>() / inside.len() as f64 }
}

/// The summary table's rows for one soak; true when it stays within the bounds.
fn summarize(soak: &Soak, duration: Duration, text: &mut String) -> bool {
    let (early, late) = windows(duration);
    let rate = |window| mean_in(&soak.samples, window, |s| s.ops_per_s);
    let cpu = |window| mean_in(&soak.samples, window, |s| s.cpu_us_per_op);
    let kept = rate(late) / rate(early).max(1e-9);
    let mut passed = kept >= THROUGHPUT_KEPT_MIN;
    let _ = writeln!(
        text,
        "| {} | throughput (ops/s) | {:.0} | {:.0} | {kept:.2} | CPU {:.1} → {:.1} µs/op |",
        soak.protocol,
        rate(early),
        rate(late),
        cpu(early),
        cpu(late)
    );
    let names: Vec<String> =
        soak.samples.first().map_or(Vec::new(), |s| s.processes.iter().map(|p| p.name.clone()).collect());
    for (index, name) in names.iter().enumerate() {
        let rss = |window| mean_in(&soak.samples, window, |s| s.processes.get(index).map_or(0.0, |p| p.rss_mib));
        let ratio = rss(late) / rss(early).max(1e-9);
        let within = (ratio - 1.0).abs() <= MEMORY_GROWTH_MAX;
        passed &= within;
        let verdict = if within { "within 20%" } else { "**beyond 20%**" };
        let _ = writeln!(
            text,
            "| {} | {name} RSS (MiB) | {:.1} | {:.1} | {ratio:.2} | {verdict} |",
            soak.protocol,
            rss(early),
            rss(late)
        );
    }
    passed
}

/// Writes the CSV, the plots and the summary; true when every protocol stayed within bounds.
fn write_files(out: &Path, soaks: &[Soak], duration: Duration, filled: bool) -> Result<bool, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut csv = String::from("protocol,t_s,ops_per_s,cpu_us_per_op,process,rss_mib,cpu_s\n");
    for soak in soaks {
        for s in &soak.samples {
            for p in &s.processes {
                let _ = writeln!(
                    csv,
                    "{},{:.1},{:.0},{:.2},{},{:.2},{:.2}",
                    soak.protocol, s.t_s, s.ops_per_s, s.cpu_us_per_op, p.name, p.rss_mib, p.cpu_s
                );
            }
        }
    }
    let write = |name: &str, body: &str| {
        let path = out.join(name);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
        Ok::<(), String>(())
    };
    write("soak.csv", &csv)?;
    let (early, late) = windows(duration);
    let mut summary = format!(
        "# Soak of {} s\n\n{}. Early window {:.0}–{:.0} s, late window the last {:.0} s; bounds: every process's memory \
         within 20%, throughput at least 0.9×.\n\n| protocol | measure | early | late | late/early | |\n|---|---|---|---|---|---|\n",
        duration.as_secs(),
        if filled { "Every key written once before the clock starts" } else { "Started on an empty key space" },
        early.0,
        early.1,
        late.1 - 1.0 - late.0
    );
    let mut passed = true;
    for soak in soaks {
        passed &= summarize(soak, duration, &mut summary);
    }
    print!("{summary}");
    write("soak-summary.md", &summary)?;
    plot(out, soaks)?;
    Ok(passed)
}

fn plot(out: &Path, soaks: &[Soak]) -> Result<(), String> {
    let throughput: Vec<Series> = soaks
        .iter()
        .map(|soak| Series {
            label: soak.protocol.clone(),
            points: soak.samples.iter().map(|s| (s.t_s, s.ops_per_s)).collect(),
        })
        .collect();
    let path = out.join("soak-throughput.png");
    plot_series(&path, "Soak: throughput through the Redis gateway", "time (s)", "SET/s", &throughput)?;
    println!("wrote {}", path.display());
    let mut memory = Vec::new();
    for soak in soaks {
        let names = soak.samples.first().map_or(Vec::new(), |s| s.processes.iter().map(|p| p.name.clone()).collect());
        for (index, name) in names.iter().enumerate() {
            let points =
                soak.samples.iter().map(|s| (s.t_s, s.processes.get(index).map_or(0.0, |p| p.rss_mib))).collect();
            memory.push(Series { label: format!("{} {name}", soak.protocol), points });
        }
    }
    let path = out.join("soak-memory.png");
    plot_series(&path, "Soak: resident memory of each process", "time (s)", "RSS (MiB)", &memory)?;
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};

    fn sample(t_s: f64, ops_per_s: f64, rss_mib: f64) -> Sample {
        let processes = vec![ProcessSample { name: "r1".into(), rss_mib, cpu_s: 0.0 }];
        Sample { t_s, ops_per_s, cpu_us_per_op: 1.0, processes }
    }

    #[test]
    fn the_summary_compares_the_second_window_with_the_last() {
        // Goal: the verdict follows issue 21's rule on the right windows. Method: a 100 s soak
        // sampled every 5 s has 20 s windows, (20, 40] and (80, 100]; memory that grows by 30%
        // between them fails, by 10% passes; throughput that falls to 0.8× fails.
        let soak = |late_rss: f64, late_rate: f64| Soak {
            protocol: "p".into(),
            samples: (1..=20)
                .map(|i| {
                    let t = i as f64 * 5.0;
                    if t > 80.0 { sample(t, late_rate, late_rss) } else { sample(t, 1000.0, 100.0) }
                })
                .collect(),
        };
        let duration = Duration::from_secs(100);
        assert_eq!(windows(duration), ((20.0, 40.0), (80.0, 101.0)));
        let mut text = String::new();
        assert!(summarize(&soak(110.0, 950.0), duration, &mut text), "{text}");
        assert!(!summarize(&soak(130.0, 950.0), duration, &mut text), "memory grew 30%");
        assert!(!summarize(&soak(100.0, 800.0), duration, &mut text), "throughput fell to 0.8x");
    }

    /// A Redis server that answers `+OK` to its first `ok_max` SETs and `-ERR` to the others,
    /// and records the key of each SET it received.
    fn fake_server(ok_max: usize) -> (u16, Arc<Mutex<Vec<String>>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let keys = Arc::new(Mutex::new(Vec::new()));
        let seen = keys.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || answer(stream, &seen, ok_max));
            }
        });
        (port, keys)
    }

    /// Reads `*3 $3 SET $n key $n value` commands, seven lines each, and answers each.
    fn answer(stream: std::net::TcpStream, seen: &Mutex<Vec<String>>, ok_max: usize) {
        let mut writer = stream.try_clone().expect("clone");
        let mut lines = BufReader::new(stream).lines().map_while(Result::ok);
        while let Some(command) = lines.by_ref().take(7).collect::<Vec<_>>().into_iter().nth(4) {
            let mut keys = seen.lock().expect("lock");
            keys.push(command);
            let reply: &[u8] = if keys.len() <= ok_max { b"+OK\r\n" } else { b"-ERR full\r\n" };
            if writer.write_all(reply).is_err() {
                return;
            }
        }
    }

    #[test]
    fn the_fill_writes_every_key_once_as_redis_benchmark_names_them() {
        // Goal: after the fill, every key redis-benchmark -r N can name exists. Method: a fake
        // server records the SETs of a fill of 1,000 keys (eight connections, pipelined); then
        // one that refuses after 10 SETs must make the fill fail with the reply in the error.
        let (port, keys) = fake_server(usize::MAX);
        fill_key_space(port, 1000).expect("fill");
        let mut keys = keys.lock().expect("lock").clone();
        keys.sort();
        let expected: Vec<String> = (0..1000).map(|i| format!("key:{i:012}")).collect();
        assert_eq!(keys, expected);
        let (port, _) = fake_server(10);
        let error = fill_key_space(port, 1000).expect_err("a refused SET stops the fill");
        assert!(error.contains("-ERR full"), "{error}");
    }
}
