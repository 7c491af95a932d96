//! Large messages over TCP. UDP fragments serve messages up to about a megabyte; a larger one
//! (a multi-megabyte value, a state transfer) sent as hundreds of 32 KiB datagrams overruns the
//! receiver's socket buffer, loses a fragment, and is lost whole, again at every retry. So a
//! message of at least [`BULK_MIN_BYTES`] goes over a TCP connection to its destination process
//! (the same address and port number as its UDP socket), which paces it and retransmits what
//! is lost. It travels sealed in the datagram format ([`wire::seal_one`]) behind a 4-byte
//! length, so it is authenticated, numbered and checked exactly as a datagram is.
//!
//! Each destination has one writer task, fed through a queue bounded in bytes; a message that
//! would overflow it is dropped and counted, as a full socket would drop a datagram. A failed
//! connection is opened again for the next message; the message it was sending is lost (the
//! protocols retry, as for any lost message). Incoming connections are capped and each has a
//! reader task that hands whole messages to the host loop through a bounded channel.

use crate::wire;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Messages at least this large (encoded) go over TCP.
pub(super) const BULK_MIN_BYTES: usize = 1 << 20;
/// The largest sealed message read from a connection; a longer one closes it.
pub(super) const BULK_MAX_BYTES: usize = 1 << 30;
/// Bytes queued for one destination before new messages are dropped.
const QUEUE_BYTES_MAX: usize = 1 << 30;
/// Incoming connections served at once; more are closed at once.
const CONNECTIONS_MAX: usize = 256;
/// Whole messages waiting for the host loop.
const INBOX_MAX: usize = 16;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// An incoming connection idle this long is closed (its sender opens a new one when needed).
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// A received message: the connection's peer address and the sealed bytes.
pub(super) type Received = (SocketAddr, Vec<u8>);

/// One destination's writer: its queue and the bytes in it.
struct Writer {
    queue: mpsc::UnboundedSender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
}

/// The sending side: a writer task per destination process.
#[derive(Default)]
pub(super) struct BulkSender {
    writers: HashMap<SocketAddr, Writer>,
}

impl BulkSender {
    /// Queues a sealed message for `address`; false when its queue is full (the message is
    /// dropped).
    pub(super) fn send(&mut self, address: SocketAddr, sealed: Vec<u8>) -> bool {
        let writer = self.writers.entry(address).or_insert_with(|| {
            let (queue, receiver) = mpsc::unbounded_channel();
            let queued = Arc::new(AtomicUsize::new(0));
            tokio::spawn(write_to(address, receiver, queued.clone()));
            Writer { queue, queued }
        });
        let len = sealed.len();
        if writer.queued.load(Ordering::Relaxed) + len > QUEUE_BYTES_MAX {
            return false;
        }
        writer.queued.fetch_add(len, Ordering::Relaxed);
        if writer.queue.send(sealed).is_err() {
            writer.queued.fetch_sub(len, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// Writes each queued message to `address`, connecting (again) when needed.
async fn write_to(address: SocketAddr, mut queue: mpsc::UnboundedReceiver<Vec<u8>>, queued: Arc<AtomicUsize>) {
    let mut stream: Option<TcpStream> = None;
    while let Some(sealed) = queue.recv().await {
        // A connection the peer closed (it restarted, or timed us out) fails on first use: one
        // more attempt on a new connection.
        for _ in 0..2 {
            if stream.is_none() {
                stream = connect(address).await;
            }
            let Some(open) = stream.as_mut() else { break };
            let length = (sealed.len() as u32).to_le_bytes();
            if open.write_all(&length).await.is_ok() && open.write_all(&sealed).await.is_ok() {
                break;
            }
            stream = None;
        }
        queued.fetch_sub(sealed.len(), Ordering::Relaxed);
    }
}

async fn connect(address: SocketAddr) -> Option<TcpStream> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await.ok()?.ok()?;
    let _ = stream.set_nodelay(true);
    Some(stream)
}

/// Accepts connections on `listener` and hands each message read to `inbox`.
pub(super) async fn accept(listener: TcpListener, inbox: mpsc::Sender<Received>) {
    let open = Arc::new(AtomicUsize::new(0));
    let mut pause = Duration::from_millis(10);
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                pause = Duration::from_millis(10);
                if open.load(Ordering::Relaxed) >= CONNECTIONS_MAX {
                    continue; // dropped: closes it
                }
                open.fetch_add(1, Ordering::Relaxed);
                let (inbox, open) = (inbox.clone(), open.clone());
                tokio::spawn(async move {
                    read_from(stream, peer, inbox).await;
                    open.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Err(_) => {
                // Out of file descriptors, say: wait rather than spin.
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Reads length-prefixed messages until the connection closes, idles or breaks the format.
async fn read_from(mut stream: TcpStream, peer: SocketAddr, inbox: mpsc::Sender<Received>) {
    loop {
        let mut length = [0u8; 4];
        match tokio::time::timeout(IDLE_TIMEOUT, stream.read_exact(&mut length)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let length = u32::from_le_bytes(length) as usize;
        if !(wire::HEADER_LEN + wire::TAG_LEN..=BULK_MAX_BYTES).contains(&length) {
            return;
        }
        // Grown as bytes arrive, so a peer that announces a gigabyte and sends nothing costs
        // nothing.
        let mut sealed = Vec::new();
        match (&mut stream).take(length as u64).read_to_end(&mut sealed).await {
            Ok(read) if read == length => {}
            _ => return,
        }
        if inbox.send((peer, sealed)).await.is_err() {
            return;
        }
    }
}

/// Starts accepting large messages on `listener` (bound to the process's address); returns the
/// channel of messages received.
pub(super) fn listen(listener: TcpListener) -> mpsc::Receiver<Received> {
    let (sender, receiver) = mpsc::channel(INBOX_MAX);
    tokio::spawn(accept(listener, sender));
    receiver
}
