//! Debian's docker-registry (the CNCF distribution registry) on 127.0.0.1 for the tests that
//! read `registry:` references: anonymous, htpasswd basic auth, or TLS with a CA made here.

use super::{require_tool, run};
use std::fs;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub const USER: &str = "memlint";
pub const PASSWORD: &str = "s3cret-pass";

/// A registry process on a free loopback port, stopped when dropped.
pub struct Registry {
    pub child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub tls: bool,
    pub basic_auth: bool,
}

#[derive(Default)]
pub struct Setup {
    pub basic_auth: bool,
    pub tls: bool,
}

impl Registry {
    pub fn start(setup: Setup) -> Registry {
        require_tool("docker-registry");
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        if setup.tls {
            make_certificates(dir.path());
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                dir.path().join("server.crt").display(),
                dir.path().join("server.key").display()
            ));
        }
        if setup.basic_auth {
            require_tool("htpasswd");
            let out = run(Command::new("htpasswd").args(["-Bbn", USER, PASSWORD]));
            fs::write(dir.path().join("htpasswd"), out.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: memlint-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        fs::write(dir.path().join("config.yml"), config).unwrap();
        let log = fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry starts");
        let registry = Registry {
            child,
            port,
            dir,
            tls: setup.tls,
            basic_auth: setup.basic_auth,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "docker-registry did not listen on {port}: {}",
                fs::read_to_string(registry.dir.path().join("registry.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Where the registry keeps a blob's bytes, to take them away or change them.
    pub fn blob_data(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// Pushes an OCI layout (or one image of it) with skopeo.
    pub fn push(&self, source: &str, name: &str, extra: &[&str]) {
        require_tool("skopeo");
        let mut cmd = Command::new("skopeo");
        cmd.args(["copy", "--quiet", "--dest-tls-verify=false"]);
        if self.basic_auth {
            cmd.arg(format!("--dest-creds={USER}:{PASSWORD}"));
        }
        cmd.args(extra)
            .arg(source)
            .arg(format!("docker://{}/{name}", self.host()));
        run(&mut cmd);
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA and a server certificate for 127.0.0.1 signed by it.
pub fn make_certificates(dir: &Path) {
    require_tool("openssl");
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    run(Command::new("openssl")
        .args(["req", "-x509"])
        .args(ec)
        .args([
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=memlint test CA",
        ])
        .args([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ])
        .current_dir(dir));
    run(Command::new("openssl")
        .arg("req")
        .args(ec)
        .args([
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .current_dir(dir));
    fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(Command::new("openssl")
        .args([
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
        ])
        .args([
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ])
        .current_dir(dir));
}
