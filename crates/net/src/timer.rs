//! Timers precise to tens of microseconds: one `timerfd` on `CLOCK_MONOTONIC`, armed with an
//! absolute deadline (the kernel's high-resolution timers), registered with tokio's reactor.
//! tokio's own sleep rounds to milliseconds, which is too coarse for Nezha's deadline release.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use tokio::io::unix::AsyncFd;

/// The raw timer file descriptor (closed on drop).
struct RawTimer(RawFd);

impl AsRawFd for RawTimer {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl Drop for RawTimer {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this struct and closed once.
        unsafe { libc::close(self.0) };
    }
}

/// A one-shot high-resolution wake-up.
pub struct PreciseTimer {
    fd: AsyncFd<RawTimer>,
    armed_ns: Option<u64>,
}

impl PreciseTimer {
    /// Creates the timer (inside a tokio runtime).
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall with constant flags; the result is checked.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `RawTimer` owns the open descriptor until it is dropped with the AsyncFd, and
        // always returns the same descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(RawTimer(fd), tokio::io::Interest::READABLE) }
            .map_err(|error| error.into_parts().1)?;
        Ok(PreciseTimer { fd, armed_ns: None })
    }

    /// Arms the timer for the monotonic time `deadline_ns` (None disarms it).
    pub fn arm(&mut self, deadline_ns: Option<u64>) -> io::Result<()> {
        if self.armed_ns == deadline_ns {
            return Ok(());
        }
        // A zero it_value disarms; an absolute deadline in the past fires at once, so clamp to 1.
        let value = deadline_ns.map_or(0, |d| d.max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (value / 1_000_000_000) as i64,
                tv_nsec: (value % 1_000_000_000) as i64,
            },
        };
        // SAFETY: valid descriptor and itimerspec; the old value is not requested.
        let status =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if status != 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed_ns = deadline_ns;
        Ok(())
    }

    /// Makes sure the timer fires no later than `deadline_ns` (None: no deadline needed). Unlike
    /// [`arm`](Self::arm), it leaves an earlier armed deadline in place. The host loop re-checks
    /// everything when it wakes and then arms its next deadline, so a wake-up that came too early
    /// costs one loop turn; re-arming every turn instead costs a `timerfd_settime` each turn, and
    /// the next deadline mostly moves later (timers pushed back, operations completing).
    pub fn arm_no_later_than(&mut self, deadline_ns: Option<u64>) -> io::Result<()> {
        match (self.armed_ns, deadline_ns) {
            (Some(armed), Some(deadline)) if armed <= deadline => Ok(()),
            (Some(_), None) => Ok(()),
            _ => self.arm(deadline_ns),
        }
    }

    /// Waits until the armed deadline passes (forever when disarmed).
    pub async fn wait(&mut self) -> io::Result<()> {
        loop {
            if self.armed_ns.is_none() {
                std::future::pending::<()>().await;
            }
            let mut guard = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: reading 8 bytes into an 8-byte buffer from our descriptor.
            let read = unsafe { libc::read(self.fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
            if read == 8 {
                self.armed_ns = None;
                return Ok(());
            }
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::monotonic_ns;

    #[test]
    fn sub_millisecond_timers_fire_on_time() {
        // Goal: a 200 µs timer fires within a millisecond of its deadline (tokio's sleep alone
        // would round to whole milliseconds). Method: arm 20 times, take the median lateness.
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let mut lateness: Vec<u64> = runtime.block_on(async {
            let mut timer = PreciseTimer::new().expect("timerfd");
            let mut late = Vec::new();
            for _ in 0..20 {
                let deadline = monotonic_ns() + 200_000;
                timer.arm(Some(deadline)).expect("arm");
                timer.wait().await.expect("wait");
                late.push(monotonic_ns().saturating_sub(deadline));
            }
            late
        });
        lateness.sort_unstable();
        eprintln!("timerfd lateness: median {} ns, max {} ns", lateness[10], lateness[19]);
        assert!(lateness[10] < 1_000_000, "median lateness {} ns", lateness[10]);
    }
}
