//! Multi-Paxos in its Viewstamped-Replication form (being written).
