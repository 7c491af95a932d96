//! The client: one request outstanding, sent to a proxy (retried through the next proxy on a
//! timeout), or, without proxies, multicast by the client itself as DOM sender with its own
//! quorum check (the paper's Non-Proxy mode, §5.1).

use super::messages::Message;
use super::proxy::{Batching, Sender, commit_result};
use super::{Flaw, Nezha, Timer};
use crate::client_pipeline::retry_wait;
use ordo_core::{
    ClientId, ClockReading, Command, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId, Role, Submission,
};

/// The request the client waits on.
struct Outstanding {
    op: u64,
    id: RequestId,
    command: Command,
    /// Times sent: each resend doubles the wait before the next (`client_pipeline::retry_after`).
    sends: u32,
}

/// A Nezha client.
pub struct Client {
    me: NodeId,
    id: ClientId,
    proxies: Vec<NodeId>,
    /// Present when the client is its own DOM sender (no proxies).
    sender: Option<Sender>,
    retry_ns: u64,
    heartbeat_ns: u64,
    /// Which proxy gets the next attempt.
    proxy_turn: usize,
    next_number: u64,
    outstanding: Option<Outstanding>,
    stats: NodeStats,
}

/// Which proxy a client tries first: one on its own machine if there is any (a sidecar, §3's
/// co-located deployment), else any; among those, one picked by the client's id so that clients
/// spread over them. Retries go on to the next proxies in turn.
fn first_proxy(context: &NodeContext<Nezha>, proxies: &[NodeId]) -> usize {
    let local: Vec<usize> =
        (0..proxies.len()).filter(|&i| context.topology.same_machine(context.id, proxies[i])).collect();
    let spread = context.id.index();
    if local.is_empty() { spread % proxies.len().max(1) } else { local[spread % local.len()] }
}

impl Client {
    /// A client; it uses the cluster's proxies unless the configuration turns them off.
    pub(crate) fn new(context: NodeContext<Nezha>, flaw: Flaw) -> Self {
        let proxies: Vec<NodeId> =
            if context.config.proxies == 0 { Vec::new() } else { context.topology.with_role(Role::Proxy).collect() };
        let sender = proxies.is_empty().then(|| Sender::new(&context, flaw, Batching::NONE));
        let proxy_turn = first_proxy(&context, &proxies);
        Client {
            me: context.id,
            id: context.client_id(),
            proxies,
            sender,
            retry_ns: context.config.client_retry_ns,
            heartbeat_ns: context.config.heartbeat_ns,
            proxy_turn,
            next_number: 1,
            outstanding: None,
            stats: NodeStats::default(),
        }
    }

    fn send(&mut self, now: ClockReading, out: &mut Outbox<Nezha>) {
        let outstanding = self.outstanding.as_mut().expect("a request is outstanding");
        outstanding.sends = outstanding.sends.saturating_add(1);
        let (id, command, sends) = (outstanding.id, outstanding.command.clone(), outstanding.sends);
        let wait = retry_wait(self.retry_ns, sends, command.encoded_len());
        match &mut self.sender {
            Some(sender) => sender.send(now, id, command, self.me, &mut self.stats, out),
            None => {
                let proxy = self.proxies[self.proxy_turn % self.proxies.len()];
                out.send(proxy, Message::ClientRequest { id, command });
            }
        }
        out.set_timer(Timer::ClientRetry, wait);
    }

    fn complete(&mut self, id: RequestId, result: ordo_core::CommandResult, out: &mut Outbox<Nezha>) {
        let Some(outstanding) = &self.outstanding else {
            self.stats.drop_input("reply while nothing is outstanding");
            return;
        };
        if outstanding.id != id {
            self.stats.drop_input("reply for a request no longer outstanding");
            return;
        }
        out.complete(outstanding.op, result);
        out.cancel_timer(Timer::ClientRetry);
        self.outstanding = None;
    }
}

impl Node<Nezha> for Client {
    fn on_start(&mut self, _now: ClockReading, out: &mut Outbox<Nezha>) {
        if self.sender.is_some() {
            out.set_timer(Timer::ProxyTick, self.heartbeat_ns);
        }
    }

    fn on_submit(&mut self, now: ClockReading, submission: Submission, out: &mut Outbox<Nezha>) {
        // A new submission abandons the previous one: its late reply will not match the new id.
        if let (Some(sender), Some(previous)) = (&mut self.sender, &self.outstanding) {
            sender.forget(&previous.id);
        }
        let id = RequestId { client: self.id, number: self.next_number };
        self.next_number += 1;
        self.outstanding = Some(Outstanding { op: submission.op, id, command: submission.command, sends: 0 });
        self.send(now, out);
    }

    fn on_message(&mut self, _now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<Nezha>) {
        match message {
            Message::ClientReply { id, result } => {
                if self.sender.is_some() || !self.proxies.contains(&from) {
                    self.stats.drop_input("client reply from a non-proxy");
                    return;
                }
                self.complete(id, result, out);
            }
            Message::FastReplies { view, replies, owd_ns, .. } => {
                let Some(sender) = &mut self.sender else {
                    self.stats.drop_input("fast-reply to a client that uses proxies");
                    return;
                };
                let mut committed = None;
                for reply in replies {
                    let id = reply.id;
                    if let Some((_, commit)) = sender.on_fast_reply(from, view, reply, owd_ns, &mut self.stats) {
                        committed = Some((id, commit));
                    }
                }
                if let Some((id, commit)) = committed {
                    self.complete(id, commit_result(commit), out);
                }
            }
            Message::SlowReply { view, ids, owd_ns, .. } => {
                let Some(sender) = &mut self.sender else {
                    self.stats.drop_input("slow-reply to a client that uses proxies");
                    return;
                };
                let mut committed = None;
                for id in ids {
                    if let Some((_, commit)) = sender.on_slow_reply(from, view, id, owd_ns, &mut self.stats) {
                        committed = Some((id, commit));
                    }
                }
                if let Some((id, commit)) = committed {
                    self.complete(id, commit_result(commit), out);
                }
            }
            Message::Commits { view, commits, owd_ns } => {
                let Some(sender) = &mut self.sender else {
                    self.stats.drop_input("commit to a client that uses proxies");
                    return;
                };
                let mut committed = None;
                for (id, result, fast) in commits {
                    if let Some((_, commit)) = sender.on_commit(from, view, id, result, fast, owd_ns, &mut self.stats) {
                        committed = Some((id, commit));
                    }
                }
                if let Some((id, commit)) = committed {
                    self.complete(id, commit_result(commit), out);
                }
            }
            _ => self.stats.drop_input("replica-to-replica message sent to a client"),
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<Nezha>) {
        match timer {
            Timer::ProxyTick => {
                if let Some(sender) = &mut self.sender {
                    sender.tick();
                }
                out.set_timer(Timer::ProxyTick, self.heartbeat_ns);
            }
            Timer::ClientRetry if self.outstanding.is_some() => {
                // The request or its replies were lost, or the proxy failed: resend with a new
                // send time (hence a new deadline) through the next proxy (§5.6), and wait twice
                // as long for this attempt (`send`: the shared back-off of the client pipeline).
                self.stats.count("client_retry");
                self.proxy_turn += 1;
                self.send(now, out);
            }
            _ => {}
        }
    }

    fn check_invariants(&self) {
        if let Some(outstanding) = &self.outstanding {
            assert!(outstanding.id.number < self.next_number, "the outstanding request was numbered");
            assert!(outstanding.sends > 0, "the outstanding request was sent");
            assert_eq!(outstanding.id.client, self.id, "requests carry our id");
        }
        if let Some(sender) = &self.sender {
            sender.check_invariants();
        }
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        let outstanding = self.outstanding.as_ref().map_or(0, |o| o.id.number);
        let mode = if self.sender.is_some() { "dom-sender" } else { "via-proxy" };
        format!("client {:?} {mode} next={} outstanding={}", self.id, self.next_number, outstanding)
    }
}
