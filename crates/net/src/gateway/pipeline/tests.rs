use super::*;
use crate::gateway::tests::connected;
use ordo_core::CommandResult;
use tokio::task::yield_now;

/// Plans `text` (RESP inline commands) on a fresh connection.
fn planned(text: &str) -> (Vec<Pending>, bool) {
    let (gateway, id) = connected();
    let mut input = Input::from(text.as_bytes());
    let mut pending = Vec::new();
    let close = plan_input(&mut input, &gateway, id, &mut pending);
    (pending, close)
}

/// What `answer` wrote; as a connection, a client that sends nothing more and never closes.
#[derive(Default)]
struct Written {
    bytes: Vec<u8>,
}

impl tokio::io::AsyncRead for Written {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Pending
    }
}

impl AsyncWrite for Written {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        bytes: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.get_mut().bytes.extend_from_slice(bytes);
        std::task::Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
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
    let (mut output, mut written) = (Output::default(), Written::default());
    let mut input = BytesMut::new();
    let results = [CommandResult::Ok, CommandResult::Value("1".into()), CommandResult::Integer(1)];
    let host = async {
        let mut seen = Vec::new();
        for result in results {
            let request: Request = host.recv().await.expect("a request");
            let_others_run().await;
            assert!(host.try_recv().is_err(), "a command was submitted before {:?} completed", request.command);
            seen.push(request.command.untimed().clone());
            request.reply.send(Outcome::Done(result)).expect("the gateway waits");
        }
        seen
    };
    let mut watched = Watched::default();
    let expiring = RefCell::default();
    let (seen, unknown) = run(async {
        tokio::join!(
            host,
            answer(&mut pending, &requests, &expiring, &mut watched, &mut output, &mut written, &mut input)
        )
    });
    assert!(!unknown.expect("written"));
    assert_eq!(seen, vec![Command::set("k", "1"), Command::get("k"), Command::IncrBy { key: "n".into(), delta: 1 }]);
    assert_eq!(written.bytes, b"+OK\r\n$1\r\n1\r\n+PONG\r\n:1\r\n");
    assert!(pending.is_empty());
}

#[test]
fn a_timeout_closes_the_connection_before_later_commands_run() {
    // Goal: after an unknown outcome the connection's later commands are not run (the timed-out
    // one might still take effect after them). Method: the fake host answers the first command
    // TIMEOUT; no second command may reach it, and the connection is to be closed.
    let (mut pending, _) = planned("SET k 1\r\nGET k\r\n");
    let (requests, mut host) = mpsc::channel(8);
    let (mut output, mut written) = (Output::default(), Written::default());
    let mut input = BytesMut::new();
    let host = async {
        let request: Request = host.recv().await.expect("a request");
        request.reply.send(Outcome::Timeout).expect("the gateway waits");
        let_others_run().await;
        host.try_recv().is_err()
    };
    let mut watched = Watched::default();
    let expiring = RefCell::default();
    let (nothing_more, unknown) = run(async {
        tokio::join!(
            host,
            answer(&mut pending, &requests, &expiring, &mut watched, &mut output, &mut written, &mut input)
        )
    });
    assert!(nothing_more, "a command after a timeout was submitted");
    assert!(unknown.expect("written"), "the connection closes");
    assert!(written.bytes.starts_with(b"-TIMEOUT"), "{}", String::from_utf8_lossy(&written.bytes));
    assert!(pending.is_empty());
}

#[test]
fn a_client_that_hangs_up_mid_command_lets_the_host_abandon_it() {
    // Goal: a command whose client closed the connection while it was in flight is given up:
    // the connection's task ends at once, without waiting for the outcome, and the host sees the
    // caller gone (`is_closed`), so it can abandon the operation. Method: an in-memory socket
    // whose client sends SET and PING and closes; the fake host never answers the SET.
    use tokio::io::AsyncWriteExt;
    let (mut pending, _) = planned("SET k 1\r\nPING\r\n");
    let (requests, mut host) = mpsc::channel(8);
    let (mut client, mut server) = tokio::io::duplex(1024);
    let (mut output, expiring, mut watched, mut input) =
        (Output::default(), RefCell::default(), Watched::default(), BytesMut::new());
    let (closed, request) = run(async {
        let hang_up = async {
            let request: Request = host.recv().await.expect("a request");
            client.shutdown().await.expect("close");
            drop(client);
            request
        };
        let answered = answer(&mut pending, &requests, &expiring, &mut watched, &mut output, &mut server, &mut input);
        let (closed, request) = tokio::join!(answered, hang_up);
        (closed, request)
    });
    assert!(closed.expect("no I/O error"), "the connection is to close");
    assert!(request.reply.is_closed(), "the host sees that nobody waits for the outcome");
    assert!(output.bytes.is_empty(), "nothing answered to a closed connection");
}

#[test]
fn a_busy_host_refuses_one_command_and_the_next_still_runs() {
    // Goal: a command the host's channel cannot take was never submitted, so it is answered
    // BUSY and the connection goes on. Method: a channel of one slot, already full.
    let (mut pending, _) = planned("SET k 1\r\nPING\r\n");
    let (requests, _host) = mpsc::channel(1);
    let (filler, _) = oneshot::channel();
    requests.try_send(Request { command: Command::get("x"), reply: filler }).expect("one slot");
    let (mut output, mut written) = (Output::default(), Written::default());
    let unknown = run(answer(
        &mut pending,
        &requests,
        &RefCell::default(),
        &mut Watched::default(),
        &mut output,
        &mut written,
        &mut BytesMut::new(),
    ))
    .expect("written");
    assert!(!unknown);
    assert!(written.bytes.starts_with(b"-BUSY") && written.bytes.ends_with(b"+PONG\r\n"));
}

#[test]
fn planning_stops_at_the_pipeline_limit() {
    // Goal: one connection holds at most `pipeline_depth_max` planned requests; the rest stay
    // unparsed in its input until those are answered.
    let (gateway, id) = connected();
    let depth = gateway.facts.pipeline_depth_max;
    let mut input = Input::from("PING\r\n".repeat(depth + 5).as_bytes());
    let mut pending = Vec::new();
    assert!(!plan_input(&mut input, &gateway, id, &mut pending));
    assert_eq!(pending.len(), depth);
    assert_eq!(input.bytes.len(), 5 * "PING\r\n".len());
    pending.clear();
    assert!(!plan_input(&mut input, &gateway, id, &mut pending));
    assert_eq!(pending.len(), 5);
    assert!(input.bytes.is_empty());
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
            Pending::Ready(_, version)
            | Pending::Replicate(_, _, version)
            | Pending::Watch(_, version)
            | Pending::Unwatch(_, version)
            | Pending::Exec(_, version) => *version,
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

/// Answers `text` against a fake host that gives each submitted command the next of `results`;
/// returns the commands it saw and what the connection wrote.
fn answered(text: &str, results: Vec<CommandResult>) -> (Vec<Command>, String) {
    let (mut pending, _) = planned(text);
    let (requests, mut host) = mpsc::channel(8);
    let (mut output, mut written) = (Output::default(), Written::default());
    let mut input = BytesMut::new();
    let mut watched = Watched::default();
    let host = async {
        let mut seen = Vec::new();
        for result in results {
            let request: Request = host.recv().await.expect("a request");
            seen.push(request.command.untimed().clone());
            request.reply.send(Outcome::Done(result)).expect("the gateway waits");
        }
        let_others_run().await;
        assert!(host.try_recv().is_err(), "more commands than results");
        seen
    };
    let expiring = RefCell::default();
    let (seen, unknown) = run(async {
        tokio::join!(
            host,
            answer(&mut pending, &requests, &expiring, &mut watched, &mut output, &mut written, &mut input)
        )
    });
    assert!(!unknown.expect("written"));
    (seen, String::from_utf8(written.bytes).expect("text"))
}

#[test]
fn a_transaction_is_one_replicated_command_with_the_versions_watch_read() {
    // Goal: WATCH reads the versions through the protocol; MULTI queues (QUEUED), a gateway
    // command included; EXEC submits one Transaction carrying the watched versions and answers
    // each queued command in order. Method: one pipelined read, a fake host.
    let text = "WATCH k\r\nMULTI\r\nINCR k\r\nPING\r\nGET k\r\nEXEC\r\nGET k\r\n";
    let results = vec![
        CommandResult::Versions(vec![3]),
        CommandResult::Results(vec![CommandResult::Integer(4), CommandResult::Value("4".into())]),
        CommandResult::Value("4".into()),
    ];
    let (seen, written) = answered(text, results);
    let transaction = Command::Transaction {
        watched: vec![("k".into(), 3)],
        commands: vec![Command::IncrBy { key: "k".into(), delta: 1 }, Command::get("k")],
    };
    assert_eq!(seen, vec![Command::Versions { keys: vec!["k".into()] }, transaction, Command::get("k")]);
    assert_eq!(written, "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n:4\r\n+PONG\r\n$1\r\n4\r\n$1\r\n4\r\n");
}

#[test]
fn a_moved_watched_key_aborts_and_exec_forgets_the_watch() {
    // Goal: the replicas' abort (Nil) is a null array; the next transaction carries no watch.
    let text = "WATCH k\r\nMULTI\r\nSET k 1\r\nEXEC\r\nMULTI\r\nSET k 2\r\nEXEC\r\n";
    let results =
        vec![CommandResult::Versions(vec![0]), CommandResult::Nil, CommandResult::Results(vec![CommandResult::Ok])];
    let (seen, written) = answered(text, results);
    assert!(matches!(&seen[2], Command::Transaction { watched, .. } if watched.is_empty()));
    assert_eq!(written, "+OK\r\n+OK\r\n+QUEUED\r\n*-1\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n");
}

#[test]
fn queuing_errors_abort_and_discard_runs_nothing() {
    // Goal: an unknown command or a wrong arity while queuing makes EXEC answer EXECABORT and
    // run nothing; an argument error is EXEC's element for that command; DISCARD drops the
    // queue and the watch; EXEC or DISCARD without MULTI and a nested MULTI are errors.
    let (seen, written) = answered("MULTI\r\nNOPE\r\nSET k 1\r\nEXEC\r\n", Vec::new());
    assert!(seen.is_empty());
    assert!(written.starts_with("+OK\r\n-ERR unknown command 'NOPE'\r\n+QUEUED\r\n-EXECABORT"), "{written}");
    let (seen, written) = answered("MULTI\r\nGET\r\nEXEC\r\n", Vec::new());
    assert!(seen.is_empty() && written.contains("-ERR wrong number") && written.contains("-EXECABORT"), "{written}");
    let (seen, written) = answered(
        "WATCH k\r\nMULTI\r\nSET k 1\r\nDISCARD\r\nEXEC\r\nDISCARD\r\nMULTI\r\nMULTI\r\nEXEC\r\n",
        vec![CommandResult::Versions(vec![1])],
    );
    assert_eq!(seen.len(), 1, "only WATCH's read: DISCARD runs nothing, an empty EXEC submits nothing");
    assert_eq!(
        written,
        "+OK\r\n+OK\r\n+QUEUED\r\n+OK\r\n-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n+OK\r\n\
         -ERR MULTI calls can not be nested\r\n*0\r\n"
    );
    let (seen, written) = answered(
        "MULTI\r\nSET k v NOPE\r\nINCR k\r\nEXEC\r\n",
        vec![CommandResult::Results(vec![CommandResult::Error("ERR value is not an integer or out of range".into())])],
    );
    assert_eq!(seen.len(), 1);
    assert!(
        written.ends_with("*2\r\n-ERR syntax error\r\n-ERR value is not an integer or out of range\r\n"),
        "{written}"
    );
}

#[test]
fn a_failed_watch_makes_exec_abort() {
    // Goal: a WATCH whose read failed (here, Tempo refusing keys of several shards) is an error
    // reply, and the EXEC after it aborts rather than running unwatched.
    let refused = CommandResult::Error("CROSSSLOT Keys in request don't hash to the same slot".into());
    let (seen, written) = answered("WATCH a b\r\nMULTI\r\nSET a 1\r\nEXEC\r\n", vec![refused]);
    assert_eq!(seen.len(), 1, "the transaction is not submitted");
    assert_eq!(written, "-CROSSSLOT Keys in request don't hash to the same slot\r\n+OK\r\n+QUEUED\r\n*-1\r\n");
}

/// A gateway with one connection and the given limits (no idle timeout unless set).
fn limited(depth: usize, reply_bytes: usize, idle: std::time::Duration) -> (Gateway, u64) {
    let facts = crate::gateway::session::ServerFacts {
        pipeline_depth_max: depth,
        reply_bytes_max: reply_bytes,
        idle_timeout: idle,
        ..crate::gateway::tests::facts()
    };
    let gateway = Gateway::new(facts);
    let id = gateway.open("127.0.0.1:50000".parse().expect("peer"), "127.0.0.1:7379".parse().expect("local"), 9);
    (gateway, id)
}

fn run_timed<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime").block_on(future)
}

#[test]
fn a_client_that_does_not_read_its_replies_stops_being_read_until_it_does() {
    // Goal: backpressure. A client pipelines 200 ECHOs of 1 KiB and reads nothing: the gateway,
    // with a depth of 4 and a reply budget of 1 KiB, fills the socket with replies and then stops
    // reading, so the client's writes stall well before all its requests are taken. Once the
    // client reads, everything is answered, in order. Method: an in-memory socket of 4 KiB each
    // way; count the bytes the client managed to write before a write stalled for 200 ms.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (gateway, id) = limited(4, 1024, std::time::Duration::ZERO);
    let (client, mut server) = tokio::io::duplex(4096);
    let (mut from_gateway, mut to_gateway) = tokio::io::split(client);
    let value = "v".repeat(1024);
    let requests_text = format!("ECHO {value}\r\n").repeat(200);
    let (requests, _host) = mpsc::channel(1);
    let (taken, replies) = run_timed(async {
        let serve = connection(&mut server, requests, &gateway, id);
        let client = async {
            let mut taken = 0;
            while taken < requests_text.len() {
                let write = to_gateway.write(&requests_text.as_bytes()[taken..]);
                match tokio::time::timeout(std::time::Duration::from_millis(200), write).await {
                    Ok(written) => taken += written.expect("write"),
                    Err(_) => break,
                }
            }
            let stalled_at = taken;
            let reading = async {
                let mut replies = Vec::new();
                let expected = format!("${}\r\n{value}\r\n", value.len()).len() * 200;
                while replies.len() < expected {
                    let mut chunk = [0u8; 8192];
                    let n = from_gateway.read(&mut chunk).await.expect("read");
                    assert!(n > 0, "the gateway closed early");
                    replies.extend_from_slice(&chunk[..n]);
                }
                replies
            };
            let writing = async {
                to_gateway.write_all(&requests_text.as_bytes()[taken..]).await.expect("the rest is taken");
                to_gateway.shutdown().await.expect("close");
            };
            let (replies, ()) = tokio::join!(reading, writing);
            (stalled_at, replies)
        };
        let (served, result) = tokio::join!(serve, client);
        served.expect("the connection ends cleanly");
        result
    });
    assert!(
        taken < requests_text.len() / 4,
        "the gateway kept reading: {taken} of {} bytes taken",
        requests_text.len()
    );
    assert_eq!(replies, format!("${}\r\n{value}\r\n", value.len()).repeat(200).into_bytes());
}

#[test]
fn an_idle_connection_is_closed_after_the_timeout_and_a_busy_one_is_not() {
    // Goal: the idle timeout closes a connection that sends nothing, without a reply; one that
    // keeps sending within the timeout stays open. Method: a 150 ms timeout on an in-memory
    // socket; the client sends a PING every 50 ms five times, then goes quiet.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (gateway, id) = limited(4, 1024, std::time::Duration::from_millis(150));
    let (mut client, mut server) = tokio::io::duplex(4096);
    let (requests, _host) = mpsc::channel(1);
    let (served, pongs, tail) = run_timed(async {
        // As the accept loop does, the socket is dropped when the connection ends.
        let serve = async {
            let served = connection(&mut server, requests, &gateway, id).await;
            drop(server);
            served
        };
        let client = async {
            let mut pongs = 0;
            for _ in 0..5 {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                client.write_all(b"PING\r\n").await.expect("write");
                let mut reply = [0u8; 7];
                client.read_exact(&mut reply).await.expect("PONG");
                pongs += usize::from(&reply == b"+PONG\r\n");
            }
            let mut tail = Vec::new();
            let read = client.read_to_end(&mut tail);
            let closed = tokio::time::timeout(std::time::Duration::from_secs(5), read).await;
            assert!(closed.is_ok(), "the idle connection was not closed");
            (pongs, tail)
        };
        let (served, (pongs, tail)) = tokio::join!(serve, client);
        (served, pongs, tail)
    });
    served.expect("a clean close");
    assert_eq!((pongs, tail.len()), (5, 0), "every PING answered; nothing sent on the idle close");
}

#[test]
fn at_the_cap_the_longest_idle_connection_is_evicted() {
    // Goal: eviction picks the connection that has waited longest for a request, and only a
    // waiting one; the evicted connection's task ends. Method: two connections on in-memory
    // sockets, the first idle first; a third waits with part of a request read, so it is busy.
    use tokio::io::AsyncWriteExt;
    let (gateway, first) = limited(4, 1024, std::time::Duration::ZERO);
    let peer = "127.0.0.1:50001".parse().expect("peer");
    let (second, third) = (gateway.open(peer, peer, 10), gateway.open(peer, peer, 11));
    let sockets: Vec<_> = (0..3).map(|_| tokio::io::duplex(1024)).collect();
    let [(_c1, mut s1), (_c2, mut s2), (mut c3, mut s3)] = <[_; 3]>::try_from(sockets).expect("three");
    let (requests, _host) = mpsc::channel(1);
    run_timed(async {
        let one = connection(&mut s1, requests.clone(), &gateway, first);
        let others = async {
            tokio::select! {
                biased;
                _ = connection(&mut s2, requests.clone(), &gateway, second) => panic!("the second was closed"),
                _ = connection(&mut s3, requests.clone(), &gateway, third) => panic!("the third was closed"),
                () = async {
                    c3.write_all(b"*2\r\n$3\r\nGET").await.expect("part of a request");
                    let_others_run().await;
                    assert_eq!(gateway.idle.borrow_mut().evict_idlest(), Some(first));
                    std::future::pending::<()>().await;
                } => {}
            }
        };
        // Biased: polled in this order, the first connection starts waiting first.
        tokio::select! {
            biased;
            ended = one => ended.expect("the evicted connection ends cleanly"),
            () = others => {}
        }
        assert_eq!(gateway.idle.borrow().len(), 1, "only the second still waits idle");
        assert_eq!(gateway.idle.borrow_mut().evict_idlest(), Some(second));
        assert_eq!(gateway.idle.borrow_mut().evict_idlest(), None, "the third is mid-request");
    });
}
