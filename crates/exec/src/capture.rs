//! Bounded capture of one output pipe.
//!
//! Every byte is read until EOF (DESIGN invariant 5: a child must never block on a full pipe);
//! only the first `cap` bytes are kept. What happens past the cap is the caller's choice,
//! signalled through `over_cap`: in `OnCap::Kill` mode the runner stops the tree at the first byte
//! over the cap (RUN-9), in `OnCap::Truncate` mode the command keeps running and the rest is
//! dropped (CMD-5).

use std::io;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What one stream produced.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    /// The first `cap` bytes.
    pub bytes: Vec<u8>,
    /// More than `cap` bytes arrived.
    pub truncated: bool,
}

/// Reads `rx` to EOF, keeping at most `cap` bytes. `over_cap` is notified once, the first time a
/// byte past the cap arrives. `stop` ends the read early with what was kept: the runner uses it
/// only after the whole tree is dead and a grace period passed, when a descriptor that escaped
/// the tree is the only thing still holding the pipe open.
pub(crate) async fn drain(
    mut rx: pipe::Receiver,
    cap: usize,
    over_cap: &Notify,
    stop: CancellationToken,
) -> io::Result<Captured> {
    let mut out = Captured::default();
    // Below the cap at most `cap` bytes (64 KiB) pass through here, and a flood past it is
    // spliced away without reading, so a small buffer is enough. It is allocated, not zeroed
    // (`read_buf` fills spare capacity), and kept out of the future, which the runner polls in
    // place: a zeroed 256 KiB buffer per stream per call cost two memsets and their page
    // faults on every spawn, output or not (issue 4's spawn bench).
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
        let got = drain(rx, cap, &notify, CancellationToken::new())
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
        // Issue 15: under load the grace timer could fire before the reader ran, and the
        // output came back cut to what had been read, with `truncated: false`. The writer
        // stays open (as an escaped descriptor would), so only `stop` ends the read.
        for _ in 0..50 {
            let (mut tx, rx) = pipe::pipe().unwrap();
            let input: Vec<u8> = (0..60_000u32).map(|i| (i % 241) as u8).collect();
            tx.write_all(&input).await.unwrap();
            let stop = CancellationToken::new();
            stop.cancel();
            let got = drain(rx, 65_536, &Notify::new(), stop).await.unwrap();
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
        let reader = tokio::spawn(async move { drain(rx, 1_000, &Notify::new(), stopper).await });
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

    #[tokio::test]
    async fn one_byte_over_the_cap_counts_as_truncated() {
        let (got, notified) = run(vec![b'x'; 11], 10).await;
        assert_eq!(got.bytes.len(), 10);
        assert!(got.truncated);
        assert!(notified);
    }
}
