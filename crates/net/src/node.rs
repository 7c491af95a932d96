//! One node process: `ordo node --config cluster.toml --id NAME`. Builds a single-threaded
//! tokio runtime, the host of the named entry, its metrics endpoint and (for a gateway) its
//! Redis port, and runs until SIGINT or SIGTERM.

use crate::config::{ClusterFile, FileRole};
use crate::gateway::session::ServerFacts;
use crate::host::{Host, HostError, Request};
use crate::metrics::{self, Metrics};
use ordo_core::Protocol;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Runs the node `name` of `cluster` until a signal stops it.
pub fn run<P: Protocol>(cluster: &ClusterFile, name: &str) -> Result<(), HostError> {
    let entry = cluster.entry(name)?;
    if let Some(host) = &cluster.nodes[entry].host {
        return Err(crate::config::ConfigError::Invalid(format!("node `{name}` runs inside `{host}`'s process")).into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| HostError::Io { what: "tokio runtime".into(), source })?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let shared = Arc::new(Mutex::new(Metrics::default()));
        let host = Host::<P>::new(cluster, entry, shared.clone()).await?;
        let me = &cluster.nodes[entry];
        if let Some(address) = me.metrics {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|source| HostError::Io { what: format!("bind metrics {address}"), source })?;
            drop(listener);
            tokio::task::spawn_local(metrics::serve(address, shared.clone()));
        }
        let mut requests = None;
        if let Some(address) = me.redis.filter(|_| Host::<P>::is_gateway(cluster, entry)) {
            let (sender, receiver) = mpsc::channel::<Request>(cluster.runtime.gateway_queue_max.max(1));
            requests = Some(receiver);
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|source| HostError::Io { what: format!("bind Redis {address}"), source })?;
            drop(listener);
            let facts = ServerFacts {
                protocol: P::NAME.to_string(),
                node: name.to_string(),
                replicas: cluster.nodes.iter().filter(|n| n.role == FileRole::Replica).count(),
                client_nodes: me.clients.unwrap_or(0),
                connections_max: cluster.runtime.connections_max,
                address,
                // An empty password is none, as `CONFIG SET requirepass ""` makes it in Redis.
                requirepass: cluster.requirepass.clone().filter(|password| !password.0.is_empty()),
                idle_timeout: std::time::Duration::from_nanos(cluster.runtime.idle_timeout_ns),
                // Zero would stop a connection from ever being read.
                pipeline_depth_max: cluster.runtime.pipeline_depth_max.max(1),
                reply_bytes_max: cluster.runtime.reply_bytes_max.max(1),
            };
            tokio::task::spawn_local(crate::gateway::serve(address, sender, facts, shared.clone()));
        }
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|source| HostError::Io { what: "SIGTERM handler".into(), source })?;
        tokio::select! {
            result = host.run(requests) => result.map_err(|error| HostError::Running(Box::new(error))),
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = terminate.recv() => Ok(()),
        }
    })
}
