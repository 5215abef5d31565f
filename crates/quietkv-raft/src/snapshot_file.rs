//! [`SnapshotFile`]: a snapshot file as openraft reads and writes it (the
//! type configuration's `SnapshotData`) while it streams a snapshot to a
//! follower in chunks.
//!
//! openraft reads the leader's file and writes the follower's through
//! tokio's `AsyncRead`, `AsyncWrite` and `AsyncSeek`. Behind those, every
//! byte goes through a quietio [`PositionalFile`] of the snapshot
//! directory, in the mode [`SnapshotIo`](crate::snapshot::SnapshotIo)
//! chose: by default the `Backup` I/O class's (direct where the probe
//! allows it), so that sending a snapshot many times larger than memory
//! does not push the leader's hot data, which its readers need, out of the
//! page cache, and receiving one does not do that to the follower.
//!
//! The file calls block, so each runs on tokio's blocking pool, one at a
//! time, as `tokio::fs::File` does: a write is accepted at once and
//! carried out in the background (its error comes back from the next
//! call, at the latest from `shutdown`, which openraft calls when the last
//! chunk arrived and which also makes the file durable); a read waits for
//! its bytes.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use quietio::PositionalFile;
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};
use tokio::task::JoinHandle;

/// The largest piece one read or write moves: openraft's chunks are
/// smaller (quietkv-raftkv allows up to 8 MiB), and a larger request is
/// served in several.
const MAX_PIECE: usize = 8 << 20;

/// A snapshot file opened for openraft; see the module documentation.
pub struct SnapshotFile {
    state: State,
    /// Where the next read or write goes.
    pos: u64,
    /// The file's length, counting writes still in progress.
    len: u64,
    /// Bytes read ahead of the caller: their file offset and the bytes,
    /// of which the caller has taken the first `taken`. An empty piece at
    /// the current position is the end of the file.
    ready: Option<Ready>,
    /// The buffer of the last read, once the caller has taken its bytes:
    /// the next read fills it again, so a snapshot sent in chunks of 4 MiB
    /// does not allocate and free 4 MiB for every chunk.
    spare: Vec<u8>,
    /// Nothing was written since the last sync.
    synced: bool,
}

enum State {
    /// No file call in progress. `None` only after a blocking task that
    /// held the file failed, which loses it.
    Idle(Option<Box<PositionalFile>>),
    /// A file call in progress on the blocking pool; it gives the file
    /// back with its result.
    Busy(JoinHandle<(Box<PositionalFile>, Done)>),
}

/// Bytes read ahead of the caller.
struct Ready {
    /// The file offset of `bytes[taken]`.
    at: u64,
    bytes: Vec<u8>,
    taken: usize,
}

/// What a finished file call did.
enum Done {
    Read { at: u64, bytes: io::Result<Vec<u8>> },
    Write(io::Result<()>),
    Sync(io::Result<()>),
}

fn to_io(e: quietio::Error) -> io::Error {
    io::Error::other(e)
}

impl SnapshotFile {
    /// Wraps an open snapshot file, positioned at its start.
    pub(crate) fn new(file: PositionalFile) -> SnapshotFile {
        SnapshotFile {
            pos: 0,
            len: file.len(),
            ready: None,
            spare: Vec::new(),
            synced: true,
            state: State::Idle(Some(Box::new(file))),
        }
    }

    /// The file, once every call in progress has finished; the error of
    /// the last one if it failed.
    pub(crate) async fn into_file(mut self) -> io::Result<PositionalFile> {
        std::future::poll_fn(|cx| self.poll_idle(cx)).await?;
        match std::mem::replace(&mut self.state, State::Idle(None)) {
            State::Idle(Some(file)) => Ok(*file),
            _ => Err(lost()),
        }
    }

    /// Waits for the call in progress, if any, and takes in its result:
    /// read bytes are kept for the reader, a failure is returned (once).
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let State::Busy(task) = &mut self.state else {
            return Poll::Ready(Ok(()));
        };
        let joined = ready!(Pin::new(task).poll(cx));
        let (file, done) = match joined {
            Ok(r) => r,
            Err(e) => {
                self.state = State::Idle(None);
                return Poll::Ready(Err(io::Error::other(format!(
                    "a snapshot file call failed and lost the file: {e}"
                ))));
            }
        };
        self.state = State::Idle(Some(file));
        Poll::Ready(match done {
            Done::Read { at, bytes } => bytes.map(|bytes| {
                self.ready = Some(Ready {
                    at,
                    bytes,
                    taken: 0,
                })
            }),
            Done::Write(r) => r,
            Done::Sync(r) => r.map(|()| self.synced = true),
        })
    }

    /// Drops the bytes read ahead, keeping their buffer for the next read.
    fn recycle(&mut self) {
        if let Some(ready) = self.ready.take() {
            if ready.bytes.capacity() > self.spare.capacity() {
                self.spare = ready.bytes;
            }
        }
    }

    /// Runs `call` on the file on the blocking pool (the file must be
    /// idle: see `poll_idle`).
    fn start(
        &mut self,
        call: impl FnOnce(&mut PositionalFile) -> Done + Send + 'static,
    ) -> io::Result<()> {
        let State::Idle(slot) = &mut self.state else {
            return Err(io::Error::other(
                "a snapshot file call is already in progress",
            ));
        };
        let mut file = slot.take().ok_or_else(lost)?;
        self.state = State::Busy(tokio::task::spawn_blocking(move || {
            let done = call(&mut file);
            (file, done)
        }));
        Ok(())
    }
}

fn lost() -> io::Error {
    io::Error::other("the snapshot file was lost when a call on it failed")
}

impl AsyncRead for SnapshotFile {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(ready) = &mut this.ready {
                if ready.at == this.pos {
                    let left = &ready.bytes[ready.taken..];
                    let n = left.len().min(buf.remaining());
                    buf.put_slice(&left[..n]);
                    ready.taken += n;
                    ready.at += n as u64;
                    this.pos += n as u64;
                    if ready.taken == ready.bytes.len() && n > 0 {
                        this.recycle();
                    }
                    // An empty piece here is the end of the file.
                    return Poll::Ready(Ok(()));
                }
                this.recycle();
            }
            if matches!(this.state, State::Busy(_)) {
                ready!(this.poll_idle(cx))?;
                continue;
            }
            if buf.remaining() == 0 || this.pos >= this.len {
                return Poll::Ready(Ok(()));
            }
            let (at, want) = (this.pos, buf.remaining().min(MAX_PIECE));
            let mut bytes = std::mem::take(&mut this.spare);
            this.start(move |file| {
                // Zeroes only what the buffer never held.
                bytes.resize(want, 0);
                let read = file.read_at(at, &mut bytes).map_err(to_io);
                Done::Read {
                    at,
                    bytes: read.map(|n| {
                        bytes.truncate(n);
                        bytes
                    }),
                }
            })?;
        }
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_idle(cx))?;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let piece = data[..data.len().min(MAX_PIECE)].to_vec();
        let (at, n) = (this.pos, piece.len());
        this.start(move |file| Done::Write(file.write_at(at, &piece).map_err(to_io)))?;
        this.pos += n as u64;
        this.len = this.len.max(this.pos);
        this.recycle();
        this.synced = false;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Written bytes are in the kernel once their call finished;
        // durability is `shutdown`'s.
        self.get_mut().poll_idle(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.poll_idle(cx))?;
            if this.synced {
                return Poll::Ready(Ok(()));
            }
            this.start(|file| Done::Sync(file.sync().map_err(to_io)))?;
        }
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(self: Pin<&mut Self>, to: io::SeekFrom) -> io::Result<()> {
        let this = self.get_mut();
        let target = match to {
            io::SeekFrom::Start(n) => Some(n),
            io::SeekFrom::End(d) => this.len.checked_add_signed(d),
            io::SeekFrom::Current(d) => this.pos.checked_add_signed(d),
        };
        this.pos = target.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cannot seek to {to:?} in a snapshot file of {} bytes",
                    this.len
                ),
            )
        })?;
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        let this = self.get_mut();
        ready!(this.poll_idle(cx))?;
        Poll::Ready(Ok(this.pos))
    }
}

impl std::fmt::Debug for SnapshotFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("pos", &self.pos)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietio::{AccessMode, IoClass, IoEnv, IoOptions};
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

    /// Writes `data` in pieces of `piece` bytes, seeks back and rewrites a
    /// middle range, then reads the whole through the same handle and
    /// through a new one.
    async fn round_trip(mode: AccessMode) {
        let tmp = tempfile::tempdir().unwrap();
        let env = IoEnv::open(tmp.path(), IoOptions::default()).unwrap();
        if let Err(e) = env.resolve_explicit(IoClass::Backup, mode) {
            assert!(std::env::var_os("CI").is_none(), "CI must run this: {e}");
            eprintln!("skipping: {e}");
            return;
        }
        let path = tmp.path().join("snap");
        let file = env
            .create_positional_with_mode(&path, IoClass::Backup, mode)
            .unwrap();
        let mut f = SnapshotFile::new(file);
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
        for piece in data.chunks(777) {
            f.write_all(piece).await.unwrap();
        }
        f.seek(io::SeekFrom::Start(10_000)).await.unwrap();
        f.write_all(&data[10_000..12_345]).await.unwrap();
        f.shutdown().await.unwrap();
        assert_eq!(f.seek(io::SeekFrom::End(0)).await.unwrap(), 50_000);
        f.seek(io::SeekFrom::Start(0)).await.unwrap();
        let mut back = Vec::new();
        f.read_to_end(&mut back).await.unwrap();
        assert!(back == data);
        // Past the end: nothing, not an error.
        let mut more = [0u8; 10];
        assert_eq!(f.read(&mut more).await.unwrap(), 0);
        let e = f.seek(io::SeekFrom::Current(-60_000)).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        drop(f.into_file().await.unwrap());
        assert!(std::fs::read(&path).unwrap() == data);

        let mut r = SnapshotFile::new(
            env.open_positional_with_mode(&path, IoClass::Backup, mode)
                .unwrap(),
        );
        r.seek(io::SeekFrom::Start(4095)).await.unwrap();
        let mut part = vec![0u8; 5000];
        r.read_exact(&mut part).await.unwrap();
        assert_eq!(part, &data[4095..9095]);
        // A file opened for reading refuses writes, and says so.
        r.write_all(b"x").await.unwrap();
        let e = r.flush().await.unwrap_err();
        assert!(e.to_string().contains("opened for reading"), "{e}");
    }

    #[tokio::test]
    async fn direct_pieces_seeks_and_rewrites_read_back_whole() {
        round_trip(AccessMode::Direct).await;
    }

    #[tokio::test]
    async fn buffered_pieces_seeks_and_rewrites_read_back_whole() {
        round_trip(AccessMode::Buffered).await;
    }
}
