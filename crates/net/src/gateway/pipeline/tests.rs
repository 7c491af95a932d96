use super::*;
use crate::gateway::tests::connected;
use ordo_core::CommandResult;
use tokio::task::yield_now;

/// Plans `text` (RESP inline commands) on a fresh connection.
fn planned(text: &str) -> (Vec<Pending>, bool) {
    let (gateway, id) = connected();
    let mut input = BytesMut::from(text.as_bytes());
    let mut pending = Vec::new();
    let close = plan_input(&mut input, &gateway, id, &mut pending);
    (pending, close)
}

fn run<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(future)
}

/// Gives the other side of a `join!` many chances to run.
async fn let_others_run() {
    for _ in 0..100 {
        yield_now().await;
    }
}

#[test]
fn a_command_is_submitted_only_after_the_previous_one_completed() {
    // Goal: a pipeline's replicated commands reach the host one at a time, in order, and the
    // replies (the gateway's own among them) come back in request order. Method: a fake host that
    // answers each command, checking that no second command arrives while one is outstanding.
    let (mut pending, close) = planned("SET k 1\r\nGET k\r\nPING\r\nINCR n\r\n");
    assert!(!close);
    let (requests, mut host) = mpsc::channel(8);
    let (mut output, mut written) = (Vec::new(), Vec::new());
    let results = [CommandResult::Ok, CommandResult::Value("1".into()), CommandResult::Integer(1)];
    let host = async {
        let mut seen = Vec::new();
        for result in results {
            let request: Request = host.recv().await.expect("a request");
            let_others_run().await;
            assert!(host.try_recv().is_err(), "a command was submitted before {:?} completed", request.command);
            seen.push(request.command);
            request.reply.send(Outcome::Done(result)).expect("the gateway waits");
        }
        seen
    };
    let (seen, unknown) = run(async { tokio::join!(host, answer(&mut pending, &requests, &mut output, &mut written)) });
    assert!(!unknown.expect("written"));
    assert_eq!(seen, vec![Command::set("k", "1"), Command::get("k"), Command::IncrBy { key: "n".into(), delta: 1 }]);
    assert_eq!(written, b"+OK\r\n$1\r\n1\r\n+PONG\r\n:1\r\n");
    assert!(pending.is_empty());
}

#[test]
fn a_timeout_closes_the_connection_before_later_commands_run() {
    // Goal: after an unknown outcome the connection's later commands are not run (the timed-out
    // one might still take effect after them). Method: the fake host answers the first command
    // TIMEOUT; no second command may reach it, and the connection is to be closed.
    let (mut pending, _) = planned("SET k 1\r\nGET k\r\n");
    let (requests, mut host) = mpsc::channel(8);
    let (mut output, mut written) = (Vec::new(), Vec::new());
    let host = async {
        let request: Request = host.recv().await.expect("a request");
        request.reply.send(Outcome::Timeout).expect("the gateway waits");
        let_others_run().await;
        host.try_recv().is_err()
    };
    let (nothing_more, unknown) =
        run(async { tokio::join!(host, answer(&mut pending, &requests, &mut output, &mut written)) });
    assert!(nothing_more, "a command after a timeout was submitted");
    assert!(unknown.expect("written"), "the connection closes");
    assert!(written.starts_with(b"-TIMEOUT"), "{}", String::from_utf8_lossy(&written));
    assert!(pending.is_empty());
}

#[test]
fn a_busy_host_refuses_one_command_and_the_next_still_runs() {
    // Goal: a command the host's channel cannot take was never submitted, so it is answered
    // BUSY and the connection goes on. Method: a channel of one slot, already full.
    let (mut pending, _) = planned("SET k 1\r\nPING\r\n");
    let (requests, _host) = mpsc::channel(1);
    let (filler, _) = oneshot::channel();
    requests.try_send(Request { command: Command::get("x"), reply: filler }).expect("one slot");
    let (mut output, mut written) = (Vec::new(), Vec::new());
    let unknown = run(answer(&mut pending, &requests, &mut output, &mut written)).expect("written");
    assert!(!unknown);
    assert!(written.starts_with(b"-BUSY") && written.ends_with(b"+PONG\r\n"));
}

#[test]
fn planning_stops_at_the_pipeline_limit() {
    // Goal: one connection holds at most PIPELINE_MAX planned requests; the rest stay unparsed
    // in its input until those are answered.
    let (gateway, id) = connected();
    let mut input = BytesMut::from("PING\r\n".repeat(PIPELINE_MAX + 5).as_bytes());
    let mut pending = Vec::new();
    assert!(!plan_input(&mut input, &gateway, id, &mut pending));
    assert_eq!(pending.len(), PIPELINE_MAX);
    assert_eq!(input.len(), 5 * "PING\r\n".len());
    pending.clear();
    assert!(!plan_input(&mut input, &gateway, id, &mut pending));
    assert_eq!(pending.len(), 5);
    assert!(input.is_empty());
}

#[test]
fn a_pipelined_hello_changes_only_the_replies_after_it() {
    // Goal: each reply is encoded in the version its connection spoke when the request was
    // read. Method: plan one read holding GET, HELLO 3, GET, PING, and look at the versions
    // the pending replies carry.
    let (pending, close) = planned("GET a\r\nHELLO 3\r\nGET b\r\nPING\r\n");
    assert!(!close, "nothing closes");
    let versions: Vec<RespVersion> = pending
        .iter()
        .map(|p| match p {
            Pending::Ready(_, version) | Pending::Replicate(_, _, version) => *version,
        })
        .collect();
    let (two, three) = (RespVersion::Resp2, RespVersion::Resp3);
    assert_eq!(versions, vec![two, three, three, three]);
    assert!(matches!(&pending[1], Pending::Ready(Reply::Map(_), _)));
    assert!(matches!(&pending[2], Pending::Replicate(..)));
}

#[test]
fn quit_and_malformed_input_end_planning() {
    let (pending, close) = planned("PING\r\nQUIT\r\nGET k\r\n");
    assert!(close);
    assert_eq!(pending.len(), 2, "nothing after QUIT is planned");
    let (pending, close) = planned("PING\r\n*x\r\n");
    assert!(close);
    assert!(matches!(&pending[1], Pending::Ready(Reply::Error(e), _) if e.contains("Protocol error")));
}
