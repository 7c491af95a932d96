//! Tests of fault plans: random plans' budgets and stability, slow periods, node references.

use super::*;
use ordo_core::Role;
use rand::SeedableRng;

const SHARDS: [&[u32]; 2] = [&[0, 1, 2], &[3, 4, 5, 6, 7]];

/// The random plan of `seed` for two shards (3 and 5 replicas) and four clients.
fn plan(seed: u64, f: usize, crash_model: CrashModel) -> Vec<Fault> {
    let shards: Vec<Vec<u32>> = SHARDS.iter().map(|shard| shard.to_vec()).collect();
    let all_nodes: Vec<u32> = (0..12).collect();
    let scope = RandomPlanScope {
        shards: &shards,
        all_nodes: &all_nodes,
        f,
        crash_model,
        duration_ns: 2_000_000_000,
        extra_roles: &[],
    };
    FaultPlan { random: true, ..FaultPlan::default() }.draw_random(&mut ChaCha8Rng::seed_from_u64(seed), &scope)
}

fn crashes(plan: &[Fault]) -> impl Iterator<Item = (u32, u64, Option<u64>)> + '_ {
    plan.iter().filter_map(|fault| match *fault {
        Fault::Crash { node, at_ns, restart_ns } => Some((node, at_ns, restart_ns)),
        _ => None,
    })
}

#[test]
fn crash_stop_plans_crash_at_most_f_distinct_replicas_per_shard_and_restart_them() {
    // Goal: under `CrashModel::Stop` a restarted replica stays out (it retires), so a random
    // plan must never crash more than f distinct replicas of a shard over the whole run, or
    // more than f would be down for good and progress after healing could not be required;
    // and it keeps the restarts, so that campaigns exercise the retirement. Method: 600
    // plans (f = 1 and 2, seeds 1–300); count distinct crashed replicas per shard; check
    // that every crash restarts before heal and that some plans crash a replica twice or
    // crash f distinct replicas of a shard (so the bound is reached, not vacuous).
    let (mut at_the_bound, mut crashed_twice, mut restarts) = (0, 0, 0);
    for seed in 1..=300 {
        for f in 1..=2 {
            let plan = plan(seed, f, CrashModel::Stop);
            for shard in SHARDS {
                let in_shard: Vec<u32> =
                    crashes(&plan).map(|(node, _, _)| node).filter(|node| shard.contains(node)).collect();
                let mut distinct = in_shard.clone();
                distinct.sort_unstable();
                distinct.dedup();
                assert!(distinct.len() <= f, "seed {seed} f {f}: {distinct:?} crash in shard {shard:?}");
                at_the_bound += usize::from(distinct.len() == f);
                crashed_twice += usize::from(in_shard.len() > distinct.len());
            }
            for (node, at_ns, restart_ns) in crashes(&plan) {
                let restart_ns = restart_ns.expect("every crash of a random plan restarts");
                assert!(at_ns < restart_ns, "seed {seed}: node {node} restarts after it crashes");
                assert!(restart_ns <= 1_200_000_000, "seed {seed}: node {node} restarts before heal");
                restarts += 1;
            }
        }
    }
    assert!(at_the_bound > 100, "plans reach f crashed replicas ({at_the_bound} shards)");
    assert!(crashed_twice > 10, "plans crash a retired replica again ({crashed_twice} shards)");
    assert!(restarts > 600, "plans restart crashed replicas ({restarts} restarts)");
}

#[test]
fn a_recovering_protocols_plans_are_unchanged() {
    // Goal: the crash-stop rule must not move the plans of protocols whose replicas recover
    // (Nezha, Multi-Paxos...): one seed, one world, before and after. Method: a fingerprint
    // (FNV-1a of the JSON) of 600 plans (f = 1 and 2, seeds 1–300) under
    // `CrashModel::Recover`, compared with the one printed by the code before crash models
    // reached the plan (commit dd087c5); and under either model a seed draws the same faults
    // other than crashes (the crash rule consumes no randomness of its own).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for seed in 1..=300 {
        for f in 1..=2 {
            let recover = plan(seed, f, CrashModel::Recover);
            for byte in serde_json::to_string(&recover).expect("a plan serializes").bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
            let others = |plan: Vec<Fault>| -> Vec<Fault> {
                plan.into_iter().filter(|fault| !matches!(fault, Fault::Crash { .. })).collect()
            };
            assert_eq!(others(recover), others(plan(seed, f, CrashModel::Stop)), "seed {seed} f {f}");
        }
    }
    assert_eq!(hash, 0x0ce6_32ca_ec83_9762, "the plans of recovering protocols moved");
}

#[test]
fn slow_periods_heal_in_time_and_slow_every_link_or_one_replicas() {
    // Goal: the slow-network periods of `--faults random-slow` keep the random plans'
    // contract (every fault heals before heal time) and cover both shapes they promise (every
    // link; one replica's links) with delays in the stated range; a seed's `random` faults are
    // not drawn from the same stream, so they cannot move. Method: 300 seeds' periods for two
    // shards; check counts, windows, delays and nodes; count the shapes.
    let shards: Vec<Vec<u32>> = SHARDS.iter().map(|shard| shard.to_vec()).collect();
    let scope = RandomPlanScope {
        shards: &shards,
        all_nodes: &[],
        f: 1,
        crash_model: CrashModel::Recover,
        duration_ns: 2_000_000_000,
        extra_roles: &[],
    };
    let plan = FaultPlan { random: true, random_slow: true, ..FaultPlan::default() };
    let (mut everywhere, mut one_replica) = (0, 0);
    for seed in 1..=300 {
        let periods = plan.draw_slow_periods(&mut ChaCha8Rng::seed_from_u64(seed), &scope);
        assert!((1..=3).contains(&periods.len()), "seed {seed}: {} periods", periods.len());
        for period in periods {
            let Fault::Slow { nodes, delay_max_ns, at_ns, until_ns } = period else {
                panic!("seed {seed}: only slow periods, got {period:?}");
            };
            assert!(at_ns < until_ns && until_ns <= 1_200_000_000, "seed {seed}: heals before heal time");
            assert!((200_000..=2_000_000).contains(&delay_max_ns), "seed {seed}: {delay_max_ns} ns");
            match nodes.as_slice() {
                [] => everywhere += 1,
                [node] => {
                    assert!(shards.iter().flatten().any(|replica| replica == node), "seed {seed}: a replica");
                    one_replica += 1;
                }
                _ => panic!("seed {seed}: at most one node, got {nodes:?}"),
            }
        }
    }
    assert!(everywhere > 100 && one_replica > 100, "both shapes: {everywhere} and {one_replica}");
    assert_eq!(plan.heal_ns(1_000), 600, "slow periods alone also set a heal time");
    let only_slow = FaultPlan { random_slow: true, ..FaultPlan::default() };
    assert_eq!(only_slow.heal_ns(1_000), 600, "without `random` too");
}

#[test]
fn a_slow_period_reads_from_a_plan_with_or_without_nodes() {
    // Goal: a hand-written plan can slow every link (no `nodes`) or named nodes' links.
    // Method: parse both forms and resolve them.
    let plan: FaultPlan = toml::from_str(
        r#"
        [[faults]]
        kind = "slow"
        delay_max_ns = 500000
        at_ns = 10
        until_ns = 20
        [[faults]]
        kind = "slow"
        nodes = ["replica:1", 4]
        delay_max_ns = 100
        at_ns = 30
        until_ns = 40
        "#,
    )
    .expect("the plan parses");
    let resolved = plan.resolve(&topology()).expect("every reference exists");
    assert_eq!(
        resolved,
        vec![
            Fault::Slow { nodes: vec![], delay_max_ns: 500_000, at_ns: 10, until_ns: 20 },
            Fault::Slow { nodes: vec![1, 4], delay_max_ns: 100, at_ns: 30, until_ns: 40 },
        ]
    );
    assert_eq!(resolved[1].name(), "slow");
}

/// Two shards of 3 replicas (ids 0–5), 3 proxies (6–8), a sequencer (9) and 2 clients (10, 11).
fn topology() -> Topology {
    use ordo_core::{NodeId, NodeSpec};
    let counts = [(Role::Replica, 6), (Role::Proxy, 3), (Role::Sequencer, 1), (Role::Client, 2)];
    let roles: Vec<Role> = counts.iter().flat_map(|&(role, count)| vec![role; count]).collect();
    let nodes = roles
        .iter()
        .enumerate()
        .map(|(id, &role)| {
            let shard = (role == Role::Replica).then_some(id / 3);
            NodeSpec { id: NodeId(id as u32), role, site: 0, shard, machine: None }
        })
        .collect();
    let shards = vec![(0..3).map(NodeId).collect(), (3..6).map(NodeId).collect()];
    Topology { nodes, shards, f: 1, sites: vec!["lan".to_string()], site_delay_ns: vec![vec![0]] }
}

fn parse(text: &str) -> Result<NodeRef, String> {
    text.parse()
}

fn role(role: Role, shard: Option<usize>, index: usize) -> NodeRef {
    NodeRef::Role { role, shard, index }
}

#[test]
fn node_references_parse_by_role_and_index_and_print_back() {
    // Goal: every form the plan syntax promises reads as meant and prints in the form it
    // reads. Method: parse each form, compare with the expected reference, print it again.
    let cases = [
        ("proxy:2", role(Role::Proxy, None, 2), "proxy:2"),
        ("sequencer", role(Role::Sequencer, None, 0), "sequencer:0"),
        ("controller:0", role(Role::Controller, None, 0), "controller:0"),
        ("client:5", role(Role::Client, None, 5), "client:5"),
        ("replica:1", role(Role::Replica, None, 1), "replica:1"),
        ("shard1/replica:0", role(Role::Replica, Some(1), 0), "shard1/replica:0"),
        ("3", NodeRef::Id(3), "3"),
    ];
    for (text, expected, printed) in cases {
        let parsed = parse(text).unwrap_or_else(|error| panic!("{text}: {error}"));
        assert_eq!(parsed, expected, "{text}");
        assert_eq!(parsed.to_string(), printed, "{text}");
        assert_eq!(parse(printed), Ok(expected), "{printed} reads back");
    }
}

#[test]
fn malformed_references_and_unknown_roles_are_refused_with_the_reason() {
    // Goal: a typo in a plan is an error that says what is wrong, never a silently different
    // node. Method: parse bad strings; check each error names the problem.
    for text in ["", "proxy:", "proxy:x", "proxy:1:2", ":1", "proxy:-1", "shard/replica:0", "shardx/replica:0"] {
        let error = parse(text).expect_err(text);
        assert!(error.starts_with("malformed node reference"), "{text}: {error}");
        assert!(error.contains("ROLE:INDEX") && error.contains("proxy"), "{text}: {error}");
    }
    let error = parse("leader:0").expect_err("unknown role");
    assert!(error.contains("unknown role \"leader\""), "{error}");
    assert!(error.contains("replica, client, proxy, sequencer, controller"), "{error}");
    let error = parse("Proxy:1").expect_err("roles are lower case");
    assert!(error.contains("unknown role \"Proxy\""), "{error}");
    let error = parse("shard1/proxy:0").expect_err("proxies have no shard");
    assert!(error.contains("only replicas belong to a shard"), "{error}");
}

#[test]
fn a_plan_file_names_nodes_by_id_or_by_role_and_resolves_against_the_topology() {
    // Goal: numeric ids keep working next to role references, in node fields and partition
    // sides, and resolve to the ids the topology gives them. Method: read a TOML plan with
    // both forms, resolve it against a two-shard topology with proxies and a sequencer.
    let plan: FaultPlan = toml::from_str(
        r#"
        [[faults]]
        kind = "crash"
        node = "proxy:0"
        at_ns = 10
        [[faults]]
        kind = "pause"
        node = 4
        at_ns = 20
        until_ns = 30
        [[faults]]
        kind = "partition"
        side = [1, "shard1/replica:2", "sequencer", "client:1"]
        at_ns = 40
        until_ns = 50
        [[faults]]
        kind = "clock_jump"
        node = "replica:2"
        at_ns = 60
        delta_ns = -5
        "#,
    )
    .expect("the plan parses");
    assert_eq!(plan.faults[0], Fault::Crash { node: role(Role::Proxy, None, 0), at_ns: 10, restart_ns: None });
    let resolved = plan.resolve(&topology()).expect("every reference exists");
    assert_eq!(
        resolved,
        vec![
            Fault::Crash { node: 6, at_ns: 10, restart_ns: None },
            Fault::Pause { node: 4, at_ns: 20, until_ns: 30 },
            Fault::Partition { side: vec![1, 5, 9, 11], at_ns: 40, until_ns: 50 },
            Fault::ClockJump { node: 2, at_ns: 60, delta_ns: -5 },
        ]
    );
    let written = toml::to_string(&plan).expect("a plan serializes");
    assert_eq!(toml::from_str::<FaultPlan>(&written).expect("and reads back"), plan, "{written}");
    let by_id = FaultPlan { faults: resolved.into_iter().map(FaultSpec::from).collect(), ..FaultPlan::default() };
    assert_eq!(by_id.resolve(&topology()), plan.resolve(&topology()), "resolved faults are plans by id");
}

#[test]
fn references_to_nodes_the_cluster_lacks_are_refused_naming_the_fault() {
    // Goal: an index beyond a role's nodes (or a shard, or a node id, beyond the cluster) is
    // a configuration error that says what the cluster has, not a fault that never fires.
    // Method: resolve one-fault plans with out-of-range references; read the errors.
    let topology = topology();
    let crash = |node: &str| -> String {
        let text = format!("[[faults]]\nkind = \"crash\"\nnode = {node}\nat_ns = 1\n");
        let plan: FaultPlan = toml::from_str(&text).expect("the plan parses");
        plan.resolve(&topology).expect_err(node)
    };
    assert_eq!(
        crash("\"proxy:5\""),
        "fault plan, fault 1 (crash): the plan names proxy:5 but the cluster has 3 proxies"
    );
    assert!(crash("\"sequencer:1\"").ends_with("the cluster has 1 sequencer"));
    assert!(crash("\"controller\"").ends_with("the plan names controller:0 but the cluster has 0 controllers"));
    assert!(crash("\"replica:3\"").ends_with("the plan names replica:3 but shard 0 has 3 replicas"));
    assert!(crash("\"shard2/replica:0\"").ends_with("but the cluster has 2 shard(s)"));
    assert!(crash("\"client:2\"").ends_with("the cluster has 2 clients"));
    assert!(crash("12").ends_with("the plan names node 12 but the cluster has 12 nodes"));
    let negative = toml::from_str::<FaultPlan>("[[faults]]\nkind = \"crash\"\nnode = -1\nat_ns = 1\n");
    assert!(negative.expect_err("negative id").to_string().contains("node id -1 is negative"));
    let unknown = toml::from_str::<FaultPlan>("[[faults]]\nkind = \"crash\"\nnode = \"leader\"\nat_ns = 1\n");
    assert!(unknown.expect_err("unknown role").to_string().contains("unknown role \"leader\""));
}

#[test]
fn a_probability_that_is_not_a_number_is_refused_naming_the_fault() {
    // Goal: `probability = nan` (valid TOML) is a configuration error, not a panic in the first
    // random draw of the simulator or of a node's fault shim. Method: resolve one-fault plans of
    // each kind with a probability, nan and then 0.5.
    for kind in ["loss", "duplicate", "reorder"] {
        let plan = |probability: &str| -> FaultPlan {
            let text = format!(
                "[[faults]]\nkind = \"{kind}\"\nprobability = {probability}\nat_ns = 0\nuntil_ns = 9\n{}",
                if kind == "reorder" { "delay_max_ns = 5\n" } else { "" }
            );
            toml::from_str(&text).expect("the plan parses")
        };
        let error = plan("nan").resolve(&topology()).expect_err(kind);
        assert_eq!(error, format!("fault plan, fault 1 ({kind}): the probability is not a number"));
        assert!(plan("0.5").resolve(&topology()).is_ok(), "{kind}");
    }
}
