//! `--format html` (issue 33, item 4): one self-contained page a person reads, for one image,
//! several images and a `--k8s` fleet. The page of a small report is compared with
//! tests/snapshots/html/ (UPDATE_SNAPSHOTS=1 writes the new version, and the README's
//! screenshot docs/html-report.png); the page of a fleet of several images is opened in real
//! headless Chromium, which must render the summary and a budget picture per container, while
//! a hostile evidence string (`<script>`, `</style>`, ESC, BEL) stays text; the written file
//! carries the Content-Security-Policy and no URL that would fetch anything.

use crate::common;

use common::{
    build_image, error_text, memlint_in, require_tool, with_name, Comp, ImageSpec, LayerSpec, OciWriter,
};
use std::fs;
use std::path::Path;
use std::process::Command;

const CSP: &str = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">";

/// An LD_PRELOAD entry that tries to open a script, close the style sheet, colour a terminal
/// and ring its bell (no space or colon: glibc would split the entry there).
const HOSTILE: &str = "/opt/<script>alert(1)</script></style>\x1b[31m\x07.so";

fn assert_snapshot(name: &str, actual: &str) {
    common::assert_snapshot("html", name, actual)
}

/// A Debian-like image whose `LD_PRELOAD` names a library it does not hold.
fn preload_image(root: &Path, preload: &str) -> String {
    let img = ImageSpec::new("amd64")
        .layer(
            LayerSpec::new(Comp::Gzip)
                .by("RUN true")
                .file("etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\n"),
        )
        .env(&format!("LD_PRELOAD={preload}"));
    let w = OciWriter::new(root);
    let d = w.image(&img);
    w.write_index_json(vec![with_name(d, "app")]);
    format!("oci-dir:{}:app", root.display())
}

/// Runs memlint in `dir`, which must exit with `code`; its standard output.
fn memlint_ok(dir: &Path, args: &[&str], code: i32) -> String {
    let out = memlint_in(dir, args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", error_text(&out));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The values of every `name="…"` attribute in `html`.
fn attribute_values<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let needle = format!(" {name}=\"");
    html.match_indices(&needle)
        .map(|(at, _)| {
            let rest = &html[at + needle.len()..];
            &rest[..rest.find('"').unwrap_or(rest.len())]
        })
        .collect()
}

/// What every page must be: one document with the policy, inline style only, no URL that
/// fetches or leaves the page, no script, and no raw control character.
fn assert_self_contained(page: &str) {
    assert!(page.starts_with("<!DOCTYPE html>\n"), "{page}");
    assert_eq!(page.matches(CSP).count(), 1, "the CSP meta, once");
    assert_eq!(page.matches("<style>").count(), 1);
    assert_eq!(
        page.matches("</style>").count(),
        1,
        "only the page's own style closes"
    );
    assert!(!page.contains("<script"), "no script element");
    assert!(
        attribute_values(page, "src").is_empty(),
        "nothing is loaded: {:?}",
        attribute_values(page, "src")
    );
    for href in attribute_values(page, "href") {
        assert!(href.starts_with('#'), "links stay in the page: {href}");
    }
    // CSS is in the one style sheet (no `style` attribute): it names no url().
    let sheet = &page[page.find("<style>").unwrap()..page.find("</style>").unwrap()];
    assert!(!sheet.contains("url(") && !sheet.contains("@import"), "{sheet}");
    assert!(
        attribute_values(page, "style").is_empty(),
        "no inline style attribute"
    );
    for attribute in ["src", "href", "xlink:href", "action", "srcset", "poster", "data"] {
        for v in attribute_values(page, attribute) {
            for scheme in ["http:", "https:", "//"] {
                assert!(!v.contains(scheme), "{attribute}={v}");
            }
        }
    }
    assert!(
        !page.chars().any(|c| c.is_control() && c != '\n'),
        "raw control characters"
    );
    assert!(page.trim_end().ends_with("</html>"));
}

/// `chromium --headless` on the page: the DOM it builds (`--dump-dom`), and a screenshot.
fn chromium(dir: &Path, page: &Path, args: &[&str]) -> String {
    require_tool("chromium");
    let profile = dir.join("chromium-profile");
    let mut cmd = Command::new("timeout");
    // A generous wall bound: a browser that hangs fails the test instead of the suite.
    cmd.args(["120", "chromium", "--headless", "--no-sandbox", "--disable-gpu"])
        .arg("--disable-dev-shm-usage")
        .arg("--no-first-run")
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .env("HOME", dir);
    let out = cmd.output().expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_small_report_as_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let image = preload_image(&dir.path().join("img"), "/opt/libfast.so");
    fs::write(
        dir.path().join("deploy.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: registry.local/app:1\n        resources: {limits: {memory: 512Mi}}\n        volumeMounts:\n        - {name: cache, mountPath: /cache}\n        - {name: dshm, mountPath: /dev/shm}\n      volumes:\n      - name: cache\n        emptyDir: {medium: Memory, sizeLimit: 128Mi}\n      - name: dshm\n        emptyDir: {medium: Memory}\n",
    )
    .unwrap();
    let stand_in = format!("registry.local/app:1={image}");
    let page = memlint_ok(
        dir.path(),
        &[
            "lint",
            "--k8s",
            "deploy.yaml",
            "--image",
            &stand_in,
            "--format",
            "html",
            "--fail-on",
            "never",
        ],
        0,
    );
    assert_self_contained(&page);
    let shown = page.replace(&dir.path().display().to_string(), "TMP");
    assert_snapshot("small.html", &shown);
    // What a reader must find in it.
    for needle in [
        "Deployment shop/api, container app (deploy.yaml:9)",
        "memory limit <b>512 MiB</b>",
        "emptyDir cache at /cache (medium: Memory) <b>128 MiB</b>",
        "emptyDir dshm at /dev/shm: no sizeLimit",
        "<code class=\"rule\">ld-preload-missing</code>",
        "LD_PRELOAD=/opt/libfast.so",
    ] {
        assert!(shown.contains(needle), "`{needle}` not in\n{shown}");
    }
    assert_eq!(shown.matches("<svg class=\"budget\"").count(), 1);
}

#[test]
fn one_image_and_several_images_without_k8s() {
    let dir = tempfile::tempdir().unwrap();
    let a = preload_image(&dir.path().join("a"), "/opt/a.so");
    let b = preload_image(&dir.path().join("b"), "/opt/b.so");
    // One image, through -o html=FILE beside the text on standard output, with the Dockerfile
    // it was built from: the finding sits on its line.
    fs::write(
        dir.path().join("Dockerfile"),
        "FROM debian:12\nENV LD_PRELOAD=/opt/a.so\nCMD [\"/bin/sh\"]\n",
    )
    .unwrap();
    memlint_ok(
        dir.path(),
        &[
            "lint",
            "--fail-on",
            "never",
            "--dockerfile",
            "Dockerfile",
            "-o",
            "html=one.html",
            &a,
        ],
        0,
    );
    let one = fs::read_to_string(dir.path().join("one.html")).unwrap();
    assert_self_contained(&one);
    assert!(
        one.contains(
            "<p class=\"where\">at <code>Dockerfile:2</code>: <code>ENV LD_PRELOAD=/opt/a.so</code></p>"
        ),
        "{one}"
    );
    assert_eq!(one.matches("<svg class=\"budget\"").count(), 1);
    assert!(one.contains("<b>No memory limit</b>"), "{one}");
    assert!(one.contains("<b>1</b> image</li>"), "{one}");
    // Two images, and one that cannot be read: a section each, the third in the summary.
    let missing = format!("oci-dir:{}:app", dir.path().join("nothere").display());
    let many = memlint_ok(
        dir.path(),
        &["lint", "--fail-on", "never", "--format", "html", &a, &b, &missing],
        2,
    );
    assert_self_contained(&many);
    assert_eq!(many.matches("<svg class=\"budget\"").count(), 2);
    assert_eq!(many.matches("<section class=\"report").count(), 2);
    assert!(many.contains("<b>2</b> images</li>"), "{many}");
    assert!(many.contains("<b>2</b> errors</li>"), "{many}");
    assert!(many.contains("<tr class=\"unread\">"), "{many}");
    // The rule's two findings are one row of the summary, over two reports.
    assert!(
        many.contains("<code>ld-preload-missing</code></td><td><span class=\"badge sev-error\">error</span></td><td>2</td><td>2</td>"),
        "{many}"
    );
}

#[test]
fn a_fleet_page_renders_in_chromium_with_a_budget_per_container() {
    let dir = tempfile::tempdir().unwrap();
    let java = build_image("java17-options");
    let node = build_image("node-old-space");
    let php = build_image("php-fpm-children");
    let hostile = preload_image(&dir.path().join("hostile"), HOSTILE);
    let deployment = |name: &str, image: &str, resources: &str, extra: &str| {
        format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  template:\n    spec:\n      containers:\n      - name: main\n        image: {image}\n{resources}{extra}"
        )
    };
    let limit = |l: &str| format!("        resources: {{limits: {{memory: {l}}}}}\n");
    let mut fleet = deployment(
        "api",
        "registry.local/java:1",
        &limit("1Gi"),
        "        volumeMounts:\n        - {name: cache, mountPath: /cache}\n        - {name: dshm, mountPath: /dev/shm}\n      volumes:\n      - name: cache\n        emptyDir: {medium: Memory, sizeLimit: 128Mi}\n      - name: dshm\n        emptyDir: {medium: Memory, sizeLimit: 64Mi}\n",
    );
    fleet += &deployment("batch", "registry.local/java:1", "", "");
    fleet += &deployment("web", "registry.local/node:1", &limit("512Mi"), "");
    fleet += &deployment("shop", "registry.local/php:1", &limit("2Gi"), "");
    fleet += &deployment("edge", "registry.local/edge:1", &limit("256Mi"), "");
    fs::write(dir.path().join("fleet.yaml"), fleet).unwrap();
    let mut args = vec![
        "lint",
        "--k8s",
        "fleet.yaml",
        "--format",
        "html",
        "--output",
        "report.html",
        "-o",
        "html=again.html",
        "--fail-on",
        "never",
        "--parallel",
        "2",
    ];
    let stand_ins = [
        format!("registry.local/java:1={java}"),
        format!("registry.local/node:1={node}"),
        format!("registry.local/php:1={php}"),
        format!("registry.local/edge:1={hostile}"),
    ];
    for s in &stand_ins {
        args.extend(["--image", s.as_str()]);
    }
    memlint_ok(dir.path(), &args, 0);
    let path = dir.path().join("report.html");
    let page = fs::read_to_string(&path).unwrap();
    assert_eq!(page, fs::read_to_string(dir.path().join("again.html")).unwrap());
    assert_self_contained(&page);
    // The hostile entry is text: escaped for HTML, its controls shown as the terminal shows them.
    assert!(
        page.contains("LD_PRELOAD=/opt/&lt;script&gt;alert(1)&lt;/script&gt;&lt;/style&gt;\\x1b[31m\\x07.so"),
        "{page}"
    );

    let dom = chromium(dir.path(), &path, &["--dump-dom"]);
    assert!(dom.contains("<section id=\"summary\">"), "{dom}");
    assert!(dom.contains("<b>4</b> images</li>"), "{dom}");
    assert!(dom.contains("<b>5</b> containers</li>"), "{dom}");
    assert!(dom.contains("<h3>Findings by rule</h3>"), "{dom}");
    // One budget picture per container, each in its section.
    assert_eq!(dom.matches("<section class=\"report").count(), 5, "{dom}");
    assert_eq!(dom.matches("<svg class=\"budget\"").count(), 5, "{dom}");
    for name in ["api", "batch", "web", "shop", "edge"] {
        assert!(
            dom.contains(&format!("Deployment shop/{name}, container main (fleet.yaml:")),
            "{name}: {dom}"
        );
    }
    // The container with no limit says so; the JVM's heap and the PHP workers are drawn.
    assert!(dom.contains("<b>No memory limit</b>"), "{dom}");
    assert!(dom.contains("<rect class=\"part heap\""), "{dom}");
    assert!(dom.contains("<rect class=\"part workers\""), "{dom}");
    // The JVM's uncapped direct memory is a ceiling drawn apart; what passes a limit is marked.
    assert!(dom.contains("<rect class=\"part ceiling\""), "{dom}");
    assert!(dom.contains("<rect class=\"overflow\""), "{dom}");
    assert!(dom.contains("emptyDir cache at /cache (medium: Memory)"), "{dom}");
    // The browser parsed the hostile string as text: no script element, the style sheet
    // closed once, and the words there to read.
    assert!(!dom.contains("<script"), "{dom}");
    assert_eq!(dom.matches("</style>").count(), 1, "{dom}");
    assert!(
        dom.contains("LD_PRELOAD=/opt/&lt;script&gt;alert(1)&lt;/script&gt;&lt;/style&gt;\\x1b[31m\\x07.so"),
        "{dom}"
    );
    assert!(
        dom.contains("<footer>"),
        "the page ends after the hostile section: {dom}"
    );

    let shot = dir.path().join("report.png");
    chromium(
        dir.path(),
        &path,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,1900",
            "--hide-scrollbars",
        ],
    );
    let png = fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(png.len() > 20_000 && png.len() < 1 << 20, "{} bytes", png.len());
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
        fs::create_dir_all(&docs).unwrap();
        fs::write(docs.join("html-report.png"), &png).unwrap();
    }
}

/// The "done when": `lint --k8s testdata/k8s --image …=… --format html --output
/// report.html` on the repository's manifests, four images standing in for theirs.
#[test]
fn the_testdata_fleet_page_has_a_budget_picture_per_container_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/k8s");
    let worker = preload_image(&dir.path().join("worker"), "/opt/libworker.so");
    let stand_ins = [
        format!("registry.local/app:1={}", build_image("java17-options")),
        format!("registry.local/api:1={}", build_image("node-old-space")),
        format!("registry.local/pay:1={}", build_image("php-fpm-children")),
        format!("registry.local/worker:1={worker}"),
    ];
    let mut args = vec![
        "lint",
        "--k8s",
        manifests.to_str().unwrap(),
        "--format",
        "html",
        "--output",
        "report.html",
        "--fail-on",
        "never",
    ];
    for s in &stand_ins {
        args.extend(["--image", s.as_str()]);
    }
    memlint_ok(dir.path(), &args, 0);
    let path = dir.path().join("report.html");
    let page = fs::read_to_string(&path).unwrap();
    assert_self_contained(&page);
    let containers: usize = fs::read_dir(&manifests)
        .unwrap()
        .map(|e| fs::read_to_string(e.unwrap().path()).unwrap())
        .map(|y| y.matches("image: registry.local/").count())
        .sum();
    assert!(containers > 20, "{containers}");
    let dom = chromium(dir.path(), &path, &["--dump-dom"]);
    assert!(dom.contains("<b>4</b> images</li>"), "{dom}");
    assert!(
        dom.contains(&format!("<b>{containers}</b> containers</li>")),
        "{dom}"
    );
    assert_eq!(dom.matches("<section class=\"report").count(), containers);
    assert_eq!(dom.matches("<svg class=\"budget\"").count(), containers);
    assert!(!dom.contains("<tr class=\"unread\">"), "every image was read");
}
