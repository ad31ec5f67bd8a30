//! A private PostgreSQL cluster for the tests: Debian's server (installed when missing), a cluster
//! made in a temporary folder only its owner can enter, on a free loopback port, with a password
//! made for this run; stopped and removed when dropped (and, if a run was killed before, at the
//! next start). The package's own cluster and service are not used (removed when we install it).
//! `initdb` refuses to run as root (CI runs as root): then the cluster is made and run as the
//! `postgres` user Debian's package creates.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::tools::{debian_install, is_root, run, say};

/// Where the clusters' folders are made (not `$TMPDIR`: the `postgres` user must reach it).
const PARENT: &str = "/tmp";
/// Their folders' name before the process id.
const PREFIX: &str = "glassbox-pg-";

/// What a cluster is for: its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The tests: durability is not what they check, so no flushes at all.
    Tests,
    /// The benchmarks: flushed as a deployment would be, with commits acknowledged before their
    /// flush (`synchronous_commit = off`: a crash may lose the last commits, never corrupt the
    /// database; what SQLite's WAL with `synchronous = NORMAL` promises), and every statement
    /// counted (`pg_stat_statements`).
    Bench,
}

/// A running cluster; stopped and deleted when dropped.
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    password: String,
}

impl Cluster {
    /// Makes and starts a cluster for the tests (installing Debian's `postgresql` first if needed).
    pub fn start() -> Result<Self> {
        Self::start_for(Purpose::Tests)
    }

    /// Makes and starts a cluster with the settings `purpose` needs.
    pub fn start_for(purpose: Purpose) -> Result<Self> {
        let bin = match server_bin() {
            Some(bin) => bin,
            None => {
                debian_install(&["postgresql"])?;
                let bin =
                    server_bin().context("PostgreSQL's initdb is missing after apt-get install")?;
                drop_package_cluster(&bin);
                bin
            }
        };
        remove_stale(&bin);
        let dir = Path::new(PARENT).join(format!("{PREFIX}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let password = random_hex(16)?;
        let mut cluster = Self {
            bin,
            dir,
            port: 0,
            password,
        };
        cluster.own()?;
        let data = cluster.dir.join("data");
        let pwfile = cluster.dir.join("pw");
        std::fs::write(&pwfile, &cluster.password)?;
        cluster.own()?;
        run(cluster
            .command("initdb")
            .args(["--auth=scram-sha-256", "--username=postgres"])
            .args(["--encoding=UTF8", "--locale=C", "--no-sync"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .arg("-D")
            .arg(&data))?;
        std::fs::remove_file(&pwfile)?;
        // A port is free when chosen, and may be taken before the server binds it: a few tries.
        for attempt in 1..=3 {
            cluster.port = free_port()?;
            say(format!(
                "starting a private PostgreSQL cluster on 127.0.0.1:{} in {}",
                cluster.port,
                cluster.dir.display()
            ));
            let settings = match purpose {
                Purpose::Tests => "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
                Purpose::Bench => {
                    "-c synchronous_commit=off -c shared_preload_libraries=pg_stat_statements \
                     -c pg_stat_statements.track=all"
                }
            };
            let options = format!(
                "-c port={} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
                 {settings} -c max_connections=300",
                cluster.port,
                cluster.dir.display()
            );
            let started = run(cluster
                .command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(cluster.dir.join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]));
            match started {
                Ok(()) => return Ok(cluster),
                Err(e) if attempt == 3 => return Err(e),
                Err(_) => say("the port was taken; trying another"),
            }
        }
        bail!("the cluster did not start")
    }

    /// The URL of its `postgres` database (the tests make their own databases from it).
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres:{}@127.0.0.1:{}/postgres",
            self.password, self.port
        )
    }

    /// Gives the folder to the user the server runs as, and to it alone.
    fn own(&self) -> Result<()> {
        if is_root() {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&self.dir))?;
        }
        run(Command::new("chmod").arg("700").arg(&self.dir))
    }

    /// `program` of the server's binaries, run from the cluster's folder (as the `postgres` user
    /// when we are root).
    fn command(&self, program: &str) -> Command {
        as_server_user(&self.bin.join(program), &self.dir)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        stop(&self.bin, &self.dir);
    }
}

/// `program`, run from `dir`, as the `postgres` user when we are root.
fn as_server_user(program: &Path, dir: &Path) -> Command {
    let mut cmd = if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    };
    cmd.current_dir(dir);
    cmd
}

/// Stops the cluster in `dir` (if it runs) and removes the folder.
fn stop(bin: &Path, dir: &Path) {
    let data = dir.join("data");
    if data.join("postmaster.pid").exists() {
        let _ = as_server_user(&bin.join("pg_ctl"), dir)
            .arg("-D")
            .arg(&data)
            .args(["-m", "fast", "-w", "stop"])
            .output();
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Clusters of runs that were killed before they could stop theirs.
fn remove_stale(bin: &Path) {
    let Ok(entries) = std::fs::read_dir(PARENT) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        // Still running: another test run's.
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        stop(bin, &entry.path());
    }
}

/// Debian's package makes a cluster of its own and starts it as a service: not ours to keep
/// running (only called right after we installed the package).
fn drop_package_cluster(bin: &Path) {
    let Some(version) = bin
        .parent()
        .and_then(|v| v.file_name())
        .and_then(|v| v.to_str())
    else {
        return;
    };
    let sudo: &[&str] = if is_root() { &[] } else { &["sudo"] };
    let mut all: Vec<&str> = sudo.to_vec();
    all.extend(["pg_dropcluster", "--stop", version, "main"]);
    let _ = Command::new(all[0]).args(&all[1..]).output();
}

/// The newest installed PostgreSQL's binaries (`/usr/lib/postgresql/<version>/bin`).
fn server_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// A loopback port nothing listens on now.
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// `bytes` random bytes from the kernel, as hex.
fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}
