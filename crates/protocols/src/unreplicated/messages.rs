//! Messages of the Unreplicated protocol.

use ordo_core::{Command, CommandResult, RequestId};
use serde::{Deserialize, Serialize};

/// Every message of the Unreplicated protocol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Client → server: execute this command.
    Request {
        /// The request.
        id: RequestId,
        /// The client's acknowledgement mark: it needs no answer below this number.
        acked_below: u64,
        /// What to execute.
        command: Command,
    },
    /// Server → client: the result.
    Reply {
        /// The request answered.
        id: RequestId,
        /// Its result.
        result: CommandResult,
    },
}
