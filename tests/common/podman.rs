//! A private Podman for the tests that read `docker:` and `podman:` references: its storage
//! (vfs), runtime folders and config in one temp folder, and `podman system service` serving
//! the Docker API on a socket there.

use super::{require_tool, run};
use serde_json::Value;
use std::fs;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A private Podman: storage, runtime folders and config in one temp folder, so the tests
/// neither see nor touch the machine's images.
pub struct Podman {
    pub dir: tempfile::TempDir,
}

impl Podman {
    pub fn new() -> Podman {
        require_tool("podman");
        require_tool("skopeo");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in ["graph", "run", "xdg", "tmp"] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        fs::write(
            root.join("storage.conf"),
            format!(
                "[storage]\ndriver = \"vfs\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
                root.join("graph").display(),
                root.join("run").display()
            ),
        )
        .unwrap();
        // cgroupfs and a file event log: no systemd or journald in a container.
        fs::write(
            root.join("containers.conf"),
            format!(
                "[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\nevents_logfile_path = \"{}\"\n",
                root.join("events.log").display()
            ),
        )
        .unwrap();
        Podman { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn socket(&self) -> PathBuf {
        self.path("podman.sock")
    }

    /// The environment that makes `podman` (run by the test or by memlint) use this storage,
    /// with nothing inherited that points at another engine.
    pub fn env(&self, cmd: &mut Command) {
        cmd.env("CONTAINERS_STORAGE_CONF", self.path("storage.conf"))
            .env("CONTAINERS_CONF", self.path("containers.conf"))
            .env("XDG_RUNTIME_DIR", self.path("xdg"))
            .env("TMPDIR", self.path("tmp"))
            .env_remove("CONTAINER_HOST")
            .env_remove("CONTAINER_CONNECTION")
            .env_remove("DOCKER_HOST")
            .env_remove("DOCKER_TLS_VERIFY")
            .env_remove("DOCKER_CONTEXT")
            // No context from the machine's Docker config.
            .env("DOCKER_CONFIG", self.path("no-docker-config"))
            // It would clash with --no-cache; the tests choose the cache themselves.
            .env_remove("MEMLINT_CACHE_DIR");
    }

    pub fn podman(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("podman");
        cmd.args(args);
        self.env(&mut cmd);
        run(&mut cmd)
    }

    /// Loads an OCI layout as `app:1` through a docker-archive, as `docker save` output
    /// would arrive.
    pub fn load(&self, oci_reference: &str) {
        let layout = oci_reference.strip_prefix("oci-dir:").unwrap_or(oci_reference);
        let archive = self.path("app.tar");
        run(Command::new("skopeo").args([
            "copy",
            "--quiet",
            &format!("oci:{layout}"),
            &format!("docker-archive:{}:app:1", archive.display()),
        ]));
        self.podman(&["load", "--quiet", "-i", &archive.display().to_string()]);
        fs::remove_file(&archive).unwrap();
    }

    /// Starts `podman system service` on the socket; it is stopped when the guard drops,
    /// also when the test panics.
    pub fn serve(&self) -> Service {
        let mut cmd = Command::new("podman");
        cmd.args([
            "system",
            "service",
            "--time=0",
            &format!("unix://{}", self.socket().display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(fs::File::create(self.path("service.log")).unwrap()));
        self.env(&mut cmd);
        let child = cmd.spawn().expect("podman system service starts");
        let service = Service { child };
        let start = Instant::now();
        while UnixStream::connect(self.socket()).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "podman system service did not open {} within a minute:\n{}",
                self.socket().display(),
                fs::read_to_string(self.path("service.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        service
    }

    /// Runs memlint with this Podman's environment plus `vars`.
    pub fn memlint(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_memlint"));
        cmd.args(args).env("NO_COLOR", "1");
        self.env(&mut cmd);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().expect("memlint runs")
    }

    pub fn json(&self, args: &[&str], vars: &[(&str, &str)]) -> Value {
        let out = self.memlint(args, vars);
        assert!(
            out.status.code() == Some(0) || out.status.code() == Some(1),
            "memlint {args:?} with {vars:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("memlint prints JSON")
    }
}

pub struct Service {
    pub child: Child,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
