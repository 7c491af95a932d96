//! `ordo node`: runs one node of a cluster file (a replica, another role, or a gateway).

use clap::Args;
use ordo_core::Protocol;
use ordo_net::ClusterFile;
use ordo_protocols::{ProtocolVisitor, with_protocol};
use std::process::ExitCode;

/// Options of `ordo node`.
#[derive(Args, Debug)]
pub struct NodeArgs {
    /// The cluster file (TOML: protocol, options, every node with role and addresses).
    #[arg(long)]
    config: std::path::PathBuf,
    /// The name of the node to run, as the cluster file lists it (e.g. r1, gw).
    #[arg(long)]
    id: String,
}

struct RunNode<'a> {
    cluster: &'a ClusterFile,
    name: &'a str,
}

impl ProtocolVisitor for RunNode<'_> {
    type Output = Result<(), ordo_net::HostError>;
    fn visit<P: Protocol>(self) -> Self::Output {
        ordo_net::node::run::<P>(self.cluster, self.name)
    }
}

/// Runs `ordo node`. Exit 0 when stopped by a signal; 2 when it cannot start (an unreadable
/// cluster file, an unknown name, a port in use, a damaged durable file); 1 when it failed
/// after it started (a durable write or its socket failed).
pub fn run(args: NodeArgs) -> ExitCode {
    let cluster = match ClusterFile::load(&args.config) {
        Ok(cluster) => cluster,
        Err(error) => return fail(error.to_string()),
    };
    match with_protocol(&cluster.protocol, RunNode { cluster: &cluster, name: &args.id }) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error @ ordo_net::HostError::Running(_))) => {
            eprintln!("error: node {}: {error}", args.id);
            ExitCode::from(1)
        }
        Ok(Err(error)) => fail(format!("node {}: {error}", args.id)),
        Err(unknown) => fail(unknown.to_string()),
    }
}

fn fail(message: String) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}
