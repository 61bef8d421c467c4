//! Hostile registries and token services on 127.0.0.1, written here with std's TcpListener:
//! endless token and error bodies (bounded by `max_json_bytes` and the error-body cap),
//! a registry that sends a byte every 30 s (`--timeout`, `idle_timeout_secs`), a token
//! service on plain HTTP on another host (no credentials sent), `hook run` not sending
//! explicit credentials to a registry that `.memlint.toml` names, `lint --k8s` sending them
//! only to a registry the command line names, token realms and redirects into another kind of
//! network refused, and a fleet on a registry that never answers ended by its bounds. Every
//! server stops by itself.

use crate::common;

use base64::Engine as _;
use common::measure::*;
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a handler answers with, given the request's path and head.
type Handler = dyn Fn(&str, &str, &mut TcpStream) + Send + Sync;

/// A server on a free loopback port that accepts for `lifetime`, then stops; it keeps the
/// head of every request it got.
struct Server {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(
        lifetime: Duration,
        handler: impl Fn(&str, &str, &mut TcpStream) + Send + Sync + 'static,
    ) -> Server {
        Server::start_on("127.0.0.1", lifetime, handler)
    }

    /// A server on another loopback address (127.0.0.2: another host, the same network).
    fn start_on(
        address: &str,
        lifetime: Duration,
        handler: impl Fn(&str, &str, &mut TcpStream) + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind((address, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        let handler: Arc<Handler> = Arc::new(handler);
        std::thread::spawn(move || {
            let end = Instant::now() + lifetime;
            while Instant::now() < end {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        let handler = handler.clone();
                        let kept = kept.clone();
                        std::thread::spawn(move || {
                            let _ = stream.set_nonblocking(false);
                            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                            let mut head = Vec::new();
                            let mut byte = [0u8; 1];
                            while !head.ends_with(b"\r\n\r\n")
                                && head.len() < 64 * 1024
                                && stream.read(&mut byte).unwrap_or(0) == 1
                            {
                                head.push(byte[0]);
                                // A TLS handshake (memlint tries HTTPS first): hang up, as a
                                // plain HTTP server's error answer would make it fall back.
                                if head == [0x16] {
                                    return;
                                }
                            }
                            let head = String::from_utf8_lossy(&head).into_owned();
                            let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                            kept.lock().unwrap().push(head.clone());
                            handler(&path, &head, &mut stream);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Server { port, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut text = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.write_all(body);
}

/// A head without a length, then `a`s without end: at most 8 GiB or 60 s, or until the
/// client hangs up.
fn endless(stream: &mut TcpStream, status: &str, content_type: &str) {
    let head = format!("HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let piece = vec![b'a'; 64 * 1024];
    let end = Instant::now() + Duration::from_secs(60);
    for _ in 0..(8u64 << 30) / piece.len() as u64 {
        if Instant::now() > end || stream.write_all(&piece).is_err() {
            return;
        }
    }
}

/// A head that promises `len` bytes, then one byte every 30 s, for at most 3 minutes.
fn drip(stream: &mut TcpStream, len: usize) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    for _ in 0..6 {
        if stream.write_all(b" ").is_err() {
            return;
        }
        std::thread::sleep(Duration::from_secs(30));
    }
}

/// A small real image: its manifest, and its blobs by digest.
struct Served {
    manifest: Vec<u8>,
    blobs: Vec<(String, Vec<u8>)>,
}

fn small_image() -> Served {
    let layer = LayerSpec::new(Comp::Gzip)
        .dir("etc")
        .file("etc/os-release", b"ID=debian\n");
    let (blob, media_type, diff_id) = layer.blob();
    let config = ImageSpec::new("amd64").layer(layer).config_json(&[diff_id]);
    let desc = |bytes: &[u8], mt: &str| serde_json::json!({"mediaType": mt, "digest": format!("sha256:{}", sha256(bytes)), "size": bytes.len()});
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": desc(&config, "application/vnd.oci.image.config.v1+json"),
        "layers": [desc(&blob, media_type)],
    });
    Served {
        manifest: serde_json::to_vec(&manifest).unwrap(),
        blobs: vec![
            (format!("sha256:{}", sha256(&config)), config),
            (format!("sha256:{}", sha256(&blob)), blob),
        ],
    }
}

/// Answers the manifest and blob requests of `image` (any repository, any tag).
fn serve_image(image: &Served, path: &str, stream: &mut TcpStream) -> bool {
    if path.contains("/manifests/") {
        respond(
            stream,
            "200 OK",
            &[("Content-Type", "application/vnd.oci.image.manifest.v1+json")],
            &image.manifest,
        );
        return true;
    }
    for (digest, bytes) in &image.blobs {
        if path.ends_with(&format!("/blobs/{digest}")) {
            respond(stream, "200 OK", &[], bytes);
            return true;
        }
    }
    false
}

/// Runs memlint (fresh cache, no docker config, no inherited limits or credentials) with a
/// deadline, measuring its peak memory (`common::measure`).
fn run(args: &[&str], env: &[(&str, &str)], cwd: Option<&Path>) -> Run {
    let cache = tempfile::tempdir().unwrap();
    let r = run_watched(
        args,
        |cmd| {
            cmd.env("MEMLINT_CACHE_DIR", cache.path())
                .env("DOCKER_CONFIG", cache.path().join("no-docker-config"))
                .env_remove("MEMLINT_LIMITS")
                .env_remove("MEMLINT_USERNAME")
                .env_remove("MEMLINT_PASSWORD");
            if let Some(d) = cwd {
                cmd.current_dir(d);
            }
            for (k, v) in env {
                cmd.env(k, v);
            }
        },
        Duration::from_secs(120),
    );
    eprintln!(
        "memlint {args:?}: exit {:?} in {:?}, peak {} KiB",
        r.code(),
        r.elapsed,
        r.peak_kib
    );
    r
}

const MIB_256_IN_KIB: u64 = 256 * 1024;

#[test]
fn an_endless_token_answer_stops_at_max_json_bytes() {
    let server = Server::start(Duration::from_secs(90), |path, _head, stream| {
        if path == "/v2/" {
            let port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
            let challenge = format!("Bearer realm=\"http://127.0.0.1:{port}/token\",service=\"hostile\"");
            respond(
                stream,
                "401 Unauthorized",
                &[("WWW-Authenticate", &challenge)],
                b"",
            );
        } else if path.starts_with("/token") {
            endless(stream, "200 OK", "application/json");
        } else {
            respond(stream, "404 Not Found", &[], b"");
        }
    });
    let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
    let r = run(&["inspect", &reference], &[], None);
    let err = error_text(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("max_json_bytes") && err.contains("token service"),
        "{err}"
    );
    assert!(r.elapsed < Duration::from_secs(20), "{:?}", r.elapsed);
    assert!(r.peak_kib < MIB_256_IN_KIB, "peak {} KiB", r.peak_kib);
    // Anonymous: the token service got the request, without credentials.
    assert!(server.heads().iter().any(|h| h.starts_with("GET /token")));
}

#[test]
fn endless_error_bodies_of_blobs_and_manifests_are_cut_short() {
    let image = Arc::new(small_image());
    for status in ["500 Internal Server Error", "404 Not Found"] {
        let served = image.clone();
        let server = Server::start(Duration::from_secs(90), move |path, _head, stream| {
            if path == "/v2/" {
                respond(stream, "200 OK", &[], b"{}");
            } else if path.contains("/manifests/") {
                serve_image(&served, path, stream);
            } else {
                endless(stream, status, "application/json");
            }
        });
        let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
        let r = run(&["inspect", &reference], &[], None);
        let err = error_text(&r.out);
        assert_eq!(r.out.status.code(), Some(2), "{status}: {err}");
        assert!(err.contains(&status[..3]), "{status}: {err}");
        assert!(r.elapsed < Duration::from_secs(30), "{status}: {:?}", r.elapsed);
        assert!(r.peak_kib < MIB_256_IN_KIB, "{status}: peak {} KiB", r.peak_kib);

        // The manifest's refusal too.
        let server = Server::start(Duration::from_secs(90), move |path, _head, stream| {
            if path == "/v2/" {
                respond(stream, "200 OK", &[], b"{}");
            } else {
                endless(stream, status, "text/plain");
            }
        });
        let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
        let r = run(&["inspect", &reference], &[], None);
        assert_eq!(r.out.status.code(), Some(2), "{status}: {}", error_text(&r.out));
        assert!(r.elapsed < Duration::from_secs(30), "{status}: {:?}", r.elapsed);
        assert!(r.peak_kib < MIB_256_IN_KIB, "{status}: peak {} KiB", r.peak_kib);
    }
}

/// A registry whose manifests come one byte every 30 s.
fn dripping_registry() -> Server {
    Server::start(Duration::from_secs(120), |path, _head, stream| {
        if path == "/v2/" {
            respond(stream, "200 OK", &[], b"{}");
        } else {
            drip(stream, 1000);
        }
    })
}

#[test]
fn timeout_ends_a_registry_that_sends_a_byte_every_30_seconds() {
    let server = dripping_registry();
    let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
    let r = run(&["lint", "--timeout", "20s", &reference], &[], None);
    let err = error_text(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--timeout of 20s") && err.contains("--timeout 1m20s"),
        "{err}"
    );
    assert!(
        r.elapsed >= Duration::from_secs(19) && r.elapsed < Duration::from_secs(29),
        "{:?}",
        r.elapsed
    );
}

#[test]
fn the_idle_timeout_ends_a_silent_transfer_and_names_its_limit() {
    let server = dripping_registry();
    let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
    let r = run(
        &[
            "inspect",
            "--timeout",
            "0",
            "--limit",
            "idle_timeout_secs=2",
            &reference,
        ],
        &[],
        None,
    );
    let err = error_text(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("idle_timeout_secs") && err.contains("--limit idle_timeout_secs=8"),
        "{err}"
    );
    assert!(r.elapsed < Duration::from_secs(15), "{:?}", r.elapsed);

    // A layer that stalls: the error names the layer and the limit.
    let image = small_image();
    let layer = image.blobs[1].0.clone();
    let server = Server::start(Duration::from_secs(120), move |path, _head, stream| {
        if path == "/v2/" {
            respond(stream, "200 OK", &[], b"{}");
        } else if path.ends_with(&layer) {
            drip(stream, 1000);
        } else {
            serve_image(&image, path, stream);
        }
    });
    let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
    let r = run(
        &[
            "inspect",
            "--no-cache",
            "--limit",
            "idle_timeout_secs=2",
            &reference,
        ],
        &[],
        None,
    );
    let err = error_text(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("layer 1") && err.contains("idle_timeout_secs"),
        "{err}"
    );
    assert!(r.elapsed < Duration::from_secs(15), "{:?}", r.elapsed);
}

#[test]
fn a_timeout_ends_one_image_and_the_others_are_still_linted() {
    let server = dripping_registry();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    write_oci_dir(
        &good,
        &ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Gzip).dir("etc")),
        "v1",
    );
    let slow = format!("registry:127.0.0.1:{}/app:1", server.port);
    let good_ref = format!("oci-dir:{}", good.display());
    // Each image has its own deadline: the slow one first must not eat the next one's time.
    let r = run(
        &[
            "lint",
            "--format",
            "json",
            "--timeout",
            "3s",
            &slow,
            &good_ref,
            &slow,
        ],
        &[],
        None,
    );
    let err = error_text(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("--timeout of 3s").count(), 2, "{err}");
    let stdout = String::from_utf8_lossy(&r.out.stdout);
    assert!(stdout.contains(&good.display().to_string()), "{stdout}");
    assert!(r.elapsed < Duration::from_secs(15), "{:?}", r.elapsed);
}

#[test]
fn credentials_never_go_to_a_plain_http_token_service_on_another_host() {
    let server = Server::start(Duration::from_secs(60), |path, _head, stream| {
        if path == "/v2/" {
            respond(
                stream,
                "401 Unauthorized",
                &[(
                    "WWW-Authenticate",
                    "Bearer realm=\"http://token.memlint.invalid/token\",service=\"hostile\"",
                )],
                b"",
            );
        } else {
            respond(stream, "404 Not Found", &[], b"");
        }
    });
    let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
    let creds = [("MEMLINT_USERNAME", "alice"), ("MEMLINT_PASSWORD", "s3cret")];
    let r = run(&["inspect", &reference], &creds, None);
    let err = error_text(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("token.memlint.invalid/token")
            && err.contains("plain HTTP")
            && err.contains("--insecure-registry"),
        "{err}"
    );
    assert!(err.contains("memlint::insecure_realm"), "{err}");
    // Without credentials there is nothing to protect: the token service is asked (and, on a
    // name that does not resolve, cannot be reached), which is another error.
    let r = run(&["inspect", &reference], &[], None);
    assert_eq!(r.out.status.code(), Some(2));
    assert!(
        !error_text(&r.out).contains("insecure_realm"),
        "{}",
        error_text(&r.out)
    );
    // A host the user named with --insecure-registry may get them.
    let r = run(
        &[
            "inspect",
            "--insecure-registry",
            "token.memlint.invalid",
            &reference,
        ],
        &creds,
        None,
    );
    assert_eq!(r.out.status.code(), Some(2));
    assert!(
        !error_text(&r.out).contains("insecure_realm"),
        "{}",
        error_text(&r.out)
    );
}

#[test]
fn credentials_go_to_a_plain_http_token_service_on_loopback() {
    let image = small_image();
    let server = Server::start(Duration::from_secs(60), move |path, head, stream| {
        let port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
        if path == "/v2/" {
            let challenge = format!("Bearer realm=\"http://127.0.0.1:{port}/token\",service=\"r\"");
            respond(
                stream,
                "401 Unauthorized",
                &[("WWW-Authenticate", &challenge)],
                b"",
            );
        } else if path.starts_with("/token") {
            respond(stream, "200 OK", &[], br#"{"token":"t0ken"}"#);
        } else if head.contains("Bearer t0ken") && serve_image(&image, path, stream) {
        } else {
            respond(stream, "401 Unauthorized", &[], b"");
        }
    });
    let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
    let creds = [("MEMLINT_USERNAME", "alice"), ("MEMLINT_PASSWORD", "s3cret")];
    let r = run(&["inspect", &reference], &creds, None);
    assert_eq!(r.out.status.code(), Some(0), "{}", error_text(&r.out));
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("alice:s3cret")
    );
    let heads = server.heads();
    assert!(
        heads
            .iter()
            .any(|h| h.starts_with("GET /token") && h.contains(&basic)),
        "{heads:?}"
    );
}

#[test]
fn hook_run_does_not_send_explicit_credentials_to_a_registry_the_config_names() {
    let image = small_image();
    let server = Server::start(Duration::from_secs(60), move |path, head, stream| {
        if path == "/v2/" {
            respond(stream, "200 OK", &[], b"{}");
        } else if head.to_ascii_lowercase().contains("authorization: basic") {
            // Anything with credentials is served, so that both runs end alike.
            serve_image(&image, path, stream);
        } else if !serve_image(&image, path, stream) {
            respond(stream, "404 Not Found", &[], b"");
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
    std::fs::write(
        dir.path().join(".memlint.toml"),
        format!("images = [\"{reference}\"]\n"),
    )
    .unwrap();
    let creds = [("MEMLINT_USERNAME", "alice"), ("MEMLINT_PASSWORD", "s3cret")];
    let basic = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
    let r = run(&["hook", "run"], &creds, Some(dir.path()));
    let err = error_text(&r.out);
    assert!(
        err.contains("are not sent to the registries .memlint.toml names"),
        "{err}"
    );
    assert!(r.out.status.code() != Some(2), "{err}");
    let heads = server.heads();
    assert!(heads.iter().any(|h| h.contains("/manifests/")), "{heads:?}");
    assert!(!heads.iter().any(|h| h.contains(&basic)), "{heads:?}");
    // The same image named on the command line gets them: the check above can fail.
    let r = run(&["lint", &reference], &creds, Some(dir.path()));
    assert!(r.out.status.code() != Some(2), "{}", error_text(&r.out));
    assert!(server.heads().iter().any(|h| h.contains(&basic)));
}

#[test]
fn a_stalled_pipe_on_standard_input_ends_at_the_timeout() {
    let cache = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlint"))
        .args(["inspect", "--timeout", "2s", "docker-archive:-"])
        .env("NO_COLOR", "1")
        .env("MEMLINT_CACHE_DIR", cache.path())
        .env_remove("MEMLINT_LIMITS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The writer stays open and silent: without a deadline the read blocks for ever.
    let mut writer = child.stdin.take().unwrap();
    // A member that promises 1 MiB, of which a little comes.
    let mut header = tar::Header::new_gnu();
    header.set_path("blobs/sha256/0000").unwrap();
    header.set_size(1 << 20);
    header.set_mode(0o644);
    header.set_cksum();
    writer.write_all(header.as_bytes()).unwrap();
    writer.write_all(&[7u8; 1000]).unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().ok();
            child.wait().ok();
            panic!("memlint still reads a silent pipe after 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(writer);
    let out = child.wait_with_output().unwrap();
    let err = error_text(&Output { status, ..out });
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("--timeout of 2s"), "{err}");
}

#[test]
fn a_fifo_named_as_an_archive_is_streamed_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("image.fifo");
    common::run(Command::new("mkfifo").arg(&fifo));
    // Nobody ever writes: opening it blocks for ever without a deadline.
    let reference = format!("docker-archive:{}", fifo.display());
    let r = run(&["inspect", "--timeout", "2s", &reference], &[], None);
    let err = error_text(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(err.contains("--timeout of 2s"), "{err}");
    assert!(r.elapsed < Duration::from_secs(10), "{:?}", r.elapsed);

    // Fed by a writer, the same FIFO gives the image.
    let archive = dir.path().join("image.tar");
    write_docker_archive(
        &archive,
        &ImageSpec::new("amd64").layer(LayerSpec::new(Comp::Gzip).dir("etc")),
        "app:1",
    );
    let (from, to) = (archive.clone(), fifo.clone());
    let writer = std::thread::spawn(move || {
        let mut out = std::fs::OpenOptions::new().write(true).open(to).unwrap();
        let _ = std::io::copy(&mut std::fs::File::open(from).unwrap(), &mut out);
    });
    let r = run(&["inspect", "--timeout", "20s", &reference], &[], None);
    assert_eq!(r.out.status.code(), Some(0), "{}", error_text(&r.out));
    writer.join().unwrap();
}

/// A password no output may hold.
const SECRET: &str = "memlint-test-Secret-4f9c1e";

/// Neither the password nor its Basic encoding is on standard output or error.
fn assert_no_secret(r: &Run) {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("alice:{SECRET}"));
    for (name, text) in [("stdout", &r.out.stdout), ("stderr", &r.out.stderr)] {
        let text = String::from_utf8_lossy(text);
        assert!(!text.contains(SECRET) && !text.contains(&basic), "{name}: {text}");
    }
}

/// A Deployment whose containers run `images`, one container each.
fn deployment(images: &[String]) -> String {
    let mut yaml = String::from(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  template:\n    spec:\n      containers:\n",
    );
    for (i, image) in images.iter().enumerate() {
        yaml.push_str(&format!("        - name: c{i}\n          image: \"{image}\"\n"));
    }
    yaml
}

#[test]
fn explicit_credentials_under_k8s_go_only_to_a_registry_the_command_line_names() {
    let image = Arc::new(small_image());
    // Both registries serve the image; the user's only with the credentials (the port it is
    // known by once both run).
    let protected = Arc::new(std::sync::atomic::AtomicU16::new(0));
    let registry = || {
        let (image, protected) = (image.clone(), protected.clone());
        Server::start(Duration::from_secs(120), move |path, head, stream| {
            let port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
            let with_credentials = head.to_ascii_lowercase().contains("authorization: basic");
            if port == protected.load(std::sync::atomic::Ordering::SeqCst) && !with_credentials {
                respond(
                    stream,
                    "401 Unauthorized",
                    &[("WWW-Authenticate", "Basic realm=\"user\"")],
                    b"",
                );
            } else if path == "/v2/" {
                respond(stream, "200 OK", &[], b"{}");
            } else if !serve_image(&image, path, stream) {
                respond(stream, "404 Not Found", &[], b"");
            }
        })
    };
    let (one, two) = (registry(), registry());
    let reference = |s: &Server| format!("127.0.0.1:{}/app:1", s.port);
    // The attacker's reference sorts first: the images are read in name order.
    let (attacker, user) = if reference(&one) < reference(&two) {
        (one, two)
    } else {
        (two, one)
    };
    protected.store(user.port, std::sync::atomic::Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("deploy.yaml");
    std::fs::write(&manifest, deployment(&[reference(&attacker), reference(&user)])).unwrap();
    let manifest = manifest.display().to_string();
    let creds = [("MEMLINT_USERNAME", "alice"), ("MEMLINT_PASSWORD", SECRET)];
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("alice:{SECRET}"))
    );
    let user_host = format!("127.0.0.1:{}", user.port);
    let stand_in = format!("--image={}=registry:{}", reference(&user), reference(&user));
    for named in [
        vec!["--credentials-registry", user_host.as_str()],
        vec![stand_in.as_str()],
    ] {
        let mut args = vec![
            "lint",
            "--k8s",
            manifest.as_str(),
            "--format",
            "json",
            "--parallel",
            "1",
        ];
        args.extend(named.iter().copied());
        let r = run(&args, &creds, None);
        assert!(
            r.code() == Some(0) || r.code() == Some(1),
            "{named:?}: {}",
            r.err()
        );
        assert_no_secret(&r);
        assert!(r.peak_kib < MIB_256_IN_KIB, "peak {} KiB", r.peak_kib);
        let seen = attacker.heads();
        assert!(seen.iter().any(|h| h.contains("/manifests/")), "{seen:?}");
        assert!(
            !seen
                .iter()
                .any(|h| h.to_ascii_lowercase().contains("authorization")),
            "{named:?}: the attacker's registry got credentials: {seen:?}"
        );
        assert!(user.heads().iter().any(|h| h.contains(&basic)), "{named:?}");
    }

    // Nothing on the command line names a registry: refused before any request.
    let asked = (attacker.heads().len(), user.heads().len());
    let r = run(&["lint", "--k8s", &manifest], &creds, None);
    let err = r.err();
    assert_eq!(r.code(), Some(2), "{err}");
    assert!(
        err.contains("--credentials-registry") && err.contains("--k8s"),
        "{err}"
    );
    assert_no_secret(&r);
    assert_eq!((attacker.heads().len(), user.heads().len()), asked);

    // A registry host is a host: not a reference.
    let r = run(
        &[
            "lint",
            "--k8s",
            &manifest,
            "--credentials-registry",
            "127.0.0.1/app",
        ],
        &creds,
        None,
    );
    let err = r.err();
    assert_eq!(r.code(), Some(2), "{err}");
    assert!(err.contains("--credentials-registry 127.0.0.1/app"), "{err}");
    assert_eq!((attacker.heads().len(), user.heads().len()), asked);

    // Standard input carries the manifests: the refusal of --password-stdin says so.
    let r = run(
        &["lint", "--k8s", "-", "--password-stdin", "--username", "alice"],
        &[],
        None,
    );
    let err = r.err();
    assert_eq!(r.code(), Some(2), "{err}");
    assert!(
        err.contains("--k8s -") && !err.contains("docker-archive"),
        "{err}"
    );
}

#[test]
fn a_token_realm_or_a_redirect_into_another_kind_of_network_is_refused() {
    // The registry is on loopback: link-local (the metadata service) and private addresses
    // are another kind of network. The refusal comes before any connection.
    for (realm, class) in [
        ("http://169.254.169.254/token", "link-local"),
        ("https://10.11.12.13/token", "private"),
        ("http://[fe80::1]/token", "link-local"),
    ] {
        let server = Server::start(Duration::from_secs(60), move |path, _head, stream| {
            if path == "/v2/" {
                let challenge = format!("Bearer realm=\"{realm}\",service=\"r\"");
                respond(
                    stream,
                    "401 Unauthorized",
                    &[("WWW-Authenticate", &challenge)],
                    b"",
                );
            } else {
                respond(stream, "404 Not Found", &[], b"");
            }
        });
        let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
        for creds in [
            &[("MEMLINT_USERNAME", "alice"), ("MEMLINT_PASSWORD", SECRET)][..],
            &[][..],
        ] {
            let r = run(&["inspect", &reference], creds, None);
            let err = r.err();
            assert_eq!(r.code(), Some(2), "{realm}: {err}");
            assert!(err.contains("refused") && err.contains(class), "{realm}: {err}");
            assert!(r.elapsed < Duration::from_secs(30), "{:?}", r.elapsed);
            assert_no_secret(&r);
        }
    }

    // A token service on another loopback host is on the registry's network: asked, but what
    // it answers is not repeated, only its status and host.
    const MARKER: &str = "BODY-OF-ANOTHER-HOST-7d1f";
    let token = Server::start_on("127.0.0.2", Duration::from_secs(60), |_path, _head, stream| {
        respond(stream, "500 Internal Server Error", &[], MARKER.as_bytes());
    });
    let token_port = token.port;
    let server = Server::start(Duration::from_secs(60), move |path, _head, stream| {
        if path == "/v2/" {
            let challenge = format!("Bearer realm=\"http://127.0.0.2:{token_port}/token\",service=\"r\"");
            respond(
                stream,
                "401 Unauthorized",
                &[("WWW-Authenticate", &challenge)],
                b"",
            );
        } else {
            respond(stream, "404 Not Found", &[], b"");
        }
    });
    let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
    let r = run(&["inspect", &reference], &[], None);
    let err = r.err();
    assert_eq!(r.code(), Some(2), "{err}");
    assert!(token.heads().iter().any(|h| h.starts_with("GET /token")));
    assert!(err.contains("500") && err.contains("127.0.0.2"), "{err}");
    assert!(!err.contains(MARKER), "{err}");

    // Blob redirects: to the metadata service, refused; to another loopback host, followed,
    // and its refusal told by status and host only.
    let storage = Server::start_on("127.0.0.2", Duration::from_secs(60), |_path, _head, stream| {
        respond(stream, "404 Not Found", &[], MARKER.as_bytes());
    });
    for (target, needles) in [
        (
            "http://169.254.169.254/blob".to_string(),
            vec!["refused", "link-local"],
        ),
        (
            format!("http://127.0.0.2:{}/blob", storage.port),
            vec!["404", "127.0.0.2"],
        ),
    ] {
        let image = small_image();
        let layer = image.blobs[1].0.clone();
        let location = target.clone();
        let server = Server::start(Duration::from_secs(60), move |path, _head, stream| {
            if path == "/v2/" {
                respond(stream, "200 OK", &[], b"{}");
            } else if path.ends_with(&layer) {
                respond(stream, "307 Temporary Redirect", &[("Location", &location)], b"");
            } else if !serve_image(&image, path, stream) {
                respond(stream, "404 Not Found", &[], b"");
            }
        });
        let reference = format!("registry:127.0.0.1:{}/app:1", server.port);
        let r = run(&["inspect", "--no-cache", &reference], &[], None);
        let err = r.err();
        assert_eq!(r.code(), Some(2), "{target}: {err}");
        for n in needles {
            assert!(err.contains(n), "{target}: {n}: {err}");
        }
        assert!(!err.contains(MARKER), "{err}");
        assert!(r.elapsed < Duration::from_secs(30), "{:?}", r.elapsed);
    }
    assert!(storage.heads().iter().any(|h| h.starts_with("GET /blob")));
}

#[test]
fn a_fleet_on_a_registry_that_never_answers_ends_by_its_bounds() {
    // Accepts, reads the request, answers nothing for 40 s.
    let server = Server::start(Duration::from_secs(120), |_path, _head, _stream| {
        std::thread::sleep(Duration::from_secs(40));
    });
    let images: Vec<String> = (0..24)
        .map(|i| format!("127.0.0.1:{}/app{i:02}:1", server.port))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("fleet.yaml");
    std::fs::write(&manifest, deployment(&images)).unwrap();
    let manifest = manifest.display().to_string();
    let unread_for = |r: &Run, needle: &str| -> usize {
        let reports = r.json()["reports"].as_array().cloned().unwrap_or_default();
        assert_eq!(reports.len(), 24);
        assert!(reports.iter().all(|x| x.get("error").is_some()));
        reports
            .iter()
            .filter(|x| x["error"]["message"].as_str().unwrap_or("").contains(needle))
            .count()
    };
    // Without a bound: 24 × 3 s / 2 = 36 s. After 3 timeouts in a row, the rest is not read.
    let base = [
        "lint",
        "--k8s",
        manifest.as_str(),
        "--format",
        "json",
        "--timeout",
        "3s",
        "--parallel",
        "2",
    ];
    let r = run(&base, &[], None);
    let err = r.err();
    assert_eq!(r.code(), Some(2), "{err}");
    assert!(r.elapsed < Duration::from_secs(20), "{:?}", r.elapsed);
    assert!(unread_for(&r, "max_registry_timeouts=3") >= 18, "{err}");
    // The refusal in full once (with what to do), then a line per image.
    assert_eq!(
        err.matches("--limit max_registry_timeouts=12").count(),
        1,
        "{err}"
    );
    assert!(err.matches("not read").count() >= 18, "{err}");
    assert!(r.peak_kib < MIB_256_IN_KIB, "peak {} KiB", r.peak_kib);

    // The fleet's deadline ends a read under way and the ones not started.
    let mut args = base.to_vec();
    args.extend([
        "--limit",
        "max_registry_timeouts=0",
        "--limit",
        "fleet_timeout_secs=4",
    ]);
    let r = run(&args, &[], None);
    let err = r.err();
    assert_eq!(r.code(), Some(2), "{err}");
    assert!(r.elapsed < Duration::from_secs(15), "{:?}", r.elapsed);
    assert!(unread_for(&r, "fleet_timeout_secs") >= 20, "{err}");
    // In full for the reads it cut (two at a time) and once for the ones it skipped.
    let told = err.matches("--limit fleet_timeout_secs=8").count();
    assert!((1..=3).contains(&told), "{err}");
    assert!(r.peak_kib < MIB_256_IN_KIB, "peak {} KiB", r.peak_kib);
}
