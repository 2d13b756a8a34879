//! The stdio client: an upstream server run as a child process, newline-delimited
//! JSON-RPC on its stdin and stdout, logs on its stderr.
//!
//! Every revision's basic/transports §stdio: messages are delimited by newlines; the
//! server MAY write to stderr for logging and the client SHOULD NOT read stderr as an
//! error signal (2026-07-28 basic/transports/stdio). So stderr is only kept, in a
//! bounded ring of its last bytes, and quoted when the process dies.
//!
//! Stdout is read by one task. Responses go to the waiting [`Exchange`] by id;
//! requests and notifications go to the connection's [`Unsolicited`] receiver (stdio
//! cannot tie them to a request). A frame of
//! [`OFF_LOOP_BYTES`](crate::upstream::OFF_LOOP_BYTES) or more is decoded
//! on the blocking pool, so a big result does not hold up the event loop.
//!
//! # Framing
//!
//! A line is a message when it decodes as one. A line that is not JSON at all (a
//! banner, a log line) is logged, counted and skipped: the spec says a server MUST NOT
//! write such lines, but some do, and they do not disturb the lines around them. The
//! stream *can no longer be framed* when mcpx cannot tell where the upstream's next
//! message starts:
//!
//! * a line grows past [`Limits::max_frame_bytes`]: given up as it crosses the limit,
//!   not at its newline (which may never come, or may be the next message's);
//! * a line starts like a message (`{`, or `[` then `{`) and is not JSON: two messages
//!   run together, or one cut short and the next appended to it;
//! * a request times out while stdout holds part of a line, with no newline, that no
//!   byte has added to for half the request's timeout
//!   ([`ChildUpstream::give_up_if_unfinished`], asked by the layer above): that line
//!   will not be finished, and whatever comes next would be read as its end.
//!
//! Then the connection ends as a closed one does, with [`TransportError::Framing`]
//! saying what the upstream wrote: every pending request fails with it at once, the
//! reader stops reading (the process gets EPIPE if it writes on), and the owner
//! restarts the process (the gateway's supervisor does).
//!
//! The child runs in its own process group, so stopping it stops whatever it spawned.
//! [`Upstream::close`] follows 2026-07-28 basic/transports/stdio §Shutdown (and
//! 2025-11-25 basic/lifecycle §Shutdown, stdio): close stdin, wait, `SIGTERM` the
//! group, wait, `SIGKILL` the group. Dropping a [`ChildUpstream`] runs the same
//! sequence in the background (or `SIGKILL`s at once when there is no runtime).
//!
//! # Over a byte stream
//!
//! [`ChildUpstream::over_stream`] speaks the same framing over any reader and writer
//! instead of a process's stdout and stdin: a server in the same process, over
//! `tokio::io::duplex`, for in-process tests. There is no process then: no stderr,
//! no exit status, no signals; closing it closes the writer and waits for the reader
//! to end.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use mcpx_protocol::codec::{DecodeErrorKind, Decoded, Limits};
use mcpx_protocol::jsonrpc::Kind;
use mcpx_protocol::{Frame, Id};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{Notify, watch};
use tokio_util::codec::FramedRead;

use crate::error::TransportError;
use crate::pending::{PeerError, Pending};
use crate::stdio::{Line, LineCodec, Unfinished, one_line};
use crate::upstream::{
    Awaited, Exchange, SentCount, Unsolicited, UnsolicitedSender, Upstream, decode_line,
    unsolicited,
};

/// How to start an upstream server process.
#[derive(Debug, Clone)]
pub struct ChildConfig {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables added to (or overriding) the inherited environment.
    pub env: Vec<(String, String)>,
    /// Variables of this process's environment the child does not inherit (its
    /// parent's secrets). `env` may still set them.
    pub env_remove: Vec<String>,
    /// When set, the child inherits only these variables of this process's
    /// environment (then `env_remove` and `env` apply).
    pub env_inherit_only: Option<Vec<String>>,
    /// Working directory; the current one when `None`.
    pub cwd: Option<PathBuf>,
    /// Frame limits; `max_frame_bytes` bounds one stdout line.
    pub limits: Limits,
    /// How many of the last stderr bytes are kept (default 16 KiB); error messages
    /// quote at most the last 10 lines and 2 KiB of them.
    pub stderr_ring_bytes: usize,
    /// How long each step of the stop sequence waits for the process to exit
    /// (default 2 s).
    pub stop_grace: Duration,
    /// Requests awaiting a response at once (default 256).
    pub max_pending: usize,
    /// Frames queued on the [`Unsolicited`] receiver before reading stdout pauses
    /// (default 1024).
    pub unsolicited_queue: usize,
    /// Also copy what the child writes on stderr to this process's stderr, as it comes
    /// (default false: it is only kept, for error messages). For a command-line tool
    /// whose child is a program the user runs through it.
    pub echo_stderr: bool,
}

impl ChildConfig {
    /// A configuration running `command` with `args` and every other field at its
    /// default.
    pub fn new(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ChildConfig {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            env_remove: Vec::new(),
            env_inherit_only: None,
            cwd: None,
            limits: Limits::default(),
            stderr_ring_bytes: 16 * 1024,
            echo_stderr: false,
            stop_grace: Duration::from_secs(2),
            max_pending: 256,
            unsolicited_queue: 1024,
        }
    }
}

/// The most lines of a child's stderr an error message quotes.
const TAIL_LINES: usize = 10;
/// The most bytes of a child's stderr an error message quotes.
const TAIL_BYTES: usize = 2048;

/// The last bytes a child wrote to stderr.
#[derive(Debug)]
struct Ring {
    buf: VecDeque<u8>,
    cap: usize,
    dropped: bool,
}

impl Ring {
    fn push(&mut self, bytes: &[u8]) {
        for b in bytes {
            if self.buf.len() >= self.cap {
                self.buf.pop_front();
                self.dropped = true;
            }
            if self.cap > 0 {
                self.buf.push_back(*b);
            }
        }
    }

    /// The last lines kept, for an error message: at most [`TAIL_LINES`] lines and
    /// [`TAIL_BYTES`] bytes, with `…` where something before them was left out. A
    /// host's model reads these messages; a server's whole log does not belong there.
    fn tail(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut bytes = Vec::with_capacity(self.buf.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        let mut start = 0;
        let mut cut = self.dropped;
        // The start of the last TAIL_LINES lines.
        if let Some((i, _)) = text.rmatch_indices('\n').nth(TAIL_LINES - 1) {
            start = i + 1;
            cut = true;
        }
        // Then at most TAIL_BYTES, from a character boundary.
        if text.len() - start > TAIL_BYTES {
            start = text.len() - TAIL_BYTES;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            cut = true;
        }
        let kept = text.get(start..).unwrap_or_default();
        if cut {
            format!("…{kept}")
        } else {
            kept.to_owned()
        }
    }
}

/// Where frames to the upstream are written: a child's stdin, or (for
/// [`ChildUpstream::over_stream`]) any writer.
enum Writer {
    Stdin(ChildStdin),
    Stream(Box<dyn AsyncWrite + Send + Unpin>),
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Writer::Stdin(_) => "Writer::Stdin",
            Writer::Stream(_) => "Writer::Stream",
        })
    }
}

impl Writer {
    /// Writes `line` and its newline, and flushes.
    async fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        match self {
            Writer::Stdin(w) => {
                crate::stdio::write_line(w, line).await?;
                w.flush().await
            }
            Writer::Stream(w) => {
                crate::stdio::write_line(w, line).await?;
                w.flush().await
            }
        }
    }
}

#[derive(Debug)]
struct Shared {
    stdin: tokio::sync::Mutex<Option<Writer>>,
    /// A child process (`false`: [`ChildUpstream::over_stream`], no process).
    process: bool,
    pending: Arc<Pending>,
    /// Why the connection is closed, once it is: the error every request fails with
    /// from then on.
    closed: watch::Sender<Option<TransportError>>,
    /// The exit status, once the process has been reaped.
    exited: watch::Receiver<Option<ExitStatus>>,
    stderr: Mutex<Ring>,
    /// The process group (the child's pid; `process_group(0)`).
    pgid: Option<Pid>,
    non_json_lines: AtomicU64,
    /// The line the reader holds unfinished, if any.
    unfinished: Arc<Unfinished>,
    /// Tells the reader to stop: the connection was given up from outside it.
    lost: Notify,
    stop_grace: Duration,
    stopping: AtomicBool,
    /// Its [`ChildUpstream`] was dropped: nobody awaits its responses any more.
    dropped: AtomicBool,
    /// Frames delivered to [`Unsolicited`] so far.
    unsolicited_sent: SentCount,
}

impl Awaited for Shared {
    fn closed_error(&self) -> TransportError {
        self.closed
            .borrow()
            .clone()
            .unwrap_or_else(|| TransportError::Closed {
                detail: "the upstream process is gone".to_owned(),
            })
    }

    fn forget(&self, id: &Id) {
        self.pending.forget(id);
    }
}

impl Shared {
    fn stderr_tail(&self) -> String {
        self.stderr.lock().tail()
    }

    /// Whether the connection is closed.
    fn is_closed(&self) -> bool {
        self.closed.borrow().is_some()
    }

    /// Ends the connection with `error` unless it has ended already: every pending
    /// request fails with it, and so does every later one. Whether it was the first.
    fn end(&self, error: TransportError) -> bool {
        let first = self.closed.send_if_modified(|c| {
            if c.is_some() {
                return false;
            }
            *c = Some(error);
            true
        });
        if first {
            self.pending.close_all();
        }
        first
    }

    /// Gives the connection up because its stdout can no longer be framed (see the
    /// module's doc); `what` says what the upstream wrote. The reader stops.
    fn lose(&self, what: String) {
        let mut detail = what;
        let tail = self.stderr_tail();
        if !tail.is_empty() {
            detail.push_str("; stderr: ");
            detail.push_str(&tail);
        }
        tracing::warn!("the upstream's stdout can no longer be framed: {detail}");
        if self.end(TransportError::Framing(detail)) {
            self.lost.notify_one();
        }
    }

    fn describe_exit(&self, status: Option<ExitStatus>) -> String {
        use std::os::unix::process::ExitStatusExt as _;
        let mut detail = match status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => format!("exited ({s})"),
            },
            None => "closed its stdout".to_owned(),
        };
        let non_json = self.non_json_lines.load(Ordering::Relaxed);
        if non_json > 0 {
            detail.push_str(&format!("; {non_json} non-JSON-RPC stdout line(s) skipped"));
        }
        let tail = self.stderr_tail();
        if !tail.is_empty() {
            detail.push_str("; stderr: ");
            detail.push_str(&tail);
        }
        detail
    }

    fn signal(&self, sig: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is gone) is the expected outcome late in the sequence.
            if let Err(e) = killpg(pgid, sig)
                && e != nix::errno::Errno::ESRCH
            {
                tracing::warn!(%pgid, ?sig, "killpg failed: {e}");
            }
        }
    }

    async fn wait_exit(&self, within: Duration) -> bool {
        let mut rx = self.exited.clone();
        tokio::time::timeout(within, rx.wait_for(Option::is_some))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Waits up to `within` for the connection to close (its reader ended).
    async fn wait_closed(&self, within: Duration) -> bool {
        let mut rx = self.closed.subscribe();
        tokio::time::timeout(within, rx.wait_for(Option::is_some))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The stop sequence (2026-07-28 basic/transports/stdio §Shutdown): close stdin,
    /// wait, SIGTERM the group, wait, SIGKILL the group. Stragglers of the group (a
    /// grandchild that outlives the server) get SIGKILL once the server has exited.
    async fn stop(&self) {
        if self.stopping.swap(true, Ordering::SeqCst) {
            // Someone else runs the sequence; wait for its end.
            self.wait_exit(self.stop_grace * 3).await;
            return;
        }
        drop(self.stdin.lock().await.take());
        if !self.process {
            // No process: the other end sees EOF and closes its side.
            self.wait_closed(self.stop_grace).await;
            return;
        }
        if !self.wait_exit(self.stop_grace).await {
            tracing::debug!("upstream did not exit after stdin closed; SIGTERM");
            self.signal(Signal::SIGTERM);
            if !self.wait_exit(self.stop_grace).await {
                tracing::warn!("upstream did not exit after SIGTERM; SIGKILL");
                self.signal(Signal::SIGKILL);
                self.wait_exit(self.stop_grace).await;
            }
        }
        self.signal(Signal::SIGKILL);
    }
}

/// A connection to an upstream server running as a child process (or, by
/// [`ChildUpstream::over_stream`], to one speaking the same framing over any byte
/// stream).
#[derive(Debug)]
pub struct ChildUpstream {
    shared: Arc<Shared>,
}

impl ChildUpstream {
    /// How many frames went to its [`Unsolicited`] receiver so far (see
    /// [`UnsolicitedSender`]).
    pub fn unsolicited_sent(&self) -> u64 {
        self.shared.unsolicited_sent.get()
    }

    /// Starts the process and the tasks reading its stdout and stderr.
    pub fn spawn(config: ChildConfig) -> Result<(ChildUpstream, Unsolicited), TransportError> {
        let mut cmd = Command::new(&config.command);
        if let Some(keep) = &config.env_inherit_only {
            cmd.env_clear();
            for k in keep {
                if let Some(v) = std::env::var_os(k) {
                    cmd.env(k, v);
                }
            }
        }
        for k in &config.env_remove {
            cmd.env_remove(k);
        }
        cmd.args(&config.args)
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &config.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().map_err(|e| spawn_error(&config, &e))?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(TransportError::Io("child stdio pipes missing".to_owned()));
        };

        let (exit_tx, exit_rx) = watch::channel(None);
        let (un_tx, un_rx) = unsolicited(config.unsolicited_queue);
        let (closed_tx, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            stdin: tokio::sync::Mutex::new(Some(Writer::Stdin(stdin))),
            process: true,
            pending: Arc::new(Pending::new(config.max_pending.max(1))),
            closed: closed_tx,
            exited: exit_rx,
            stderr: Mutex::new(Ring {
                buf: VecDeque::new(),
                cap: config.stderr_ring_bytes,
                dropped: false,
            }),
            pgid,
            non_json_lines: AtomicU64::new(0),
            unfinished: Arc::new(Unfinished::new()),
            lost: Notify::new(),
            stop_grace: config.stop_grace,
            stopping: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
            unsolicited_sent: un_tx.count(),
        });

        // Reaper: owns the child (kill_on_drop), publishes its exit status.
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            exit_tx.send_replace(status);
        });

        // Stderr into the ring.
        let stderr_done = {
            let shared = shared.clone();
            let echo = config.echo_stderr;
            tokio::spawn(async move {
                let mut chunk = vec![0u8; 4096];
                let mut out = tokio::io::stderr();
                loop {
                    match stderr.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let bytes = chunk.get(..n).unwrap_or_default();
                            if echo {
                                let _ = out.write_all(bytes).await;
                            }
                            tracing::debug!(target: "mcpx::upstream::stderr", "{}", String::from_utf8_lossy(bytes).trim_end());
                            shared.stderr.lock().push(bytes);
                        }
                    }
                }
            })
        };

        start_reader(
            shared.clone(),
            stdout,
            config.limits,
            un_tx,
            Some(stderr_done),
        );
        Ok((ChildUpstream { shared }, un_rx))
    }

    /// A connection speaking this transport's framing (newline-delimited JSON-RPC)
    /// over `reader` and `writer` instead of a process's stdout and stdin: a server in
    /// this process over `tokio::io::duplex`, say. Of `config`, the limits,
    /// `max_pending`, `unsolicited_queue` and `stop_grace` apply; the rest describes a
    /// process and is ignored. Must be called inside a tokio runtime.
    pub fn over_stream<R, W>(
        reader: R,
        writer: W,
        config: &ChildConfig,
    ) -> (ChildUpstream, Unsolicited)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (un_tx, un_rx) = unsolicited(config.unsolicited_queue);
        let (closed_tx, _) = watch::channel(None);
        // Never sent: there is no process to exit.
        let (_, exit_rx) = watch::channel(None);
        let shared = Arc::new(Shared {
            stdin: tokio::sync::Mutex::new(Some(Writer::Stream(Box::new(writer)))),
            process: false,
            pending: Arc::new(Pending::new(config.max_pending.max(1))),
            closed: closed_tx,
            exited: exit_rx,
            stderr: Mutex::new(Ring {
                buf: VecDeque::new(),
                cap: 0,
                dropped: false,
            }),
            pgid: None,
            non_json_lines: AtomicU64::new(0),
            unfinished: Arc::new(Unfinished::new()),
            lost: Notify::new(),
            stop_grace: config.stop_grace,
            stopping: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
            unsolicited_sent: un_tx.count(),
        });
        start_reader(shared.clone(), reader, config.limits, un_tx, None);
        (ChildUpstream { shared }, un_rx)
    }

    /// The process id of the child (also its process group id), while known.
    pub fn pid(&self) -> Option<u32> {
        self.shared
            .pgid
            .and_then(|p| u32::try_from(p.as_raw()).ok())
    }

    /// The last bytes the child wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.shared.stderr_tail()
    }

    /// Whether the connection is closed (the child closed its stdout, exited or was
    /// stopped): every further request fails, so its owner should start a new one.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Whether the child has exited with status 0 (a clean exit, as opposed to a
    /// failure or a signal).
    pub fn exited_cleanly(&self) -> bool {
        self.shared.exited.borrow().is_some_and(|s| s.success())
    }

    /// Resolves once the connection is closed, with the error every request fails
    /// with from then on: [`TransportError::Closed`] with why (the exit status,
    /// skipped lines, the tail of stderr), or [`TransportError::Framing`] when stdout
    /// could no longer be framed. What a supervisor waits on to restart the child.
    pub fn closed(&self) -> impl Future<Output = TransportError> + Send + 'static {
        let mut rx = self.shared.closed.subscribe();
        async move {
            match rx.wait_for(Option::is_some).await {
                Ok(e) => e.clone(),
                Err(_) => None,
            }
            .unwrap_or_else(|| TransportError::Closed {
                detail: "the upstream process is gone".to_owned(),
            })
        }
    }

    /// Gives the connection up when stdout holds part of a line, with no newline, that
    /// no byte has added to for at least `quiet`: asked by the layer above when a
    /// request times out. Such a line will not be finished, and whatever the upstream
    /// writes next would be read as its end, so every later response would be lost.
    /// Returns the error the connection fails with from then on, when given up.
    pub fn give_up_if_unfinished(&self, quiet: Duration) -> Option<TransportError> {
        let (len, since) = self.shared.unfinished.get()?;
        if since < quiet {
            return None;
        }
        self.shared.lose(format!(
            "it left an unfinished line on stdout: {len} bytes with no newline, and nothing more for {:.1} s",
            since.as_secs_f64()
        ));
        Some(self.shared.closed_error())
    }

    async fn write(&self, frame: &Frame) -> Result<(), TransportError> {
        if self.shared.is_closed() {
            return Err(self.shared.closed_error());
        }
        let mut guard = self.shared.stdin.lock().await;
        let Some(stdin) = guard.as_mut() else {
            return Err(TransportError::Closed {
                detail: "the upstream's stdin is closed (stopping)".to_owned(),
            });
        };
        let line = one_line(frame);
        let res = stdin.write_line(&line).await;
        match res {
            Ok(()) => Ok(()),
            Err(e) => {
                drop(guard);
                // A broken pipe means the process is gone: wait briefly for the reader
                // to name why.
                let mut rx = self.shared.closed.subscribe();
                let _ = tokio::time::timeout(self.shared.stop_grace, rx.wait_for(Option::is_some))
                    .await;
                match self.shared.closed.borrow().clone() {
                    Some(closed) => Err(closed),
                    None => Err(TransportError::Io(format!(
                        "writing to the upstream's stdin failed: {e}"
                    ))),
                }
            }
        }
    }
}

/// Starts the task reading the upstream's stdout (`reader`) until the connection
/// closes; `stderr_done` is the task reading a process's stderr.
fn start_reader<R>(
    shared: Arc<Shared>,
    reader: R,
    limits: Limits,
    un_tx: UnsolicitedSender,
    stderr_done: Option<tokio::task::JoinHandle<()>>,
) where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        if read_stdout(&shared, reader, &limits, &un_tx).await {
            return; // given up: `lose` said why
        }
        // Stdout is closed: the process exited or is about to. Give it a moment so
        // the detail can name the exit status and the whole stderr tail.
        let status = if shared.process {
            let mut rx = shared.exited.clone();
            match tokio::time::timeout(shared.stop_grace, rx.wait_for(Option::is_some)).await {
                Ok(Ok(s)) => *s,
                _ => None,
            }
        } else {
            None
        };
        if let Some(stderr_done) = stderr_done {
            let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done).await;
        }
        let detail = shared.describe_exit(status);
        tracing::debug!("upstream closed: {detail}");
        shared.end(TransportError::Closed { detail });
    });
}

/// Reads the upstream's stdout until it ends (`false`) or can no longer be framed
/// (`true`: the connection was given up, and [`Shared::lose`] said why), delivering
/// each message.
async fn read_stdout(
    shared: &Shared,
    stdout: impl AsyncRead + Unpin,
    limits: &Limits,
    un_tx: &UnsolicitedSender,
) -> bool {
    let max = limits.max_frame_bytes;
    let mut lines = FramedRead::new(stdout, LineCodec::upstream(max, shared.unfinished.clone()));
    let lost = shared.lost.notified();
    tokio::pin!(lost);
    loop {
        let line = tokio::select! {
            biased;
            // Given up from outside (an unfinished line at a timeout): stop reading.
            () = &mut lost => return true,
            line = lines.next() => line,
        };
        let bytes = match line {
            None => return false,
            Some(Err(e)) => {
                tracing::warn!("reading upstream stdout failed: {e}");
                return false;
            }
            Some(Ok(Line::TooLong { size })) => {
                tracing::debug!(size, limit = max, "a stdout line crossed the frame limit");
                shared.lose(format!(
                    "it wrote a line of more than {max} bytes on stdout (mcpx.limits.maxFrameBytes)"
                ));
                return true;
            }
            Some(Ok(Line::Frame(bytes))) => bytes,
        };
        let message_like = starts_like_a_message(&bytes);
        match decode_line(bytes, limits).await {
            Ok(Decoded::Single(frame)) => route(shared, un_tx, frame).await,
            // A 2025-03-26 peer may batch; each element is routed on its own.
            Ok(Decoded::Batch(items)) => {
                for item in items {
                    match item {
                        Ok(frame) => route(shared, un_tx, frame).await,
                        Err(e) => {
                            shared.non_json_lines.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!("skipped a bad batch element from the upstream: {e}");
                        }
                    }
                }
            }
            Err(e) if message_like && matches!(e.kind, DecodeErrorKind::Parse(_)) => {
                shared.lose(format!(
                    "it wrote a line on stdout that starts like a JSON-RPC message but is not JSON ({e}): two messages run together, or one cut short"
                ));
                return true;
            }
            Err(e) => {
                shared.non_json_lines.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("skipped a non-JSON-RPC line on the upstream's stdout: {e}");
            }
        }
    }
}

/// Whether a line starts the way a JSON-RPC message does: `{`, or a batch's `[` and
/// `{` (whitespace allowed around them). A log line such as `[INFO] ready` does not.
fn starts_like_a_message(line: &[u8]) -> bool {
    let mut rest = line.iter().skip_while(|b| b.is_ascii_whitespace());
    match rest.next() {
        Some(b'{') => true,
        Some(b'[') => rest.find(|b| !b.is_ascii_whitespace()) == Some(&b'{'),
        _ => false,
    }
}

/// Delivers a frame read from the upstream: a response to its exchange, anything else
/// to `unsolicited`.
async fn route(shared: &Shared, unsolicited: &UnsolicitedSender, frame: Frame) {
    match frame.kind() {
        Kind::Result | Kind::Error => {
            if let Err(f) = shared.pending.complete(frame) {
                if shared.stopping.load(Ordering::SeqCst) || shared.dropped.load(Ordering::SeqCst) {
                    // mcpx is stopping it: the request it answers was given up with it
                    // (a handshake cut short by a shutdown).
                    tracing::debug!(frame = %f, "dropped a response while stopping");
                } else {
                    tracing::warn!(frame = %f, "dropped a response to no pending request");
                }
            }
        }
        Kind::Request | Kind::Notification => {
            if !unsolicited.send(frame).await {
                tracing::debug!("nobody reads unsolicited frames; dropped one");
            }
        }
    }
}

/// `Pending` errors as transport errors.
pub(crate) fn peer_error(e: PeerError) -> TransportError {
    match e {
        PeerError::TooMany(n) => TransportError::Protocol(format!(
            "too many requests already await a response from the upstream (limit {n})"
        )),
        PeerError::Timeout(d) => TransportError::Timeout(d),
        other => TransportError::Closed {
            detail: other.to_string(),
        },
    }
}

impl Upstream for ChildUpstream {
    async fn request(&self, frame: Frame) -> Result<Exchange, TransportError> {
        let Some(id) = frame
            .id()
            .cloned()
            .filter(|_| frame.kind() == Kind::Request)
        else {
            return Err(TransportError::Protocol(
                "Upstream::request needs a request frame with an id".to_owned(),
            ));
        };
        if self.shared.is_closed() {
            return Err(self.shared.closed_error());
        }
        let rx = self
            .shared
            .pending
            .register(id.clone())
            .map_err(peer_error)?;
        if let Err(e) = self.write(&frame).await {
            self.shared.pending.forget(&id);
            return Err(e);
        }
        Ok(Exchange::once(rx, self.shared.clone(), id))
    }

    async fn send(&self, frame: Frame) -> Result<(), TransportError> {
        self.write(&frame).await
    }

    async fn close(&self) {
        self.shared.stop().await;
    }
}

impl Drop for ChildUpstream {
    fn drop(&mut self) {
        self.shared.dropped.store(true, Ordering::SeqCst);
        if self.shared.exited.borrow().is_some() {
            // The server is gone; stragglers of its group are not.
            self.shared.signal(Signal::SIGKILL);
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let shared = self.shared.clone();
                let task = handle.spawn({
                    let shared = shared.clone();
                    async move { shared.stop().await }
                });
                let mut d = DETACHED.lock();
                d.retain(|(t, _)| !t.is_finished());
                d.push((task, shared));
            }
            // No runtime to wait on: no grace either.
            Err(_) => self.shared.signal(Signal::SIGKILL),
        }
    }
}

/// Why `config`'s program did not start, in words. `ENOENT` from the spawn means the
/// program was not found, or its working directory, or the interpreter its `#!` line
/// names: which of them is told.
fn spawn_error(config: &ChildConfig, e: &std::io::Error) -> TransportError {
    let command = config.command.clone();
    let plain = |reason: String| TransportError::Spawn {
        command: command.clone(),
        reason,
        not_found: false,
    };
    if e.kind() != std::io::ErrorKind::NotFound {
        return plain(e.to_string());
    }
    if let Some(cwd) = &config.cwd
        && !cwd.is_dir()
    {
        return plain(format!(
            "its working directory {} does not exist",
            cwd.display()
        ));
    }
    let missing = |reason: &str| TransportError::Spawn {
        command: command.clone(),
        reason: reason.to_owned(),
        not_found: true,
    };
    let found = if command.contains('/') {
        let path = match &config.cwd {
            Some(cwd) => cwd.join(&command),
            None => PathBuf::from(&command),
        };
        if !path.exists() {
            return missing("no such file");
        }
        path
    } else {
        // The PATH the child is started with: its entry's own, else mcpx's (unless
        // a minimal environment leaves it out).
        let path_var = match config.env.iter().rev().find(|(k, _)| k == "PATH") {
            Some((_, v)) => Some(std::ffi::OsString::from(v)),
            None if config.env_remove.iter().any(|k| k == "PATH")
                || config
                    .env_inherit_only
                    .as_ref()
                    .is_some_and(|keep| !keep.iter().any(|k| k == "PATH")) =>
            {
                None
            }
            None => std::env::var_os("PATH"),
        };
        let Some(path_var) = path_var.filter(|p| !p.is_empty()) else {
            return missing("PATH is not set");
        };
        let Some(found) = std::env::split_paths(&path_var)
            .map(|d| d.join(&command))
            .find(|p| p.is_file())
        else {
            return missing("not in PATH");
        };
        found
    };
    // The file is there: what is missing is what it needs to run.
    plain(format!(
        "{} exists, but the interpreter its #! line names (or a library it needs) was not found",
        found.display()
    ))
}

/// The stop sequences of children dropped without [`Upstream::close`] (a start that
/// timed out, say), running in the background, so that a process about to exit can
/// finish them: see [`stop_detached`].
static DETACHED: Mutex<Vec<(tokio::task::JoinHandle<()>, Arc<Shared>)>> = Mutex::new(Vec::new());

/// Ends the stop sequences of dropped children before the process exits: each gets
/// up to `within` to finish, then its process group gets SIGKILL. A process that
/// exits while they run would leave their children behind.
pub async fn stop_detached(within: Duration) {
    let detached = std::mem::take(&mut *DETACHED.lock());
    let (tasks, shared): (Vec<_>, Vec<_>) = detached.into_iter().unzip();
    let _ = tokio::time::timeout(within, futures_util::future::join_all(tasks)).await;
    for s in shared {
        s.signal(Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_starts_like_a_message() {
        for yes in ["{", "  {\"jsonrpc\"", "[{}", "[ \t{", "{not json"] {
            assert!(starts_like_a_message(yes.as_bytes()), "{yes:?}");
        }
        for no in ["", "   ", "[INFO] ready", "[1, 2", "Welcome {", "[", "null"] {
            assert!(!starts_like_a_message(no.as_bytes()), "{no:?}");
        }
    }
}
