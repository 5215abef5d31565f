//! The README's one-line cluster: `quietkv-raftkv cluster --nodes 3 --dir
//! DIR` starts three nodes that serve reads and writes, stops them on
//! SIGTERM (as on Ctrl-C), and the same command on the same directory
//! brings the same cluster back with its data.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{put_once, WAIT};
use tokio::time::Instant;

/// The launcher process; dropping it kills it (its nodes then get SIGTERM
/// from the kernel, as their parent died).
struct Launcher {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Launcher {
    /// Starts the launcher and returns it with the node addresses it
    /// printed, once it says the cluster is up.
    fn start(dir: &Path) -> (Launcher, Vec<String>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_quietkv-raftkv"))
            .args(["cluster", "--nodes", "3", "--dir"])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let launcher = Launcher { child, lines };
        let mut addrs = Vec::new();
        loop {
            let line = launcher
                .lines
                .recv_timeout(WAIT)
                .unwrap_or_else(|e| panic!("the launcher did not report a running cluster: {e}"));
            if let Some(rest) = line.trim_start().strip_prefix("node ") {
                if let Some((_, url)) = rest.split_once(": http://") {
                    addrs.push(url.split_whitespace().next().unwrap().to_string());
                }
            }
            if line.starts_with("Ctrl-C stops the cluster") {
                break;
            }
        }
        assert_eq!(addrs.len(), 3, "three node addresses printed: {addrs:?}");
        (launcher, addrs)
    }

    /// Sends SIGTERM and waits for a clean exit, returning what it printed
    /// meanwhile.
    fn stop(mut self) -> Vec<String> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = std::time::Instant::now() + WAIT;
        let exit = loop {
            if let Some(exit) = self.child.try_wait().unwrap() {
                break exit;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the launcher did not stop within {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(exit.success(), "the launcher exited with {exit}");
        self.lines.try_iter().collect()
    }
}

async fn get(client: &reqwest::Client, addr: &str, key: &str) -> Result<String, String> {
    let response = client
        .get(format!("http://{addr}/kv/{key}"))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(text)
    } else {
        Err(format!("{status}: {text}"))
    }
}

/// Retries `attempt` until it succeeds (the cluster may still be settling
/// its first election) or `WAIT` passes.
async fn eventually<T, F: std::future::Future<Output = Result<T, String>>>(
    what: &str,
    attempt: impl Fn() -> F,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        match attempt().await {
            Ok(t) => return t,
            Err(e) => {
                assert!(Instant::now() < deadline, "{what}: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_command_serves_stops_and_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();

    let (launcher, addrs) = Launcher::start(tmp.path());
    // Written through one node, read through another (redirected to the
    // leader as needed).
    eventually("put", || put_once(&client, &addrs[1], "greeting", "hello")).await;
    let value = eventually("get", || get(&client, &addrs[2], "greeting")).await;
    assert_eq!(value, "hello");

    let printed = launcher.stop();
    for id in 1..=3 {
        assert!(
            printed
                .iter()
                .any(|l| l.starts_with(&format!("node {id} stopped"))),
            "node {id} stopped: {printed:?}"
        );
    }
    for addr in &addrs {
        assert!(
            client
                .get(format!("http://{addr}/metrics"))
                .send()
                .await
                .is_err(),
            "{addr} still answers after the launcher stopped"
        );
    }

    // Same command, same directory: the same nodes, on the same addresses,
    // with the data.
    let (launcher, again) = Launcher::start(tmp.path());
    assert_eq!(again, addrs);
    let value = eventually("get after restart", || get(&client, &addrs[0], "greeting")).await;
    assert_eq!(value, "hello");
    launcher.stop();
}
