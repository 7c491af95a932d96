//! The `ordo` command as users type it: exit codes, JSON fields, seed search and replay lines.

use std::process::{Command, Output};

fn ordo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ordo")).args(args).env("XDG_DATA_HOME", data_home()).output().expect("ordo runs")
}

/// The user data directory the tests give `ordo`: `cluster up` without --data-dir keeps its
/// cluster there, and it must neither touch the user's own nor find a cluster an earlier run
/// left (one directory per test process, under the temporary directory).
fn data_home() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ordo-cli-test-{}-data-home", std::process::id()))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("ordo-cli-test-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn protocols_lists_the_registry() {
    // Goal: `ordo protocols` names every protocol, and hides canaries unless asked.
    let listed = stdout(&ordo(&["protocols"]));
    assert!(listed.contains("multipaxos") && listed.contains("unreplicated"), "{listed}");
    assert!(!listed.contains("canary"));
    assert!(stdout(&ordo(&["protocols", "--canaries"])).contains("multipaxos-canary-early-reply"));
}

#[test]
fn sim_json_has_the_promised_fields() {
    // Goal: the JSON summary carries every field the docs promise, with sane values.
    let output = ordo(&["sim", "--protocol", "multipaxos", "--duration", "200ms", "--seed", "3", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("one JSON object");
    for field in [
        "protocol",
        "seed",
        "committed",
        "throughput_ops_per_s",
        "latency_ms",
        "sites",
        "fast_path_ratio",
        "linearizable",
        "linearizability_unknown",
        "agreement",
        "events",
        "wall_s",
    ] {
        assert!(json.get(field).is_some(), "missing {field}");
    }
    for field in ["mean", "p50", "p90", "p99", "p999"] {
        assert!(json["latency_ms"][field].as_f64().unwrap() > 0.0, "latency_ms.{field}");
    }
    assert_eq!(json["linearizable"], true);
    assert_eq!(json["agreement"], true);
    assert!(json["fast_path_ratio"].is_null());
    assert!(json["sites"][0]["p99"].as_f64().unwrap() > 0.0);
}

#[test]
fn clock_jitter_reaches_the_simulated_clocks() {
    // Goal: `--clock-jitter` makes readings off by up to that much (`--clock-error` alone only
    // sets the claim), so Nezha's fast path falls while the run stays linearizable.
    let fast_path = |extra: &[&str]| {
        let mut args = vec!["sim", "--protocol", "nezha", "--duration", "200ms", "--clients", "16"];
        args.extend_from_slice(&["--set", "proxies=3", "--clock-error", "1ms", "--json"]);
        args.extend_from_slice(extra);
        let output = ordo(&args);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let json: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("one JSON object");
        assert_eq!(json["linearizable"], true);
        json["fast_path_ratio"].as_f64().expect("nezha reports its fast path")
    };
    let (claimed, jittered) = (fast_path(&[]), fast_path(&["--clock-jitter", "1ms"]));
    assert!(claimed > 0.9 && jittered < 0.5, "fast path {claimed} without jitter, {jittered} with");
}

#[test]
fn seed_search_catches_a_canary_and_prints_its_replay() {
    // Goal: a failing seed search exits non-zero and prints a command that replays the seed.
    let output = ordo(&[
        "sim",
        "--protocol",
        "multipaxos-canary-early-reply",
        "--seeds",
        "1..100",
        "--faults",
        "random",
        "--duration",
        "1s",
        "--clients",
        "6",
        "--jobs",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    let replay = text.lines().find_map(|line| line.strip_prefix("reproduce with: ordo ")).expect("a replay line");
    assert!(replay.contains("--seed ") && !replay.contains("--seeds"), "{replay}");
    let words: Vec<&str> = replay.split_whitespace().collect();
    let again = ordo(&words);
    assert_eq!(again.status.code(), Some(1), "the replay fails the same way");
}

#[test]
fn a_campaign_with_inconclusive_checks_says_so_and_goes_on() {
    // Goal: a seed whose linearizability check hits its limits is unknown, not a failure: the
    // campaign runs every seed, lists the inconclusive ones, and exits 3 (not 0, not 1).
    let args = ["sim", "--protocol", "multipaxos", "--seeds", "1..3", "--duration", "100ms", "--clients", "8"];
    // Without the witness: the replicas' order would prove every key without a search.
    let limits = ["--check-configurations-max", "1", "--check-explored-max", "1", "--check-without-witness"];
    let output = ordo(&[&args[..], &limits].concat());
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert_eq!(text.lines().filter(|line| line.starts_with("seed ")).count(), 3, "every seed ran: {text}");
    assert!(text.contains("0 seeds passed, 3 inconclusive (seeds [1, 2, 3]), 0 failed"), "{text}");
    assert!(text.contains("--check-configurations-max"), "says how to settle it: {text}");
    assert_eq!(ordo(&args).status.code(), Some(0), "settled under the default limits");
}

#[test]
fn check_exit_codes() {
    // Goal: `ordo check` exits 0 for a linearizable history, 1 for a stale read, 2 for garbage,
    // 3 when the search hits its limits (unknown).
    let good = temp_file(
        "good.jsonl",
        concat!(
            r#"{"client": 1, "kind": "invoke", "time_ns": 1, "op": "write", "key": "k", "value": "a"}"#,
            "\n",
            r#"{"client": 1, "kind": "ok", "time_ns": 2, "op": "write", "key": "k", "value": "a"}"#,
            "\n",
            r#"{"client": 2, "kind": "invoke", "time_ns": 3, "op": "read", "key": "k"}"#,
            "\n",
            r#"{"client": 2, "kind": "ok", "time_ns": 4, "op": "read", "key": "k", "value": "a"}"#,
            "\n"
        ),
    );
    let passed = ordo(&["check", good.to_str().unwrap()]);
    assert_eq!(passed.status.code(), Some(0));
    let summary = stdout(&passed);
    assert!(summary.starts_with("linearizable: "), "the verdict first: {summary}");
    assert!(summary.contains("4 events, 2 operations: 2 ok, 0 failed, 0 of unknown outcome"), "{summary}");
    assert!(summary.contains("1 key: 1 proved by search"), "{summary}");
    assert!(!summary.contains('{'), "no Rust debug text: {summary}");
    let good_text = std::fs::read_to_string(&good).unwrap();
    let stale_read = r#"{"client": 2, "kind": "ok", "time_ns": 4, "op": "read", "key": "k", "value": null}"#;
    let stale_text: Vec<&str> = good_text.lines().take(3).chain([stale_read]).collect();
    let stale = temp_file("stale.jsonl", &stale_text.join("\n"));
    let verdict = ordo(&["check", stale.to_str().unwrap()]);
    assert_eq!(verdict.status.code(), Some(1));
    assert!(stdout(&verdict).contains("\"k\""), "names the key: {}", stdout(&verdict));
    let garbage = temp_file("garbage.jsonl", "{\"client\": 1, \"kind\": \"bogus\"}\nnot json\n");
    let rejected = ordo(&["check", garbage.to_str().unwrap()]);
    assert_eq!(rejected.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&rejected.stderr).contains("line 1"));
    assert_eq!(ordo(&["check", "/nonexistent/history.jsonl"]).status.code(), Some(2));
    let concurrent_writes = [
        r#"{"client": 1, "kind": "invoke", "time_ns": 0, "op": "write", "key": "k", "value": "a"}"#,
        r#"{"client": 2, "kind": "invoke", "time_ns": 0, "op": "write", "key": "k", "value": "b"}"#,
        r#"{"client": 1, "kind": "ok", "time_ns": 10, "op": "write", "key": "k", "value": "a"}"#,
        r#"{"client": 2, "kind": "ok", "time_ns": 20, "op": "write", "key": "k", "value": "b"}"#,
        r#"{"client": 3, "kind": "invoke", "time_ns": 30, "op": "read", "key": "k"}"#,
        r#"{"client": 3, "kind": "ok", "time_ns": 40, "op": "read", "key": "k", "value": "b"}"#,
    ];
    let ambiguous = temp_file("ambiguous.jsonl", &concurrent_writes.join("\n"));
    let path = ambiguous.to_str().unwrap();
    let unknown = ordo(&["check", path, "--configurations-max", "1", "--explored-max", "1"]);
    assert_eq!(unknown.status.code(), Some(3), "too complex is unknown, not a failure: {}", stdout(&unknown));
    assert!(stdout(&unknown).starts_with("UNKNOWN"), "{}", stdout(&unknown));
    assert_eq!(ordo(&["check", path]).status.code(), Some(0), "settled under the default limits");
    for path in [good, stale, garbage, ambiguous] {
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn bad_arguments_get_clear_errors() {
    // Goal: wrong configuration is an error message and exit 2, never a panic.
    for (args, expected) in [
        (vec!["sim", "--protocol", "nope"], "unknown protocol"),
        (vec!["sim", "--protocol", "multipaxos", "--replicas", "2", "--f", "1"], "needs at least 3 replicas"),
        (vec!["sim", "--protocol", "multipaxos", "--latency", "/nonexistent.toml"], "cannot read latency file"),
        (vec!["sim", "--protocol", "multipaxos", "--set", "batch_max=0"], "batch_max must be positive"),
        (vec!["sim", "--protocol", "multipaxos", "--workload", "conflict:7"], "must be in [0, 1]"),
    ] {
        let output = ordo(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn cluster_up_refuses_a_data_dir_with_an_earlier_clusters_files() {
    // Goal: `cluster up` starts a new cluster; over a directory that holds an earlier cluster's
    // durable files its nodes would boot as restarted nodes (every replica of a crash-stop
    // protocol would retire, and the cluster would never answer). It must refuse, naming the
    // directory and the flag that wipes it, and start nothing; other files there are not its
    // business. Method: a directory with an earlier cluster's `cluster.toml` and `r0-n0.log`
    // plus a user's `up.log`; `cluster up --protocol tempo --data-dir DIR` must exit 2 within
    // 10 s (a cluster that started would run until killed) and leave every file in place.
    let dir = std::env::temp_dir().join(format!("ordo-cli-test-{}-earlier-cluster", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["cluster.toml", "r0-n0.log", "up.log"] {
        std::fs::write(dir.join(name), "earlier").unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ordo"))
        .args(["cluster", "up", "--protocol", "tempo", "--port-base", "29400", "--redis-port", "29399"])
        .arg("--data-dir")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ordo runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cluster up started over an earlier cluster's files");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&dir.display().to_string()), "names the directory: {stderr}");
    assert!(stderr.contains("--wipe-data-dir"), "names the flag: {stderr}");
    assert!(stderr.contains("cluster.toml, r0-n0.log)"), "lists the earlier files, not up.log: {stderr}");
    for name in ["cluster.toml", "r0-n0.log", "up.log"] {
        assert!(dir.join(name).exists(), "{name} left in place");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cluster_up_refuses_ports_that_would_wrap_or_need_root() {
    // Goal: a port range past 65535 used to wrap to port 0 and the privileged ports, and the
    // cluster said it was up while every write timed out. Method: bases that run past 65535 or
    // lie below 1024, and a Redis port among the nodes' ports, must exit 2 at once with a
    // message naming the option.
    for (args, expected) in [
        (vec!["--port-base", "65530", "--redis-port", "29599"], "past 65535"),
        (vec!["--port-base", "80", "--redis-port", "29599"], "below 1024"),
        (vec!["--port-base", "29600", "--redis-port", "29601"], "among the nodes' ports"),
    ] {
        let mut all = vec!["cluster", "up", "--protocol", "multipaxos", "--status-every", "0"];
        all.extend(args.iter().copied());
        let output = ordo(&all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn cluster_up_says_why_a_node_could_not_start() {
    // Goal: when a node cannot start (here, its UDP port is taken), `cluster up` fails with the
    // node's own reason in its output, not only a pointer to a log file. Method: hold r2's port,
    // start a cluster; it must exit non-zero within 30 s with the bind error in its stderr.
    let _taken = std::net::UdpSocket::bind("127.0.0.1:29701").expect("port 29701 free for the test");
    let output = cluster_up_until_exit(&["--protocol", "multipaxos", "--port-base", "29700", "--redis-port", "29699"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("r2 exited"), "names the node: {stderr}");
    assert!(stderr.contains("Address already in use"), "gives the reason: {stderr}");
    assert!(stderr.contains("--port-base"), "says what to change: {stderr}");
}

#[test]
fn cluster_up_says_why_the_gateway_could_not_start() {
    // Goal: the gateway's Redis port taken by another program (a redis-server, say) is reported
    // with the gateway's own bind error, naming that address. Method: hold a TCP listener on
    // the Redis port and start a cluster; it must exit 1 within 30 s saying why.
    let _taken = std::net::TcpListener::bind("127.0.0.1:29749").expect("port 29749 free for the test");
    let output = cluster_up_until_exit(&["--protocol", "multipaxos", "--port-base", "29750", "--redis-port", "29749"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("gw exited"), "names the gateway: {stderr}");
    assert!(stderr.contains("bind Redis 127.0.0.1:29749: Address already in use"), "gives the reason: {stderr}");
}

/// `ordo cluster up` with `args`, no status lines, its output piped.
fn cluster_up(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ordo"));
    command.args(["cluster", "up", "--status-every", "0"]).args(args).env("XDG_DATA_HOME", data_home());
    command.stdout(std::process::Stdio::piped());
    command
}

/// Runs `ordo cluster up` with `args` (no status lines) until it exits, for at most 30 s.
fn cluster_up_until_exit(args: &[&str]) -> Output {
    let mut child = cluster_up(args).stderr(std::process::Stdio::piped()).spawn().expect("ordo runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cluster up {args:?} came up, or hung, instead of failing");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn cluster_up_refuses_a_protocol_without_replication() {
    // Goal: a protocol that runs every command on one server, started with three replicas, used
    // to start two idle processes and call itself a 3-replica cluster. It must be refused before
    // anything starts, naming the idle replicas and the option that fits; with one replica it
    // starts (and is warned that f = 0). Method: `unreplicated --replicas 3`, which must exit 2
    // at once with that message.
    let output = cluster_up_until_exit(&["--protocol", "unreplicated", "--replicas", "3", "--port-base", "29800"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("has no replication"), "says it plainly: {stderr}");
    assert!(stderr.contains("(r2, r3)"), "names the idle replicas: {stderr}");
    assert!(stderr.contains("--replicas 1"), "says what fits: {stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).is_empty(), "nothing started");
}

#[test]
fn cluster_up_reports_its_data_directory_commits_and_files() {
    // Goal: what a user sees of a running cluster is true. The data directory is printed; the
    // status block counts the cluster's commits where the protocol counts them (it used to read
    // `commits fast/slow 0/0` beside `executed 2`); the directory holds only the files of
    // nodes that wrote something (each of the gateway's client nodes used to leave an empty
    // durable file); a Ctrl-C with every node running exits 0. Method: a Multi-Paxos cluster
    // with 16 gateway client nodes in a fresh --data-dir, one SET over RESP, a status block,
    // then SIGINT; then count the durable files.
    use std::io::{BufRead, Read, Write};
    let dir = std::env::temp_dir().join(format!("ordo-cli-test-{}-status", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ordo"))
        .args(["cluster", "up", "--protocol", "multipaxos", "--clients", "16", "--status-every", "300ms"])
        .args(["--port-base", "29850", "--redis-port", "29849", "--data-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ordo runs");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    let mut next = || {
        let line = lines.next().expect("cluster up printed until SIGINT").expect("utf-8");
        seen.push(line.clone());
        line
    };
    while !next().contains("is up") {}
    let mut redis = std::net::TcpStream::connect("127.0.0.1:29849").expect("the gateway listens");
    redis.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n").unwrap();
    let mut reply = [0u8; 5];
    redis.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+OK\r\n");
    // The first status block may predate the write; wait for one that shows it.
    let header = loop {
        let line = next();
        if line.starts_with("-- nodes") && !line.contains("commits 0") {
            break line;
        }
    };
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().expect("wait");
    let text = seen.join("\n");
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(text.contains(&format!("data directory: {}", dir.display())), "{text}");
    assert_eq!(header, "-- nodes (cluster: commits 1)", "no fast/slow for a protocol without a fast path");
    let mut durable: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".log"))
        .collect();
    durable.sort();
    assert_eq!(durable, ["r1-n0.log", "r2-n1.log", "r3-n2.log"], "only the replicas wrote");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_lists_every_command_in_one_line_each() {
    // Goal: `ordo --help` is where a newcomer finds the commands (it once listed neither
    // `cluster` nor `bench`), with one line each and the exit codes; `ordo help COMMAND` works
    // for each. Method: parse the Commands block of the help text.
    let help = stdout(&ordo(&["--help"]));
    let block: Vec<&str> =
        help.lines().skip_while(|line| *line != "Commands:").skip(1).take_while(|line| !line.is_empty()).collect();
    let names: Vec<&str> = block.iter().filter_map(|line| line.split_whitespace().next()).collect();
    assert_eq!(
        names,
        ["protocols", "sim", "check", "node", "cluster", "bench", "reproduce", "help"],
        "one line each: {help}"
    );
    assert!(block.iter().all(|line| line.len() <= 100), "short lines: {help}");
    assert!(help.contains("Exit codes") && help.contains("3  inconclusive"), "{help}");
    for command in &names[..names.len() - 1] {
        let output = ordo(&["help", command]);
        assert!(output.status.success(), "{command}");
        assert!(stdout(&output).contains(&format!("Usage: ordo {command}")), "{command}: {}", stdout(&output));
    }
}

#[test]
fn cluster_up_reports_a_node_that_dies_and_exits_1() {
    // Goal: a node that dies while the cluster runs is reported with why, and the command's exit
    // code says the run failed (it used to print one line and exit 0 at Ctrl-C). Method: start
    // a cluster, SIGKILL r2, wait for the report, then SIGINT; expect exit 1 and r2 named.
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ordo"))
        .args(["cluster", "up", "--protocol", "multipaxos", "--clients", "4", "--status-every", "0"])
        .args(["--port-base", "29900", "--redis-port", "29899"])
        .env("XDG_DATA_HOME", data_home())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ordo runs");
    let mut r2 = None;
    // Kept open to the end: a closed stdout would stop `cluster up` at its next line.
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    for line in stdout.by_ref() {
        let line = line.expect("utf-8");
        if let Some(pid) = line.strip_prefix("started r2 pid ") {
            r2 = Some(pid.parse::<libc::pid_t>().expect("a pid"));
        }
        if line.starts_with("Ctrl-C stops the cluster") {
            break;
        }
    }
    let r2 = r2.expect("r2 started");
    // SAFETY: signalling processes this test started, by their pids.
    unsafe { libc::kill(r2, libc::SIGKILL) };
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let report =
        stderr.find_map(|line| line.ok().filter(|line| line.contains("r2 exited"))).expect("r2's exit reported");
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().expect("wait");
    assert!(report.starts_with("error: r2 exited with signal: 9"), "{report}");
    assert_eq!(status.code(), Some(1), "a node died during the run");
    drop(stdout);
}

/// Runs `ordo cluster up` with `args` until it says the cluster runs, then stops it with Ctrl-C;
/// returns what it printed up to then.
fn cluster_up_until_running(args: &[&str]) -> Vec<String> {
    use std::io::BufRead;
    let mut child = cluster_up(args).stderr(std::process::Stdio::null()).spawn().expect("ordo runs");
    let mut printed = Vec::new();
    let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    for line in stdout.lines().map_while(Result::ok) {
        let running = line.starts_with("Ctrl-C stops the cluster");
        printed.push(line);
        if running {
            break;
        }
    }
    // SAFETY: SIGINT to the process this test started, by its pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    child.wait().expect("wait");
    printed
}

#[test]
fn a_durable_nezha_cluster_in_the_default_directory_restarts_without_its_option() {
    // Goal: in the default directory `cluster up` replaces an earlier cluster that cannot be
    // restarted. Whether it can is said by the earlier cluster's own file: a Nezha cluster
    // started with `--set durable=true` keeps its writes on disk, and the same command without
    // the option must restart it (with a note), not delete it. Method: start and stop a durable
    // Nezha cluster, then run `cluster up --protocol nezha` on the same port base.
    let args = ["--protocol", "nezha", "--port-base", "29950", "--redis-port", "29949"];
    let first = cluster_up_until_running(&[&args[..], &["--set", "durable=true"]].concat());
    assert!(first.iter().any(|line| line.starts_with("new cluster in")), "{first:?}");
    assert!(first.last().is_some_and(|line| line.starts_with("Ctrl-C")), "the first cluster ran: {first:?}");
    let second = cluster_up_until_running(&args);
    assert!(second.iter().any(|line| line.starts_with("restarting the cluster in")), "{second:?}");
    assert!(second.iter().any(|line| line.contains("durable = true")), "the note names the option kept: {second:?}");
    assert!(!second.iter().any(|line| line.contains("replaces it")), "{second:?}");
}
