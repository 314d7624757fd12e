//! Bounded capture of one output pipe.
//!
//! Every byte is read until EOF (invariant 5: a child must never block on a full pipe);
//! only the first `cap` bytes are kept. What happens past the cap is the caller's choice,
//! signalled through `over_cap`: in `OnCap::Kill` mode the runner stops the tree at the first byte
//! over the cap (RUN-9), in `OnCap::Truncate` mode the command keeps running and the rest is
//! dropped (CMD-5). In `OnCap::HeadAndTail` mode ([`Keep::HeadAndTail`], `run_command`'s stdout,
//! RC-13) the first and the last half of the cap are kept and what lay between is counted.

use std::io;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What one stream produced.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    /// The first `cap` bytes; in [`Keep::HeadAndTail`] mode the head, then the tail.
    pub bytes: Vec<u8>,
    /// More than `cap` bytes arrived.
    pub truncated: bool,
    /// How many bytes of `bytes` are the head (all of them but in [`Keep::HeadAndTail`] mode).
    pub head_len: usize,
    /// Bytes dropped between the head and the tail ([`Keep::HeadAndTail`] mode; 0 otherwise).
    pub omitted: u64,
}

/// Which bytes of a stream are kept.
#[derive(Clone)]
pub(crate) enum Keep {
    /// The first `cap` bytes; the rest is dropped unread where the platform can (`splice`).
    Head(usize),
    /// The first `cap / 2` and the last `cap / 2` bytes; everything is read, and every chunk
    /// read is also given to the tap when there is one ([`crate::run_tapped`]).
    HeadAndTail(usize, Option<crate::Tap>),
}

/// What to keep of stdout and of stderr under `limits`: stderr is never kept head and tail
/// (its cap truncates, as in [`OnCap::Truncate`](crate::OnCap::Truncate)).
pub(crate) fn keep(limits: &crate::Limits, tap: Option<crate::Tap>) -> (Keep, Keep) {
    let stdout = match limits.on_cap {
        crate::OnCap::HeadAndTail => Keep::HeadAndTail(limits.stdout_cap, tap),
        crate::OnCap::Kill | crate::OnCap::Truncate => Keep::Head(limits.stdout_cap),
    };
    (stdout, Keep::Head(limits.stderr_cap))
}

/// Reads `rx` to EOF, keeping the bytes `keep` says. `over_cap` is notified once, the first
/// time a byte past the cap arrives. `stop` ends the read early with what was kept: the runner
/// uses it only after the whole tree is dead and a grace period passed, when a descriptor that
/// escaped the tree is the only thing still holding the pipe open.
pub(crate) async fn drain(
    rx: pipe::Receiver,
    keep: Keep,
    over_cap: &Notify,
    stop: CancellationToken,
) -> io::Result<Captured> {
    let mut out = match keep {
        Keep::Head(cap) => drain_head(rx, cap, over_cap, stop).await?,
        Keep::HeadAndTail(cap, tap) => {
            drain_head_and_tail(rx, cap, tap.as_ref(), over_cap, stop).await?
        }
    };
    if out.omitted == 0 {
        out.head_len = out.bytes.len();
    }
    Ok(out)
}

/// [`Keep::HeadAndTail`]: reads everything, keeping the first `cap / 2` bytes and a ring of the
/// last `cap / 2`. Past the head every byte still goes through this buffer (the tail must be
/// seen), so the buffer grows to 256 KiB once the stream is that busy.
async fn drain_head_and_tail(
    mut rx: pipe::Receiver,
    cap: usize,
    tap: Option<&crate::Tap>,
    over_cap: &Notify,
    stop: CancellationToken,
) -> io::Result<Captured> {
    let mut kept = HeadAndTail::new(cap);
    let tap = |bytes: &[u8]| {
        if let Some(tap) = tap {
            tap(bytes);
        }
    };
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut grown = false;
    loop {
        buf.clear();
        let read = tokio::select! {
            biased;
            r = rx.read_buf(&mut buf) => r,
            () = stop.cancelled() => {
                // As in `take_ready`: what the dead writers left in the pipe still counts.
                use std::os::fd::AsFd;
                buf.resize(buf.capacity(), 0);
                loop {
                    match rustix::io::read(rx.as_fd(), &mut buf[..]) {
                        Ok(0) | Err(rustix::io::Errno::AGAIN) => break,
                        Ok(n) => {
                            tap(&buf[..n]);
                            kept.push(&buf[..n], over_cap);
                        }
                        Err(rustix::io::Errno::INTR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                return Ok(kept.finish());
            }
        };
        match read {
            Ok(0) => return Ok(kept.finish()),
            Ok(n) => {
                if n == buf.capacity() && !grown {
                    grow_pipe(&rx);
                    buf.reserve_exact(256 * 1024 - buf.capacity());
                    grown = true;
                }
                tap(&buf[..n]);
                kept.push(&buf[..n], over_cap);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The head and a ring of the tail of one stream.
struct HeadAndTail {
    head: Vec<u8>,
    head_cap: usize,
    /// The last `tail_cap` bytes past the head, as a ring: `tail[start..]` then
    /// `tail[..start]` once it is full.
    tail: Vec<u8>,
    tail_cap: usize,
    start: usize,
    /// Every byte past the head, kept in the tail or not.
    past_head: u64,
}

impl HeadAndTail {
    fn new(cap: usize) -> HeadAndTail {
        HeadAndTail {
            head: Vec::new(),
            head_cap: cap / 2,
            tail: Vec::new(),
            tail_cap: cap / 2,
            start: 0,
            past_head: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8], over_cap: &Notify) {
        let room = self.head_cap - self.head.len();
        let into_head = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        if bytes.is_empty() {
            return;
        }
        let before = self.past_head;
        self.past_head += bytes.len() as u64;
        if before <= self.tail_cap as u64 && self.past_head > self.tail_cap as u64 {
            // The first byte that the head and the tail cannot both keep.
            over_cap.notify_one();
        }
        if self.tail_cap == 0 {
            return;
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - self.tail_cap..]);
            self.start = 0;
            return;
        }
        if self.tail.len() < self.tail_cap {
            let fill = (self.tail_cap - self.tail.len()).min(bytes.len());
            self.tail.extend_from_slice(&bytes[..fill]);
            bytes = &bytes[fill..];
        }
        // Full: overwrite the oldest bytes, wrapping once at most (bytes < tail_cap).
        while !bytes.is_empty() {
            let run = (self.tail_cap - self.start).min(bytes.len());
            self.tail[self.start..self.start + run].copy_from_slice(&bytes[..run]);
            self.start = (self.start + run) % self.tail_cap;
            bytes = &bytes[run..];
        }
    }

    fn finish(self) -> Captured {
        let kept_tail = self.tail.len() as u64;
        let omitted = self.past_head - kept_tail;
        let head_len = self.head.len();
        let mut bytes = self.head;
        bytes.extend_from_slice(&self.tail[self.start..]);
        bytes.extend_from_slice(&self.tail[..self.start]);
        Captured {
            bytes,
            truncated: omitted > 0,
            head_len,
            omitted,
        }
    }
}

/// [`Keep::Head`].
async fn drain_head(
    mut rx: pipe::Receiver,
    cap: usize,
    over_cap: &Notify,
    stop: CancellationToken,
) -> io::Result<Captured> {
    let mut out = Captured::default();
    // Below the cap at most `cap` bytes (64 KiB) pass through here, and a flood past it is
    // spliced away without reading, so a small buffer is enough. It is allocated, not zeroed
    // (`read_buf` fills spare capacity), and kept out of the future, which the runner polls in
    // place: a zeroed 256 KiB buffer per stream per call costs two memsets and their page
    // faults on every spawn, output or not (`cargo xtask bench spawn`).
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut grown = false;
    loop {
        buf.clear();
        let read = tokio::select! {
            // Data first: a busy runtime may poll this late, after `stop`, with the pipe full.
            biased;
            r = rx.read_buf(&mut buf) => r,
            () = stop.cancelled() => return take_ready(&rx, &mut buf, cap, out, over_cap),
        };
        let n = match read {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == buf.capacity() && !grown {
            // A full read: the command writes a lot. A larger pipe (1 MiB, up to the
            // per-user limit; best effort) means fewer wake-ups for both sides. Only now, not
            // for every call: resizing costs an allocation most commands never need.
            grow_pipe(&rx);
            grown = true;
        }
        let room = cap - out.bytes.len();
        if n > room {
            out.bytes.extend_from_slice(&buf[..room]);
            out.truncated = true;
            over_cap.notify_one();
            #[cfg(target_os = "linux")]
            return discard_rest(rx, stop).await.map(|()| out);
            #[cfg(not(target_os = "linux"))]
            return discard_rest_by_reading(rx, &mut buf, stop)
                .await
                .map(|()| out);
        }
        out.bytes.extend_from_slice(&buf[..n]);
    }
}

/// After `stop`: what is already in the pipe still belongs to the output — the writers are
/// dead, their last bytes must not be dropped because the runtime was slow to read them (a
/// busy runtime could otherwise return 16 KiB of a 64 KiB output as complete). Reads without
/// waiting until the pipe is empty, then returns; bytes past the cap only mark `truncated`.
fn take_ready(
    rx: &pipe::Receiver,
    buf: &mut Vec<u8>,
    cap: usize,
    mut out: Captured,
    over_cap: &Notify,
) -> io::Result<Captured> {
    use std::os::fd::AsFd;
    // A plain `read` on the non-blocking descriptor: tokio's `try_read` answers "would block"
    // from its cached readiness without asking the kernel, which is exactly the case here.
    buf.resize(buf.capacity().max(16 * 1024), 0);
    loop {
        match rustix::io::read(rx.as_fd(), &mut buf[..]) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                let room = cap - out.bytes.len();
                if n > room {
                    out.bytes.extend_from_slice(&buf[..room]);
                    out.truncated = true;
                    over_cap.notify_one();
                    return Ok(out);
                }
                out.bytes.extend_from_slice(&buf[..n]);
            }
            Err(rustix::io::Errno::AGAIN) => return Ok(out),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Asks for a 1 MiB pipe (idempotent; refused past the user's pipe-buffer limit, which is fine).
fn grow_pipe(rx: &pipe::Receiver) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsFd;
        let _ = rustix::pipe::fcntl_setpipe_size(rx.as_fd(), 1 << 20);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = rx;
}

/// Past the cap nothing more is kept, but the pipe must still be emptied until EOF so the
/// child never blocks. `splice` moves the pages to `/dev/null` inside the kernel, without
/// copying them into our memory first (the `bench drain` flood is 1 GiB).
///
/// A flood past the cap is the common case here (a build log, `yes`), and its cost is the
/// reader's wake-ups: through the async reactor each one is a readiness event, a task wake and
/// a re-arm, about twice the cost of a plain blocking loop (`cargo xtask bench drain`: 1 GiB in
/// ~1.0 s through tokio, ~0.65 s this way). So the rest is discarded on a blocking thread that
/// sleeps in `poll` on the pipe and on a wake-up descriptor that `stop` writes to.
#[cfg(target_os = "linux")]
async fn discard_rest(rx: pipe::Receiver, stop: CancellationToken) -> io::Result<()> {
    use rustix::event::{EventfdFlags, eventfd};
    grow_pipe(&rx);
    let pipe = rx.into_nonblocking_fd()?;
    let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
    let waker = wake.try_clone()?;
    let mut worker = tokio::task::spawn_blocking(move || discard_blocking(&pipe, &wake));
    let joined = tokio::select! {
        r = &mut worker => r,
        () = stop.cancelled() => {
            // Only after the whole tree is dead and a grace period passed: an escaped
            // descriptor holds the pipe open. Wake the thread and let it go.
            let _ = rustix::io::write(&waker, &1u64.to_ne_bytes());
            worker.await
        }
    };
    joined.map_err(|e| io::Error::other(format!("the output discarder failed: {e}")))?
}

/// Splices everything from `pipe` to `/dev/null` until EOF or until `wake` is written.
#[cfg(target_os = "linux")]
fn discard_blocking(pipe: &std::os::fd::OwnedFd, wake: &std::os::fd::OwnedFd) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    use rustix::pipe::{SpliceFlags, splice};
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    loop {
        // Empty the pipe first: with a 1 MiB pipe one call usually takes all there is.
        loop {
            match splice(pipe, None, &null, None, 1 << 20, SpliceFlags::NONBLOCK) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut fds = [
            PollFd::new(pipe, PollFlags::IN),
            PollFd::new(wake, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        if !fds[1].revents().is_empty() {
            return Ok(());
        }
    }
}

/// The portable fallback of [`discard_rest`]: read and drop.
#[cfg(not(target_os = "linux"))]
async fn discard_rest_by_reading(
    mut rx: pipe::Receiver,
    buf: &mut Vec<u8>,
    stop: CancellationToken,
) -> io::Result<()> {
    loop {
        buf.clear();
        let read = tokio::select! {
            r = rx.read_buf(buf) => r,
            () = stop.cancelled() => return Ok(()),
        };
        match read {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;

    async fn run(input: Vec<u8>, cap: usize) -> (Captured, bool) {
        let (mut tx, rx) = pipe::pipe().unwrap();
        let notify = Arc::new(Notify::new());
        let writer = tokio::spawn(async move {
            tx.write_all(&input).await.unwrap();
        });
        let got = drain(rx, Keep::Head(cap), &notify, CancellationToken::new())
            .await
            .unwrap();
        writer.await.unwrap();
        let notified = tokio::time::timeout(std::time::Duration::from_millis(1), notify.notified())
            .await
            .is_ok();
        (got, notified)
    }

    #[tokio::test]
    async fn output_under_the_cap_is_kept_whole() {
        let (got, notified) = run(b"hello".to_vec(), 5).await;
        assert_eq!(got.bytes, b"hello");
        assert!(!got.truncated);
        assert!(!notified);
    }

    #[tokio::test]
    async fn output_over_the_cap_is_cut_at_the_cap_and_signalled() {
        let input: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let (got, notified) = run(input.clone(), 65_536).await;
        assert_eq!(got.bytes, input[..65_536]);
        assert!(got.truncated);
        assert!(notified);
    }

    #[tokio::test]
    async fn a_flood_far_past_the_cap_is_read_to_the_end() {
        // 16 MiB through a pipe of at most 1 MiB: the writer finishes only if every byte past
        // the cap is taken out of the pipe.
        let input: Vec<u8> = (0..16u32 << 20).map(|i| (i % 253) as u8).collect();
        let (got, notified) = run(input.clone(), 65_536).await;
        assert_eq!(got.bytes, input[..65_536]);
        assert!(got.truncated);
        assert!(notified);
    }

    #[tokio::test]
    async fn what_is_already_in_the_pipe_when_stop_comes_is_kept() {
        // Under load the grace timer may fire before the reader runs; the output must not
        // come back cut to what had been read, with `truncated: false`. The writer
        // stays open (as an escaped descriptor would), so only `stop` ends the read.
        for _ in 0..50 {
            let (mut tx, rx) = pipe::pipe().unwrap();
            let input: Vec<u8> = (0..60_000u32).map(|i| (i % 241) as u8).collect();
            tx.write_all(&input).await.unwrap();
            let stop = CancellationToken::new();
            stop.cancel();
            let got = drain(rx, Keep::Head(65_536), &Notify::new(), stop)
                .await
                .unwrap();
            assert_eq!(got.bytes.len(), input.len());
            assert_eq!(got.bytes, input);
            assert!(!got.truncated);
            drop(tx);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stop_ends_the_discard_while_a_writer_still_holds_the_pipe() {
        let (mut tx, rx) = pipe::pipe().unwrap();
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        let reader =
            tokio::spawn(
                async move { drain(rx, Keep::Head(1_000), &Notify::new(), stopper).await },
            );
        tx.write_all(&vec![b'x'; 200_000]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !reader.is_finished(),
            "EOF cannot have been seen: tx is open"
        );
        stop.cancel();
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), reader)
            .await
            .expect("stop must end the discard")
            .unwrap()
            .unwrap();
        assert_eq!(got.bytes.len(), 1_000);
        assert!(got.truncated);
        drop(tx);
    }

    async fn head_and_tail(input: Vec<u8>, cap: usize) -> Captured {
        let (mut tx, rx) = pipe::pipe().unwrap();
        let writer = tokio::spawn(async move {
            tx.write_all(&input).await.unwrap();
        });
        let got = drain(
            rx,
            Keep::HeadAndTail(cap, None),
            &Notify::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        writer.await.unwrap();
        got
    }

    #[tokio::test]
    async fn head_and_tail_keeps_the_first_and_last_halves_and_counts_the_middle() {
        let input: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
        let got = head_and_tail(input.clone(), 10_000).await;
        assert_eq!(got.head_len, 5_000);
        assert_eq!(&got.bytes[..5_000], &input[..5_000]);
        assert_eq!(&got.bytes[5_000..], &input[input.len() - 5_000..]);
        assert_eq!(got.omitted, 5_000_000 - 10_000);
        assert!(got.truncated);
    }

    #[tokio::test]
    async fn head_and_tail_under_the_cap_is_kept_whole_and_omits_nothing() {
        for len in [0usize, 1, 4_999, 5_000, 5_001, 10_000] {
            let input: Vec<u8> = (0..len as u32).map(|i| (i % 249) as u8).collect();
            let got = head_and_tail(input.clone(), 10_000).await;
            assert_eq!(got.bytes, input, "{len}");
            assert_eq!(got.omitted, 0, "{len}");
            assert!(!got.truncated, "{len}");
            assert_eq!(got.head_len, len, "{len}");
        }
        let got = head_and_tail(vec![7; 10_001], 10_000).await;
        assert_eq!(
            (got.omitted, got.bytes.len(), got.head_len),
            (1, 10_000, 5_000)
        );
    }

    proptest::proptest! {
        /// Whatever the chunking, the ring ends as the plain last `cap / 2` bytes.
        #[test]
        fn head_and_tail_is_the_same_for_any_chunking(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..3_000),
            cuts in proptest::collection::vec(1usize..700, 1..20),
            cap in 0usize..1_000,
        ) {
            let mut kept = HeadAndTail::new(cap);
            let notify = Notify::new();
            let mut rest = &data[..];
            let mut i = 0;
            while !rest.is_empty() {
                let n = cuts[i % cuts.len()].min(rest.len());
                kept.push(&rest[..n], &notify);
                rest = &rest[n..];
                i += 1;
            }
            let got = kept.finish();
            let (head, tail) = (cap / 2, cap / 2);
            if data.len() <= head + tail {
                proptest::prop_assert_eq!(&got.bytes, &data);
                proptest::prop_assert_eq!(got.omitted, 0);
            } else {
                let mut want = data[..head].to_vec();
                want.extend_from_slice(&data[data.len() - tail..]);
                proptest::prop_assert_eq!(&got.bytes, &want);
                proptest::prop_assert_eq!(got.omitted, (data.len() - head - tail) as u64);
                proptest::prop_assert_eq!(got.head_len, head);
            }
        }
    }

    #[tokio::test]
    async fn one_byte_over_the_cap_counts_as_truncated() {
        let (got, notified) = run(vec![b'x'; 11], 10).await;
        assert_eq!(got.bytes.len(), 10);
        assert!(got.truncated);
        assert!(notified);
    }
}
