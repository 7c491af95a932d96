//! HELLO, AUTH, CLIENT, CONFIG and INFO replies, compared with what redis-server 7.0.15 (7.2 for
//! CLIENT SETINFO) answers to the same requests.

use super::*;
use crate::gateway::tests::{connected, facts, words};
use crate::gateway::{Action, Gateway};

fn answer(gateway: &Gateway, id: u64, text: &str) -> Reply {
    match gateway.plan(id, &words(text)) {
        Action::Reply(reply) => reply,
        other => panic!("{text}: expected a reply from the gateway, got {other:?}"),
    }
}

fn encoded(reply: &Reply, version: RespVersion) -> String {
    let mut out = Vec::new();
    reply.encode(version, &mut out);
    String::from_utf8(out).expect("text")
}

fn error_text(reply: Reply) -> String {
    match reply {
        Reply::Error(text) => text,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn hello_switches_the_protocol_and_answers_redis_map() {
    // Goal: HELLO 3 answers Redis' seven fields as a RESP3 map and switches the connection to
    // RESP3; HELLO 2 switches back and answers a flat array. Method: plan, then encode in the
    // version the connection has afterwards, as the connection loop does.
    let (gateway, id) = connected();
    assert_eq!(gateway.version(id), RespVersion::Resp2);
    let hello = answer(&gateway, id, "HELLO 3");
    assert_eq!(gateway.version(id), RespVersion::Resp3);
    let expected = format!(
        "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n{REDIS_VERSION}\r\n$5\r\nproto\r\n:3\r\n\
         $2\r\nid\r\n:{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
    );
    assert_eq!(encoded(&hello, gateway.version(id)), expected);
    let hello = answer(&gateway, id, "HELLO 2");
    assert_eq!(gateway.version(id), RespVersion::Resp2);
    assert!(encoded(&hello, RespVersion::Resp2).starts_with("*14\r\n$6\r\nserver\r\n"));
    assert!(encoded(&answer(&gateway, id, "HELLO"), RespVersion::Resp2).contains("proto\r\n:2\r\n"));
}

#[test]
fn hello_checks_its_arguments_like_redis() {
    // Goal: the errors Redis gives, and no protocol change when HELLO fails.
    let (gateway, id) = connected();
    assert_eq!(error_text(answer(&gateway, id, "HELLO 4")), "NOPROTO unsupported protocol version");
    assert_eq!(error_text(answer(&gateway, id, "HELLO 1")), "NOPROTO unsupported protocol version");
    assert_eq!(
        error_text(answer(&gateway, id, "HELLO three")),
        "ERR Protocol version is not an integer or out of range"
    );
    assert_eq!(error_text(answer(&gateway, id, "HELLO 3 AUTH default")), "ERR Syntax error in HELLO option 'AUTH'");
    assert_eq!(error_text(answer(&gateway, id, "HELLO 3 BAR")), "ERR Syntax error in HELLO option 'BAR'");
    assert!(error_text(answer(&gateway, id, "HELLO 3 AUTH bob secret")).starts_with("WRONGPASS"));
    assert_eq!(gateway.version(id), RespVersion::Resp2, "a failed HELLO changes nothing");
    let hello = answer(&gateway, id, "HELLO 3 AUTH default anything SETNAME app-1");
    assert!(matches!(hello, Reply::Map(_)));
    assert_eq!(answer(&gateway, id, "CLIENT GETNAME"), Reply::text("app-1"));
}

#[test]
fn auth_behaves_as_redis_without_a_password() {
    let (gateway, id) = connected();
    assert!(error_text(answer(&gateway, id, "AUTH secret")).contains("without any password configured"));
    assert_eq!(answer(&gateway, id, "AUTH default secret"), Reply::Simple("OK"));
    assert!(error_text(answer(&gateway, id, "AUTH bob secret")).starts_with("WRONGPASS"));
    assert_eq!(error_text(answer(&gateway, id, "AUTH a b c")), "ERR syntax error");
}

#[test]
fn client_subcommands_answer_truthfully() {
    // Goal: CLIENT ID, GETNAME, SETNAME, SETINFO, INFO and LIST describe the connection; an
    // unknown subcommand is an error, not OK.
    let (gateway, id) = connected();
    assert_eq!(answer(&gateway, id, "CLIENT ID"), Reply::Integer(id as i64));
    assert_eq!(answer(&gateway, id, "CLIENT GETNAME"), Reply::Bulk(None));
    assert_eq!(answer(&gateway, id, "CLIENT SETNAME worker"), Reply::Simple("OK"));
    assert_eq!(answer(&gateway, id, "CLIENT GETNAME"), Reply::text("worker"));
    assert_eq!(answer(&gateway, id, "CLIENT SETINFO LIB-NAME redis-py"), Reply::Simple("OK"));
    assert_eq!(answer(&gateway, id, "CLIENT SETINFO lib-ver 8.1.0"), Reply::Simple("OK"));
    assert!(error_text(answer(&gateway, id, "CLIENT SETINFO colour red")).contains("Unrecognized option 'colour'"));
    let Reply::Verbatim(line) = answer(&gateway, id, "CLIENT INFO") else { panic!("CLIENT INFO is text") };
    assert!(
        line.starts_with(&format!("id={id} addr=127.0.0.1:50000 laddr=127.0.0.1:7379 fd=9 name=worker ")),
        "{line}"
    );
    assert!(
        line.ends_with(" cmd=client|info user=default redir=-1 resp=2 lib-name=redis-py lib-ver=8.1.0\n"),
        "{line}"
    );
    let other = gateway.open("127.0.0.1:50001".parse().expect("peer"), facts().address, 10);
    let Reply::Verbatim(list) = answer(&gateway, id, "CLIENT LIST") else { panic!("CLIENT LIST is text") };
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.lines().nth(1).is_some_and(|l| l.starts_with(&format!("id={other} "))));
    let Reply::Verbatim(list) = answer(&gateway, id, &format!("CLIENT LIST ID {other}")) else { panic!("text") };
    assert_eq!(list.lines().count(), 1);
    assert_eq!(error_text(answer(&gateway, id, "CLIENT LIST ID x")), "ERR Invalid client ID");
    assert_eq!(answer(&gateway, id, "CLIENT LIST TYPE pubsub"), Reply::Verbatim(String::new()));
    assert!(error_text(answer(&gateway, id, "CLIENT SETNAME a\u{20}b c")).contains("wrong number"));
    assert!(error_text(answer(&gateway, id, "CLIENT SETNAME a\nb")).contains("cannot contain spaces"));
    assert_eq!(error_text(answer(&gateway, id, "CLIENT KILL x")), "ERR unknown subcommand 'KILL'. Try CLIENT HELP.");
    gateway.close(other);
    let Reply::Verbatim(list) = answer(&gateway, id, "CLIENT LIST") else { panic!("text") };
    assert_eq!(list.lines().count(), 1, "a closed connection is gone");
}

#[test]
fn config_get_lists_what_exists_and_set_is_refused() {
    let (gateway, id) = connected();
    assert_eq!(
        answer(&gateway, id, "CONFIG GET maxclients"),
        Reply::Map(vec![(Reply::text("maxclients"), Reply::text("1024"))])
    );
    let Reply::Map(pairs) = answer(&gateway, id, "CONFIG GET * port") else { panic!("a map") };
    assert_eq!(pairs.len(), 6, "a name matched by two patterns is listed once");
    assert_eq!(answer(&gateway, id, "CONFIG GET save"), Reply::Map(Vec::new()));
    assert_eq!(
        encoded(&answer(&gateway, id, "CONFIG GET p?rt"), RespVersion::Resp3),
        "%1\r\n$4\r\nport\r\n$4\r\n7379\r\n"
    );
    assert!(error_text(answer(&gateway, id, "CONFIG SET maxmemory 1mb")).contains("Unknown option"));
    assert!(error_text(answer(&gateway, id, "CONFIG SET maxclients 10")).contains("immutable"));
    assert!(error_text(answer(&gateway, id, "CONFIG GET")).contains("'config|get'"));
    assert!(error_text(answer(&gateway, id, "CONFIG FROB")).contains("unknown subcommand 'FROB'"));
}

#[test]
fn info_has_the_ordo_section() {
    let (gateway, id) = connected();
    let Reply::Verbatim(text) = answer(&gateway, id, "INFO") else { panic!("INFO is text") };
    for line in
        ["# Server\r\n", "redis_version:7.2.0\r\n", "# ordo\r\n", "ordo_protocol:nezha\r\n", "ordo_replicas:3\r\n"]
    {
        assert!(text.contains(line), "INFO lacks {line:?}:\n{text}");
    }
    assert!(text.contains("connected_clients:1\r\n"));
    let Reply::Verbatim(text) = answer(&gateway, id, "INFO ordo") else { panic!("text") };
    assert!(text.starts_with("# ordo\r\n") && !text.contains("# Server"));
}

#[test]
fn info_counts_commands_and_connections_until_config_resetstat() {
    // Goal: INFO's Stats count what the gateway served (redis-py's test_config_resetstat reads
    // total_commands_processed), and CONFIG RESETSTAT starts them again.
    let (gateway, id) = connected();
    answer(&gateway, id, "PING");
    let Reply::Verbatim(text) = answer(&gateway, id, "INFO stats") else { panic!("INFO is text") };
    assert!(text.contains("total_commands_processed:2\r\n"), "PING and INFO itself:\n{text}");
    assert!(text.contains("total_connections_received:1\r\n"), "{text}");
    assert_eq!(answer(&gateway, id, "CONFIG RESETSTAT"), Reply::Simple("OK"));
    let Reply::Verbatim(text) = answer(&gateway, id, "INFO stats") else { panic!("INFO is text") };
    assert!(text.contains("total_commands_processed:1\r\n"), "only INFO since the reset:\n{text}");
    assert!(text.contains("total_connections_received:0\r\n"), "{text}");
}
