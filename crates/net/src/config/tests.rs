use super::*;
use ordo_protocols::multipaxos::MultiPaxos;

#[test]
fn example_cluster_files_parse_and_place() {
    // Goal: the shipped examples are valid cluster files; ids follow the simulator's order
    // (replicas, extra roles, then the gateway's client nodes).
    for name in ["multipaxos-3.toml", "faults.toml"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster").join(name);
        let file = ClusterFile::parse(&std::fs::read_to_string(&path).expect("example exists")).expect(name);
        let config = file.protocol_config::<MultiPaxos>().expect("options");
        let placement = file.placement::<MultiPaxos>(&config).expect("placement");
        assert_eq!(placement.topology.replicas().len(), 3);
        assert_eq!(placement.topology.node(NodeId(3)).role, Role::Client);
        assert_eq!(ClusterFile::parse(&file.to_toml()).expect("round trip"), file);
    }
}

#[test]
fn a_cluster_runs_with_the_protocols_runtime_defaults_under_its_own_options() {
    // Goal: a cluster file that does not set an option gets the protocol's value for real
    // processes (a hand-written file too), and one that sets it keeps its own.
    use ordo_protocols::nezha::Nezha;
    let mut file = ClusterFile::local::<Nezha>(&Default::default(), toml::Table::new(), 3, 4, 9000, None, "/x".into());
    assert_eq!(file.protocol_config::<Nezha>().unwrap().view_change_timeout_ns, 1_000_000_000);
    file.protocol_options.insert("view_change_timeout_ns".into(), toml::Value::Integer(30_000_000));
    assert_eq!(file.protocol_config::<Nezha>().unwrap().view_change_timeout_ns, 30_000_000);
}

#[test]
fn hosted_nodes_live_in_their_hosts_process() {
    // Goal: a node entry with `host` is placed in the hosting entry's process (same entry
    // index, so the same socket), and its id keeps the simulator's order.
    use ordo_protocols::nezha::Nezha;
    let config = Default::default();
    let mut file = ClusterFile::local::<Nezha>(&config, toml::Table::new(), 3, 4, 9000, None, "/tmp/x".into());
    let gateway = file.entry("gw").expect("gateway");
    let proxy = file.entry("proxy1").expect("proxy");
    file.nodes[proxy].host = Some("gw".into());
    file.nodes[proxy].addr = file.nodes[gateway].addr;
    let placement = file.placement::<Nezha>(&config).expect("placement");
    let proxy_node = placement.topology.nodes.iter().position(|n| n.role == Role::Proxy).expect("a proxy");
    assert_eq!(placement.entry_of[proxy_node], gateway);
    let client = placement.topology.with_role(Role::Client).next().expect("a client");
    assert!(
        placement.topology.same_machine(client, NodeId(proxy_node as u32)),
        "a hosted proxy shares its host's machine"
    );
    assert!(!placement.topology.same_machine(client, NodeId(0)), "a replica runs on a machine of its own");
    assert_eq!(ClusterFile::parse(&file.to_toml()).expect("round trip"), file);
}

#[test]
fn bad_cluster_files_are_errors() {
    assert!(ClusterFile::parse("protocol = 3").is_err());
    let mut file =
        ClusterFile::local::<MultiPaxos>(&Default::default(), toml::Table::new(), 3, 4, 9000, None, "/tmp/x".into());
    file.nodes[1].name = "r1".into();
    assert!(file.placement::<MultiPaxos>(&Default::default()).is_err(), "duplicate names");
    let mut hosted = file.clone();
    hosted.nodes[0].name = "r0".into();
    hosted.nodes[0].host = Some("gw".into());
    assert!(hosted.placement::<MultiPaxos>(&Default::default()).is_err(), "a hosted node keeps its own addr");
    hosted.nodes[0].host = Some("nobody".into());
    assert!(hosted.placement::<MultiPaxos>(&Default::default()).is_err(), "unknown host");
    file.nodes.retain(|n| n.role == FileRole::Gateway);
    assert!(file.placement::<MultiPaxos>(&Default::default()).is_err(), "no replica");
}

fn local_file() -> ClusterFile {
    ClusterFile::local::<MultiPaxos>(&Default::default(), toml::Table::new(), 3, 4, 9000, None, "/tmp/x".into())
}

#[test]
fn the_cluster_hash_names_the_membership_only() {
    // Goal: nodes whose files differ only in per-machine settings (metrics ports, the data
    // directory, the key file's path, runtime options) still hear each other; a different
    // address, role, protocol option or node count makes another cluster.
    let file = local_file();
    let same = |change: &dyn Fn(&mut ClusterFile)| {
        let mut changed = file.clone();
        change(&mut changed);
        changed.cluster_hash() == file.cluster_hash()
    };
    assert!(same(&|f| f.nodes[0].metrics = Some("127.0.0.1:1".parse().unwrap())));
    assert!(same(&|f| f.data_dir = "/elsewhere".into()));
    assert!(same(&|f| f.key_file = Some("/etc/ordo/key".into())));
    assert!(same(&|f| f.runtime.op_timeout_ns = 1));
    assert!(!same(&|f| f.nodes[1].addr = "127.0.0.1:1".parse().unwrap()));
    assert!(!same(&|f| f.nodes[1].role = FileRole::Proxy));
    assert!(!same(&|f| {
        f.protocol_options.insert("batch_max".into(), toml::Value::Integer(2));
    }));
    assert!(!same(&|f| {
        f.nodes.pop();
    }));
}

#[test]
fn a_cluster_off_the_loopback_needs_a_key() {
    // Goal: a key is optional on 127.0.0.1 and required elsewhere, with a message that says
    // how to make one; a short secret is refused; the environment variable wins over the file;
    // the same secret gives the same key.
    let mut file = local_file();
    assert_eq!(file.key_from(None).expect("loopback"), None);
    file.nodes[2].addr = "10.1.2.3:7402".parse().unwrap();
    let refused = file.key_from(None).unwrap_err().to_string();
    assert!(refused.contains("`r3` is at 10.1.2.3:7402") && refused.contains(KEY_ENV), "{refused}");
    let short = file.key_from(Some(b"  short \n".to_vec())).unwrap_err().to_string();
    assert!(short.contains("5 bytes, at least 16"), "{short}");
    let secret = b"0123456789abcdef0123\n".to_vec();
    let key = file.key_from(Some(secret.clone())).expect("valid").expect("a key");
    assert_eq!(key, ClusterKey::derive(b"0123456789abcdef0123"));
    let dir = std::env::temp_dir().join(format!("ordo-key-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cluster.key"), b"another secret of the cluster").unwrap();
    file.key_file = Some("cluster.key".into());
    std::fs::write(dir.join("cluster.toml"), file.to_toml()).unwrap();
    let loaded = ClusterFile::load(&dir.join("cluster.toml")).expect("loads");
    assert_eq!(loaded.key_file.as_deref(), Some(dir.join("cluster.key").as_path()), "relative to the file");
    let from_file = loaded.key_from(None).expect("reads").expect("a key");
    assert_eq!(from_file, ClusterKey::derive(b"another secret of the cluster"));
    assert_eq!(loaded.key_from(Some(secret)).unwrap(), Some(key), "the environment wins");
    std::fs::remove_file(dir.join("cluster.key")).unwrap();
    assert!(loaded.key_from(None).unwrap_err().to_string().contains("cluster.key"), "names the missing file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn requirepass_and_gateway_limits_round_trip_and_old_files_get_defaults() {
    // Goal: `requirepass` and the gateway's limits are read from and written to the file, a
    // file without them (written before they existed) still parses with the defaults, and
    // the password never shows in a debug print. Method: parse, print, parse again.
    let old = "protocol = \"multipaxos\"\ndata_dir = \"/x\"\n[[node]]\nname = \"r1\"\nrole = \"replica\"\naddr = \"127.0.0.1:9000\"\n";
    let file = ClusterFile::parse(old).expect("a file without the new keys");
    assert_eq!((file.requirepass.as_ref(), file.runtime.connections_max), (None, 10_000));
    assert_eq!(file.runtime.idle_timeout_ns, 300_000_000_000);
    assert!(!file.to_toml().contains("requirepass"), "no password: no key");
    let text = format!("requirepass = \"s3cret\"\n{old}[runtime]\nidle_timeout_ns = 0\npipeline_depth_max = 8\n");
    let file = ClusterFile::parse(&text).expect("with the new keys");
    assert_eq!(file.requirepass, Some(Password("s3cret".into())));
    assert_eq!((file.runtime.idle_timeout_ns, file.runtime.pipeline_depth_max), (0, 8));
    assert_eq!(ClusterFile::parse(&file.to_toml()).expect("round trip"), file);
    assert!(!format!("{file:?}").contains("s3cret"), "Debug hides the password");
    assert!(ClusterFile::parse(&format!("{old}[runtime]\nno_such_limit = 1\n")).is_err(), "unknown keys are errors");
}
