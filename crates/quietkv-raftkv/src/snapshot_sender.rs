//! The thread that sends snapshot chunks to other nodes when snapshots are
//! sent at the idle CPU priority (`--snapshot-send-priority idle`).
//!
//! Sending a snapshot moves the whole database over the network: each
//! chunk is copied into a request body and then into the socket (on one
//! machine, the receiver's share of the protocol runs in that same call).
//! On a leader that also serves reads, those copies take the CPUs its
//! readers need, and a reader woken while one runs waits until it ends: a
//! lower niceness does not help, because the scheduler lets a running
//! thread finish its slice before a woken one of the same policy. A thread
//! at the idle policy gives its CPU to any woken thread of the normal
//! policy at once, so a snapshot sent from one takes only the CPU the
//! node's own work (reads, writes, raft) leaves. The chunk's file reads
//! stay in the snapshot's I/O class (`quietkv_raft::SnapshotIo`); this
//! only decides whose turn the CPU is.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The CPU priority snapshot chunks are sent at.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SendPriority {
    /// From a thread of their own at the idle scheduling policy: a snapshot
    /// takes only the CPU the node's own work leaves, and slows down (it
    /// never stops entirely) while the node is busy.
    Idle,
    /// From the node's own threads, at the priority of its other work.
    Normal,
}

impl std::fmt::Display for SendPriority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendPriority::Idle => "idle",
            SendPriority::Normal => "normal",
        })
    }
}

/// A thread running its own async runtime at the idle scheduling policy,
/// with an HTTP client whose connections live on that runtime (a
/// connection is driven by the runtime that opened it, so sharing the
/// node's client would move the sending back onto the node's threads).
pub struct SnapshotSender {
    runtime: Handle,
    client: reqwest::Client,
    /// Dropped with the sender: its thread then ends.
    _stop: oneshot::Sender<()>,
}

/// The sending thread's name, as `ps -L` and `/proc/<pid>/task/*/comm`
/// show it.
pub const THREAD_NAME: &str = "snapshot-send";

impl SnapshotSender {
    /// Starts the sending thread, which sends with `client`.
    pub fn start(client: reqwest::Client) -> Result<SnapshotSender, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the snapshot sender's runtime: {e}"))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let idle = quietio::sys::set_thread_idle_policy();
                let ok = idle.is_ok();
                let _ = ready_tx.send(idle);
                if ok {
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                }
            })
            .map_err(|e| format!("starting the snapshot sender's thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(SnapshotSender {
                runtime: handle,
                client,
                _stop: stop,
            }),
            Ok(Err(e)) => Err(format!(
                "moving the snapshot sender's thread to the idle CPU priority: {e}"
            )),
            Err(_) => Err("the snapshot sender's thread ended before it started".into()),
        }
    }

    /// The client to send with from [`run`](Self::run)'s futures.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Runs `work` on the sending thread and waits for it. Dropping the
    /// returned future (openraft gave up on the chunk) cancels the work.
    pub fn run<F>(&self, work: F) -> Running<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Running(self.runtime.spawn(work))
    }
}

/// Work on the sending thread; see [`SnapshotSender::run`].
pub struct Running<T>(JoinHandle<T>);

impl<T> Future for Running<T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map_err(|e| format!("sending a snapshot chunk failed on the sender's thread: {e}"))
    }
}

impl<T> Drop for Running<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scheduling policy of the calling thread.
    fn own_policy() -> libc::c_int {
        // SAFETY: sched_getscheduler only reads its integer argument; 0 is
        // the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[tokio::test]
    async fn work_runs_on_a_thread_of_its_own_at_the_idle_policy() {
        let sender = SnapshotSender::start(reqwest::Client::new()).unwrap();
        let (name, policy) = sender
            .run(async {
                let t = std::thread::current();
                (t.name().map(str::to_string), own_policy())
            })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some(THREAD_NAME));
        assert_eq!(policy, libc::SCHED_IDLE);
        // The node's own threads keep their policy.
        assert_ne!(own_policy(), libc::SCHED_IDLE);
    }

    #[tokio::test]
    async fn dropping_the_wait_cancels_the_work() {
        let sender = SnapshotSender::start(reqwest::Client::new()).unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let running = sender.run(async move {
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
            let _ = tx.send(());
        });
        drop(running);
        // The task was aborted: its end of the channel is dropped unsent.
        assert!(rx.await.is_err());
    }

    #[tokio::test]
    async fn the_thread_ends_with_the_sender() {
        let sender = SnapshotSender::start(reqwest::Client::new()).unwrap();
        let handle = sender.runtime.clone();
        drop(sender);
        // Once the runtime's thread has left block_on and dropped the
        // runtime, spawning on it is refused.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let spawned = handle.spawn(async {});
            match spawned.await {
                Err(e) if e.is_cancelled() => break,
                _ => {}
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the thread still runs"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}
