//! Batched UDP I/O: `recvmmsg` takes every ready datagram (up to a batch) in one system call,
//! and `sendmmsg` sends every datagram of a loop turn, to any destinations, in one call.
//!
//! Each datagram on loopback costs about 3 µs of kernel network path whatever the call, and the
//! call itself adds a few hundred ns (see `shared/specs/dependencies.md`); a loop turn that
//! answers several peers therefore saves that once per extra datagram, and a receive that finds
//! fewer datagrams than its batch knows the queue is empty without a further, failing call.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Most datagrams handed to one `sendmmsg` call (the kernel's `UIO_MAXIOV` is 1,024).
const SEND_CALL_MAX: usize = 1_024;
/// Bytes of one receive slot: the largest UDP payload fits, so nothing is truncated.
const SLOT_BYTES: usize = 65_536;

/// A socket address in the kernel's layout.
fn to_raw(address: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data for which all zeroes is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    let len = match address {
        SocketAddr::V4(v4) => {
            let raw = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than, and aligned for, sockaddr_in.
            unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in>(), raw) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let raw = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than, and aligned for, sockaddr_in6.
            unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in6>(), raw) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The address the kernel filled in, if it is an IP address.
fn from_raw(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and it is long enough.
            let raw = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(raw.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(raw.sin_port))))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6, and it is long enough.
            let raw = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(raw.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(raw.sin6_port),
                raw.sin6_flowinfo,
                raw.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Receive slots for `recvmmsg`, allocated once.
pub struct Receiver {
    buffers: Vec<u8>,
    addresses: Vec<libc::sockaddr_storage>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    received: usize,
}

/// One received datagram.
pub struct Received<'a> {
    /// Its bytes.
    pub bytes: &'a [u8],
    /// Its sender, if the kernel gave an IP address.
    pub source: Option<SocketAddr>,
    /// It was longer than a slot and was cut (never for IPv4 UDP, whose payload fits a slot).
    pub truncated: bool,
}

impl Receiver {
    /// Room for `slots` datagrams per call.
    pub fn new(slots: usize) -> Self {
        let slots = slots.max(1);
        // SAFETY: sockaddr_storage and mmsghdr are plain data for which all zeroes is valid.
        let zero_address: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
        let zero_header: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
        Receiver {
            buffers: vec![0; slots * SLOT_BYTES],
            addresses: vec![zero_address; slots],
            iovecs: vec![libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; slots],
            headers: vec![zero_header; slots],
            received: 0,
        }
    }

    /// Datagrams one call can take.
    pub fn slots(&self) -> usize {
        self.headers.len()
    }

    /// Takes the datagrams that are ready without blocking: `Ok(n)` with `n >= 1`, or
    /// `WouldBlock` when there are none.
    pub fn receive(&mut self, fd: RawFd) -> io::Result<usize> {
        self.received = 0;
        let base = self.buffers.as_mut_ptr();
        for slot in 0..self.headers.len() {
            // SAFETY: slot * SLOT_BYTES is within `buffers`, which holds slots * SLOT_BYTES bytes.
            let buffer = unsafe { base.add(slot * SLOT_BYTES) };
            self.iovecs[slot] = libc::iovec { iov_base: buffer.cast(), iov_len: SLOT_BYTES };
            let header = &mut self.headers[slot].msg_hdr;
            header.msg_name = (&raw mut self.addresses[slot]).cast();
            header.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            header.msg_iov = &raw mut self.iovecs[slot];
            header.msg_iovlen = 1;
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
            header.msg_flags = 0;
            self.headers[slot].msg_len = 0;
        }
        loop {
            // SAFETY: every header points at its own iovec, buffer slot and address storage, all
            // owned by `self` and alive for the call; vlen is the number of headers.
            let count = unsafe {
                libc::recvmmsg(
                    fd,
                    self.headers.as_mut_ptr(),
                    self.headers.len() as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if count >= 0 {
                self.received = count as usize;
                return if count == 0 { Err(io::ErrorKind::WouldBlock.into()) } else { Ok(count as usize) };
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }

    /// The `index`th datagram of the last call (`index` below what it returned).
    pub fn get(&self, index: usize) -> Option<Received<'_>> {
        if index >= self.received {
            return None;
        }
        let header = &self.headers[index];
        let len = (header.msg_len as usize).min(SLOT_BYTES);
        let start = index * SLOT_BYTES;
        Some(Received {
            bytes: &self.buffers[start..start + len],
            source: from_raw(&self.addresses[index], header.msg_hdr.msg_namelen),
            truncated: header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        })
    }
}

/// What one [`Sender::send`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Datagrams the kernel took.
    pub datagrams: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Datagrams refused (a full socket buffer, for example): lost, as UDP may lose them anyway.
    pub failed: u64,
    /// System calls made.
    pub calls: u64,
}

/// Scratch space for `sendmmsg`, reused from call to call.
#[derive(Default)]
pub struct Sender {
    addresses: Vec<(libc::sockaddr_storage, libc::socklen_t)>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    lens: Vec<usize>,
}

impl Sender {
    /// Sends every datagram with as few `sendmmsg` calls as the kernel allows. A datagram the
    /// kernel refuses is counted as failed and skipped, and the rest still go.
    pub fn send<'a>(&mut self, fd: RawFd, datagrams: impl IntoIterator<Item = (&'a [u8], SocketAddr)>) -> Sent {
        self.addresses.clear();
        self.iovecs.clear();
        self.headers.clear();
        self.lens.clear();
        for (bytes, address) in datagrams {
            self.addresses.push(to_raw(address));
            // sendmmsg only reads through iov_base; the mutable pointer is the C type's.
            self.iovecs.push(libc::iovec { iov_base: bytes.as_ptr().cast_mut().cast(), iov_len: bytes.len() });
            self.lens.push(bytes.len());
        }
        // SAFETY: mmsghdr is plain data for which all zeroes is valid.
        let zero_header: libc::mmsghdr = unsafe { MaybeUninit::zeroed().assume_init() };
        for index in 0..self.iovecs.len() {
            let mut header = zero_header;
            header.msg_hdr.msg_name = (&raw mut self.addresses[index].0).cast();
            header.msg_hdr.msg_namelen = self.addresses[index].1;
            header.msg_hdr.msg_iov = &raw mut self.iovecs[index];
            header.msg_hdr.msg_iovlen = 1;
            self.headers.push(header);
        }
        let mut sent = Sent::default();
        let mut next = 0;
        while next < self.headers.len() {
            let count = (self.headers.len() - next).min(SEND_CALL_MAX);
            sent.calls += 1;
            // SAFETY: headers[next..next + count] point at addresses and iovecs owned by `self`,
            // whose iovecs point into the caller's datagrams, borrowed for this whole call.
            let result = unsafe {
                libc::sendmmsg(fd, self.headers.as_mut_ptr().add(next), count as libc::c_uint, libc::MSG_DONTWAIT)
            };
            if result > 0 {
                let done = result as usize;
                sent.datagrams += done as u64;
                sent.bytes += self.lens[next..next + done].iter().sum::<usize>() as u64;
                next += done;
            } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                // The first datagram of the call was refused; the next may still go.
                sent.failed += 1;
                next += 1;
            }
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn batches_reach_several_destinations_and_come_back_whole() {
        // Goal: one sendmmsg call delivers datagrams of different sizes to two sockets, and
        // recvmmsg returns each with its bytes and source, then reports an empty queue.
        // Method: blocking std sockets on loopback (the datagrams are queued by the time the
        // send returns).
        let a = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let b = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let c = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let (address_b, address_c) = (b.local_addr().expect("addr"), c.local_addr().expect("addr"));
        let payloads: Vec<Vec<u8>> = vec![vec![1; 10], vec![2; 40_000], vec![3; 1]];
        let mut sender = Sender::default();
        let sent = sender.send(
            a.as_raw_fd(),
            [(&payloads[0][..], address_b), (&payloads[1][..], address_c), (&payloads[2][..], address_b)],
        );
        assert_eq!(sent, Sent { datagrams: 3, bytes: 40_011, failed: 0, calls: 1 });
        let mut receiver = Receiver::new(4);
        assert_eq!(receiver.receive(b.as_raw_fd()).expect("two ready"), 2);
        let first = receiver.get(0).expect("first");
        assert_eq!((first.bytes, first.source, first.truncated), (&payloads[0][..], a.local_addr().ok(), false));
        assert_eq!(receiver.get(1).expect("second").bytes, &payloads[2][..]);
        assert!(receiver.get(2).is_none());
        assert_eq!(receiver.receive(b.as_raw_fd()).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(receiver.receive(c.as_raw_fd()).expect("one ready"), 1);
        assert_eq!(receiver.get(0).expect("large").bytes, &payloads[1][..]);
    }

    #[test]
    fn addresses_round_trip_through_the_kernel_layout() {
        // Goal: the conversions to and from sockaddr agree for IPv4 and IPv6.
        for text in ["127.0.0.1:7400", "10.1.2.3:1", "[::1]:9000", "[fe80::1%2]:65535"] {
            let address: SocketAddr = text.parse().expect("address");
            let (raw, len) = to_raw(address);
            assert_eq!(from_raw(&raw, len), Some(address), "{text}");
        }
        // SAFETY: all zeroes is a valid sockaddr_storage (family AF_UNSPEC).
        let unspecified: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
        assert_eq!(from_raw(&unspecified, 0), None);
    }
}
