//! The multi-shard parts of Tempo (Algorithm 3): `MBump` for faster stability and the
//! `MStable` exchange that keeps real-time order across shards. The commit of a multi-shard
//! command (the maximum of the shards' timestamps) is in `replica.rs`'s `try_commit`.

use super::Tempo;
use super::messages::{Dot, Message, Payload, PromiseRange};
use super::replica::{Phase, Replica};
use ordo_core::{Destinations, NodeId, Outbox};
use std::sync::Arc;

impl Replica {
    /// After proposing, tell a nearby replica of each other accessed shard (line 69).
    pub(crate) fn send_bumps(&mut self, dot: Dot, payload: &Arc<Payload>, t: u64, out: &mut Outbox<Tempo>) {
        for &shard in payload.shards.iter().filter(|&&s| s != self.shard) {
            let replicas = self.topology.replicas_of(shard as usize);
            let nearest = self.topology.closest(self.id, replicas, 1);
            out.send_durable(nearest[0], Message::Bump { dot, t });
        }
    }

    /// `MBump` (lines 70–72): generate detached promises up to the other shard's proposal.
    pub(crate) fn on_bump(&mut self, dot: Dot, t: u64) -> Result<(), &'static str> {
        let Some(instance) = self.instances.get(&dot) else { return Err("bump for an unknown command") };
        if !instance.phase.pending() {
            return Err("bump for a command not pending");
        }
        let keys = instance.keys.clone();
        let mut fresh: Vec<PromiseRange> = std::mem::take(&mut self.fresh);
        self.clocks.bump(&keys, t, &mut fresh);
        self.fresh = fresh;
        self.publish_fresh();
        Ok(())
    }

    /// The command is stable here: tell the other accessed shards (line 64).
    pub(crate) fn send_stable(&mut self, dot: Dot, out: &mut Outbox<Tempo>) {
        self.send_stable_to_shards(dot, false, out);
    }

    /// Sends our `MStable` again for a command still waiting for the other shards'.
    pub(crate) fn resend_stable(&mut self, dot: Dot, out: &mut Outbox<Tempo>) {
        self.send_stable_to_shards(dot, true, out);
    }

    fn send_stable_to_shards(&mut self, dot: Dot, waiting: bool, out: &mut Outbox<Tempo>) {
        let Some(instance) = self.instances.get(&dot) else { return };
        let Some(payload) = &instance.payload else { return };
        if instance.phase != Phase::Commit {
            return;
        }
        let to: Destinations = payload
            .shards
            .iter()
            .filter(|&&s| s != self.shard)
            .flat_map(|&s| self.topology.replicas_of(s as usize).iter().copied())
            .collect();
        out.multicast_durable(&to, Message::Stable { dot, shard: self.shard, waiting });
        let deadline = self.now_ns + self.config.recovery_timeout_ns;
        self.watch.insert(dot, deadline);
    }

    /// `MStable` from a replica of another shard (line 65). A sender still waiting gets our
    /// own `MStable` again if we sent one (it may have been lost).
    pub(crate) fn on_stable(
        &mut self,
        from: NodeId,
        dot: Dot,
        shard: u32,
        waiting: bool,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        if self.topology.node(from).shard != Some(shard as usize) || shard == self.shard {
            return Err("stable from a replica of another shard than named");
        }
        let own = self.shard;
        let Some(instance) = self.instance(dot) else { return Err("instance table full") };
        if waiting && instance.stable_sent {
            out.send_durable(from, Message::Stable { dot, shard: own, waiting: false });
        }
        if instance.phase == Phase::Execute {
            return Err("stable for an executed command");
        }
        instance.stable_from.insert(shard);
        self.executor.touch(dot);
        Ok(())
    }

    /// `MCommit` as received: checks the sender replicates the shard it speaks for.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_commit_message(
        &mut self,
        from: NodeId,
        dot: Dot,
        shard: u32,
        t: u64,
        promises: Vec<(u32, PromiseRange)>,
        payload: Option<Arc<Payload>>,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        if self.topology.nodes.get(from.index()).and_then(|n| n.shard) != Some(shard as usize) {
            return Err("commit from a replica of another shard than named");
        }
        if t == 0 {
            return Err("commit of timestamp 0");
        }
        self.on_commit(dot, shard, t, promises, payload, out);
        Ok(())
    }
}
