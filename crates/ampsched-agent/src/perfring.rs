//! A perf event's ring buffer, mapped and drained the way the kernel
//! documents it (`perf_event_open(2)`, "MMAP layout"; tools/perf's
//! `perf_mmap__read_*`): one header page whose `data_head` the kernel
//! advances and whose `data_tail` the reader writes back, then `2^n` data
//! pages of records. Shared by the scheduler events ([`crate::events`]) and
//! the fork records ([`crate::forks`]).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Offsets of `data_head` and `data_tail` in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// An event's fd and its mapped ring.
pub struct PerfRing {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    page: usize,
}

impl PerfRing {
    /// Map `data_pages` (a power of two) of `fd`'s ring. The error is mmap's.
    pub fn map(fd: OwnedFd, data_pages: usize) -> io::Result<PerfRing> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = (1 + data_pages) * page;
        // SAFETY: mapping the event's ring (header page + data pages) shared, as perf requires.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(PerfRing { fd, base: base as *mut u8, len, page })
    }

    /// The event's fd.
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Copy every record between the tail and the head into `buf` (cleared first) and
    /// advance the tail.
    pub fn drain(&self, buf: &mut Vec<u8>) {
        buf.clear();
        let size = self.len - self.page;
        // SAFETY: `base` maps `len` bytes; the header page holds data_head/data_tail (u64,
        // 8-aligned). The head is written by the kernel: read it volatile, then fence so the
        // data reads are not hoisted above it (the kernel's documented protocol).
        unsafe {
            let head = std::ptr::read_volatile(self.base.add(DATA_HEAD) as *const u64);
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            let tail = std::ptr::read_volatile(self.base.add(DATA_TAIL) as *const u64);
            let n = head.saturating_sub(tail).min(size as u64) as usize;
            let data = self.base.add(self.page);
            let start = (tail % size as u64) as usize;
            let first = n.min(size - start);
            buf.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            buf.extend_from_slice(std::slice::from_raw_parts(data, n - first));
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            std::ptr::write_volatile(self.base.add(DATA_TAIL) as *mut u64, head);
        }
    }
}

impl Drop for PerfRing {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `map` (the fd closes after).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
