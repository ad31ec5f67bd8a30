//! A private PostgreSQL cluster for the tests: Debian's server (installed when missing), a cluster
//! made in a temporary folder and listening on a free loopback port only, stopped and removed when
//! dropped. No system service is used. `initdb` refuses to run as root (CI runs as root): then the
//! cluster is made and run as the `postgres` user Debian's package creates.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::tools::{debian_install, is_root, run, say};

/// A running cluster; stopped and deleted when dropped.
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    /// Makes and starts a cluster (installing Debian's `postgresql` first if needed).
    pub fn start() -> Result<Self> {
        let bin = match server_bin() {
            Some(bin) => bin,
            None => {
                debian_install(&["postgresql"])?;
                server_bin().context("PostgreSQL's initdb is missing after apt-get install")?
            }
        };
        let dir = std::env::temp_dir().join(format!("glassbox-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        if is_root() {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir))?;
        }
        let port = free_port()?;
        let cluster = Self { bin, dir, port };
        let data = cluster.dir.join("data");
        say(format!(
            "starting a private PostgreSQL cluster on 127.0.0.1:{port} in {}",
            cluster.dir.display()
        ));
        run(cluster
            .command("initdb")
            .args([
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--locale=C",
            ])
            .arg("--no-sync")
            .arg("-D")
            .arg(&data))?;
        // Durability is not what the tests measure: no fsync, so they run as fast as they can.
        let options = format!(
            "-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
             -c max_connections=300",
            cluster.dir.display()
        );
        run(cluster
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(cluster.dir.join("server.log"))
            .args(["-w", "-t", "60", "-o", &options, "start"]))?;
        Ok(cluster)
    }

    /// The URL of its `postgres` database (the tests make their own databases from it).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `program` of the server's binaries, run as the `postgres` user when we are root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if is_root() {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "fast", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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
