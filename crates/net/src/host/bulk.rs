//! Large messages over TCP. UDP fragments serve messages up to about a megabyte; a larger one
//! (a multi-megabyte value, a state transfer) sent as hundreds of 32 KiB datagrams overruns the
//! receiver's socket buffer, loses a fragment, and is lost whole, again at every retry. So a
//! message of at least [`BULK_MIN_BYTES`] goes over a TCP connection to its destination process
//! (the same address and port number as its UDP socket), which paces it and retransmits what
//! is lost. It travels sealed in the datagram format ([`wire::seal_one`]) behind a 4-byte
//! length, so it is authenticated, numbered and checked exactly as a datagram is.
//!
//! Each destination has one writer task, fed through a queue bounded in bytes. When a message
//! would overflow it, the oldest messages still waiting are dropped (and counted) to make room:
//! the protocols resend what is lost, a resend supersedes the copy it repeats, so the newest
//! message is the one worth keeping. (A queue that refused the newest instead filled with a
//! view change's stale 200 MB votes, resent every few milliseconds, and refused the new view's
//! start behind them, for as long as the resends went on.) A failed
//! connection is opened again for the next message; the message it was sending is lost (the
//! protocols retry, as for any lost message). Incoming connections are capped and each has a
//! reader task that hands whole messages to the host loop through a bounded channel.

use crate::wire;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

/// Messages at least this large (encoded) go over TCP.
pub(super) const BULK_MIN_BYTES: usize = 1 << 20;
/// The largest sealed message read from a connection; a longer one closes it.
pub(super) const BULK_MAX_BYTES: usize = 1 << 30;
/// Bytes queued for one destination (the message being written included) before the oldest
/// waiting ones are dropped; one message of any size is always taken.
const QUEUE_BYTES_MAX: usize = 256 << 20;
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

/// One destination's messages waiting for its writer, oldest first.
#[derive(Default)]
struct Queue {
    waiting: VecDeque<Vec<u8>>,
    /// Bytes waiting plus those of the message being written.
    bytes: usize,
    /// The sender is gone: the writer stops.
    closed: bool,
}

/// One destination's writer task: its queue, and the wake-up for new messages.
struct Writer {
    queue: Arc<Mutex<Queue>>,
    wake: Arc<Notify>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        lock(&self.queue).closed = true;
        self.wake.notify_one();
    }
}

fn lock(queue: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    // A writer never panics while holding the lock; were it to, its queue is still consistent.
    queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The sending side: a writer task per destination process.
#[derive(Default)]
pub(super) struct BulkSender {
    writers: HashMap<SocketAddr, Writer>,
}

impl BulkSender {
    /// Queues a sealed message for `address`, dropping the oldest waiting messages when the
    /// queue would pass its byte budget; returns how many were dropped.
    pub(super) fn send(&mut self, address: SocketAddr, sealed: Vec<u8>) -> usize {
        let writer = self.writers.entry(address).or_insert_with(|| {
            let (queue, wake) = (Arc::new(Mutex::new(Queue::default())), Arc::new(Notify::new()));
            tokio::spawn(write_to(address, queue.clone(), wake.clone()));
            Writer { queue, wake }
        });
        let dropped = lock(&writer.queue).push(sealed);
        writer.wake.notify_one();
        dropped
    }
}

impl Queue {
    /// Adds `sealed` behind the others, first dropping the oldest waiting messages while the
    /// budget would be passed; returns how many were dropped.
    fn push(&mut self, sealed: Vec<u8>) -> usize {
        let mut dropped = 0;
        while self.bytes + sealed.len() > QUEUE_BYTES_MAX {
            let Some(oldest) = self.waiting.pop_front() else { break };
            self.bytes -= oldest.len();
            dropped += 1;
        }
        self.bytes += sealed.len();
        self.waiting.push_back(sealed);
        dropped
    }
}

/// Writes each queued message to `address`, connecting (again) when needed.
async fn write_to(address: SocketAddr, queue: Arc<Mutex<Queue>>, wake: Arc<Notify>) {
    let mut stream: Option<TcpStream> = None;
    loop {
        let next = {
            let mut queue = lock(&queue);
            if queue.closed {
                return;
            }
            queue.waiting.pop_front()
        };
        let Some(sealed) = next else {
            wake.notified().await;
            continue;
        };
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
        lock(&queue).bytes -= sealed.len();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_its_oldest_waiting_messages_and_always_takes_the_newest() {
        let mut queue = Queue::default();
        let third = QUEUE_BYTES_MAX / 3;
        assert_eq!(queue.push(vec![1; third]), 0);
        assert_eq!(queue.push(vec![2; third]), 0);
        // The writer took the first: it stays counted until written.
        let writing = queue.waiting.pop_front().expect("a first message");
        assert_eq!(queue.push(vec![3; third]), 0);
        // Over budget: the oldest waiting message (2) goes, not the one being written or the new.
        assert_eq!(queue.push(vec![4; third]), 1);
        let waiting: Vec<u8> = queue.waiting.iter().map(|m| m[0]).collect();
        assert_eq!(waiting, vec![3, 4]);
        assert_eq!(queue.bytes, writing.len() + 2 * third);
        // A message larger than the whole budget replaces every waiting one.
        assert_eq!(queue.push(vec![5; QUEUE_BYTES_MAX + 1]), 2);
        assert_eq!(queue.waiting.len(), 1);
        assert_eq!(queue.bytes, writing.len() + QUEUE_BYTES_MAX + 1);
    }
}
