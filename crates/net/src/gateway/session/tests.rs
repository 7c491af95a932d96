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

/// A gateway whose cluster file sets `requirepass = "s3cret"`, with one connection open.
fn guarded() -> (Gateway, u64) {
    let facts = ServerFacts { requirepass: Some(crate::config::Password("s3cret".into())), ..facts() };
    let gateway = Gateway::new(facts);
    let id = gateway.open("127.0.0.1:50000".parse().expect("peer"), "127.0.0.1:7379".parse().expect("local"), 9);
    (gateway, id)
}

#[test]
fn requirepass_refuses_everything_but_auth_hello_and_quit_until_auth() {
    // Goal: with `requirepass`, redis-server 7.0.15's answers (checked with redis-cli against
    // `redis-server --requirepass`): NOAUTH for any known command, including gateway-answered
    // and replicated ones; unknown commands and wrong arities keep their own errors; HELLO
    // without AUTH is NOAUTH, a wrong password is WRONGPASS, and QUIT works.
    let (gateway, id) = guarded();
    for text in ["PING", "GET k", "SET k v", "CLIENT ID", "MULTI", "SELECT 0", "ECHO a", "COMMAND COUNT"] {
        assert_eq!(
            gateway.plan(id, &words(text)),
            Action::Reply(Reply::Error(crate::gateway::auth::NOAUTH.into())),
            "{text}"
        );
    }
    assert!(error_text(answer(&gateway, id, "NOSUCH")).starts_with("ERR unknown command"));
    assert_eq!(error_text(answer(&gateway, id, "GET")), "ERR wrong number of arguments for 'get' command");
    assert!(error_text(answer(&gateway, id, "HELLO 3")).starts_with("NOAUTH HELLO must be called"));
    assert_eq!(error_text(answer(&gateway, id, "HELLO 4")), "NOPROTO unsupported protocol version");
    let wrongpass = "WRONGPASS invalid username-password pair or user is disabled.";
    for text in ["AUTH secret", "AUTH default secret", "AUTH bob s3cret", "HELLO 3 AUTH default s3cre", "AUTH s3cret2"]
    {
        assert_eq!(error_text(answer(&gateway, id, text)), wrongpass, "{text}");
    }
    assert_eq!(gateway.version(id), RespVersion::Resp2, "a refused HELLO changes nothing");
    assert_eq!(gateway.plan(id, &words("QUIT")), Action::Close(Reply::Simple("OK")));
    assert!(matches!(gateway.plan(id, &words("PING")), Action::Reply(Reply::Error(_))), "still locked");
}

#[test]
fn the_right_password_unlocks_the_connection_in_each_form() {
    // Goal: `AUTH pass`, `AUTH default pass` and `HELLO 3 AUTH default pass` each unlock the
    // connection; a later wrong AUTH does not lock it again (Redis keeps it authenticated); other
    // connections stay locked.
    for unlock in ["AUTH s3cret", "AUTH default s3cret", "HELLO 3 AUTH default s3cret"] {
        let (gateway, id) = guarded();
        assert!(!matches!(answer(&gateway, id, unlock), Reply::Error(_)), "{unlock}");
        assert_eq!(answer(&gateway, id, "PING"), Reply::Simple("PONG"), "{unlock}");
        assert!(matches!(gateway.plan(id, &words("GET k")), Action::Replicate(..)), "{unlock}");
        assert!(error_text(answer(&gateway, id, "AUTH wrong")).starts_with("WRONGPASS"));
        assert_eq!(answer(&gateway, id, "PING"), Reply::Simple("PONG"), "a wrong AUTH after a right one");
        let other =
            gateway.open("127.0.0.1:50001".parse().expect("peer"), "127.0.0.1:7379".parse().expect("local"), 10);
        assert!(error_text(answer(&gateway, other, "PING")).starts_with("NOAUTH"), "another connection");
    }
    let (gateway, id) = guarded();
    answer(&gateway, id, "HELLO 3 AUTH default s3cret");
    assert_eq!(gateway.version(id), RespVersion::Resp3, "HELLO AUTH also switches the protocol");
}

#[test]
fn passwords_compare_whole() {
    // Goal: the constant-time comparison is still a comparison: prefixes, extensions, an empty
    // password and a password repeated (the loop wraps over the expected one) are all wrong.
    use crate::gateway::auth::same_password;
    assert!(same_password(b"s3cret", b"s3cret"));
    for given in [&b""[..], b"s3cre", b"s3cret!", b"s3crets3cret", b"S3cret"] {
        assert!(!same_password(given, b"s3cret"), "{:?}", String::from_utf8_lossy(given));
    }
    assert!(same_password(b"", b""));
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
