//! Facts of an image built in memory, for unit tests of rules (and of facts): a [`TestImage`]
//! holds files, ELF objects and a config, and derives [`Facts`] from them as `lint` would,
//! with each file's contents kept only where a facts module declared an interest (debug
//! builds panic when a fact reads a file no interest declared).
//!
//! ```ignore
//! let f = TestImage::new()
//!     .glibc()
//!     .elf("/usr/local/bin/node", executable(GLIBC_LOADER, &["libc.so.6"]))
//!     .env(&["MALLOC_ARENA_MAX=2"])
//!     .cmd(&["node", "server.js"])
//!     .facts();
//! ```

use super::Facts;
use crate::elf::marker::Found;
use crate::elf::{ElfClass, ElfInfo, ElfType};
use crate::facts::loader::tests::elf;
use crate::image::Image;
use crate::platform::Platform;
use crate::tree::{EntryKind, FileTree, LayerEntry};
use oci_spec::image::ImageConfiguration;

/// The `required-server-files.json` of real Next.js 15.5.14 and 16.1.7 standalone builds.
pub(crate) const NEXT_15_SERVER_FILES: &str =
    include_str!("../../testdata/node/next-15.5.14-required-server-files.json");
pub(crate) const NEXT_16_SERVER_FILES: &str =
    include_str!("../../testdata/node/next-16.1.7-required-server-files.json");

/// glibc's x86-64 loader, as executables name it (PT_INTERP).
pub(crate) const GLIBC_LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
/// musl's x86-64 loader.
pub(crate) const MUSL_LOADER: &str = "/lib/ld-musl-x86_64.so.1";
/// The multiarch folder of Debian's x86-64 libraries.
pub(crate) const LIB: &str = "/usr/lib/x86_64-linux-gnu";
/// ELF machine of x86-64, and of aarch64.
pub(crate) const X86_64: u16 = 62;
pub(crate) const AARCH64: u16 = 183;

/// An x86-64 executable that names `interp` and needs `needed`.
pub(crate) fn executable(interp: &str, needed: &[&str]) -> ElfInfo {
    let mut e = elf(X86_64, ElfClass::Elf64, Some(interp), needed, &[], &[]);
    e.head.elf_type = ElfType::Executable;
    e
}

/// An x86-64 shared library that needs `needed`.
pub(crate) fn library(needed: &[&str]) -> ElfInfo {
    elf(X86_64, ElfClass::Elf64, None, needed, &[], &[])
}

/// A shared library built for another machine (`AARCH64`, …).
pub(crate) fn library_for(machine: u16, needed: &[&str]) -> ElfInfo {
    elf(machine, ElfClass::Elf64, None, needed, &[], &[])
}

/// An image for tests: files and a config, turned into [`Facts`] by [`TestImage::facts`].
#[derive(Clone, Debug)]
pub(crate) struct TestImage {
    entries: Vec<LayerEntry>,
    env: Vec<String>,
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    working_dir: Option<String>,
}

impl Default for TestImage {
    fn default() -> Self {
        TestImage::new()
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl TestImage {
    /// An empty linux/amd64 image with no Env, Entrypoint, Cmd or WorkingDir.
    pub(crate) fn new() -> TestImage {
        TestImage {
            entries: Vec::new(),
            env: Vec::new(),
            entrypoint: None,
            cmd: None,
            working_dir: None,
        }
    }

    /// Any layer entry, as written; it replaces an earlier entry at the same path (so that a
    /// test can change one file of a shared image).
    pub(crate) fn entry(mut self, e: LayerEntry) -> TestImage {
        self.entries.retain(|x| x.path != e.path);
        self.entries.push(e);
        self
    }

    /// A file holding `text` (mode 0755, so that a script can run).
    pub(crate) fn file(self, path: &str, text: &str) -> TestImage {
        self.entry(
            LayerEntry::new(path, EntryKind::File)
                .with_mode(0o755)
                .with_text(text),
        )
    }

    /// A file with no kept contents (`libcoreclr.so`, a `.dll`): only its path counts.
    pub(crate) fn empty(self, path: &str) -> TestImage {
        self.entry(LayerEntry::new(path, EntryKind::File))
    }

    /// An ELF file (see [`executable`], [`library`], or `loader::tests::elf`).
    pub(crate) fn elf(self, path: &str, info: ElfInfo) -> TestImage {
        self.entry(LayerEntry {
            size: 4096,
            mode: 0o755,
            elf: Some(Box::new(info)),
            ..LayerEntry::new(path, EntryKind::File)
        })
    }

    /// A symbolic link at `path` to `target`.
    pub(crate) fn symlink(self, path: &str, target: &str) -> TestImage {
        self.entry(LayerEntry::new(path, EntryKind::Symlink(target.to_string())))
    }

    /// Debian 12 with glibc 2.36: its loader, `libc.so.6` (whose release string the scan
    /// reads) in the multiarch folder, `/etc/os-release` and dpkg's `libc6`.
    pub(crate) fn glibc(self) -> TestImage {
        let mut libc = library(&[]);
        libc.scan
            .markers
            .set(&crate::facts::libc::GLIBC_RELEASE, Found::Text("2.36".into()));
        self.elf(GLIBC_LOADER, library(&[]))
            .elf(&format!("{LIB}/libc.so.6"), libc)
            .file(
                "/etc/os-release",
                "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n",
            )
            .file(
                "/var/lib/dpkg/status",
                "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9+deb12u10\n\n",
            )
    }

    /// Alpine 3.20 with musl 1.2.5: its loader (which is its libc), `/etc/os-release` and
    /// apk's `musl`.
    pub(crate) fn musl(self) -> TestImage {
        self.elf(MUSL_LOADER, library(&[]))
            .symlink("/lib/libc.musl-x86_64.so.1", "ld-musl-x86_64.so.1")
            .file(
                "/etc/os-release",
                "NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.20.3\n",
            )
            .file("/lib/apk/db/installed", "P:musl\nV:1.2.5-r0\n\n")
    }

    /// Debian's libjemalloc2 (`/usr/lib/x86_64-linux-gnu/libjemalloc.so.2`, which needs only
    /// what `glibc` brings).
    pub(crate) fn jemalloc(self) -> TestImage {
        let mut lib = library(&["libc.so.6"]);
        lib.scan.markers.set(
            &crate::facts::preload::EMBEDDED_ALLOCATOR,
            Found::Text("jemalloc".into()),
        );
        self.elf(&format!("{LIB}/libjemalloc.so.2"), lib)
    }

    /// An executable at `path` on glibc's loader, needing `libc.so.6`.
    pub(crate) fn program(self, path: &str) -> TestImage {
        self.elf(path, executable(GLIBC_LOADER, &["libc.so.6"]))
    }

    /// An executable at `path` on musl's loader.
    pub(crate) fn musl_program(self, path: &str) -> TestImage {
        self.elf(path, executable(MUSL_LOADER, &["libc.musl-x86_64.so.1"]))
    }

    /// Node.js `version` at `/usr/local/bin/node` on glibc, as the official images have it.
    pub(crate) fn node(self, version: &str) -> TestImage {
        let mut node = executable(GLIBC_LOADER, &["libc.so.6"]);
        node.scan
            .markers
            .set(&crate::facts::node::NODE_RELEASE, Found::Text(version.into()));
        self.elf("/usr/local/bin/node", node)
    }

    /// A Go program at `path` built by `go_version` (`go1.22.1`) without cgo, with the build
    /// info the layer reader records: its module dependencies `deps`.
    pub(crate) fn go(self, path: &str, go_version: &str, deps: &[&str]) -> TestImage {
        let mut info = executable(GLIBC_LOADER, &["libc.so.6"]);
        let build = crate::facts::go::GoBuildInfo {
            go_version: Some(go_version.into()),
            cgo: Some(false),
            deps: deps
                .iter()
                .map(|d| crate::facts::go::GoModule {
                    path: d.to_string(),
                    version: "v1.0.0".into(),
                    replace: None,
                })
                .collect(),
            complete: true,
            ..Default::default()
        };
        set_build_info(&mut info, &build);
        self.elf(path, info)
    }

    /// A standalone Next.js build of `version` in /app with the build manifest
    /// `required_server_files` (`.next/required-server-files.json`), run as `node server.js`.
    pub(crate) fn next_standalone(self, version: &str, required_server_files: &str) -> TestImage {
        self.glibc()
            .node("20.11.1")
            .npm_package("/app", "next", version)
            .file("/app/server.js", "")
            .file("/app/.next/required-server-files.json", required_server_files)
            .working_dir("/app")
            .cmd(&["node", "server.js"])
    }

    /// `<dir>/node_modules/<name>/package.json` for `name` at `version`.
    pub(crate) fn npm_package(self, dir: &str, name: &str, version: &str) -> TestImage {
        self.file(
            &format!("{}/node_modules/{name}/package.json", dir.trim_end_matches('/')),
            &format!(r#"{{"name":"{name}","version":"{version}"}}"#),
        )
    }

    /// sharp `version` (0.33 or later) in `<dir>/node_modules`, with the `@img` addon of
    /// `platform` (`linux-x64`, `linuxmusl-x64`): its package.json and `.node` file, which
    /// needs the C library that platform names.
    pub(crate) fn sharp(self, dir: &str, version: &str, platform: &str) -> TestImage {
        let dir = dir.trim_end_matches('/');
        let libc = if platform.starts_with("linuxmusl") {
            "libc.musl-x86_64.so.1"
        } else {
            "libc.so.6"
        };
        let pkg = format!("{dir}/node_modules/@img/sharp-{platform}");
        self.npm_package(dir, "sharp", version)
            .file(
                &format!("{pkg}/package.json"),
                &format!(r#"{{"name":"@img/sharp-{platform}","version":"{version}"}}"#),
            )
            .elf(&format!("{pkg}/lib/sharp-{platform}.node"), library(&[libc]))
    }

    /// A JDK at `home`: `bin/java` on glibc's loader (musl's when the release says
    /// `LIBC="musl"`) and the `release` file `release`.
    pub(crate) fn jdk(self, home: &str, release: &str) -> TestImage {
        let home = home.trim_end_matches('/');
        let java = if release.contains("LIBC=\"musl\"") {
            executable(MUSL_LOADER, &["libc.musl-x86_64.so.1"])
        } else {
            executable(GLIBC_LOADER, &["libc.so.6"])
        };
        self.elf(&format!("{home}/bin/java"), java)
            .file(&format!("{home}/release"), release)
    }

    /// eclipse-temurin's JDK of `version` (as its release file writes it: `17.0.15`,
    /// `1.8.0_412`) at /opt/java/openjdk, built for `libc` (`gnu` or `musl`, the C library of
    /// the image too) with `variant` (`Hotspot`, `Openj9`), running `java -jar app.jar` in /app.
    pub(crate) fn temurin(self, version: &str, libc: &str, variant: &str) -> TestImage {
        let base = if libc == "musl" { self.musl() } else { self.glibc() };
        let release = format!(
            "IMPLEMENTOR=\"Eclipse Adoptium\"\nJAVA_VERSION=\"{version}\"\nLIBC=\"{libc}\"\nJVM_VARIANT=\"{variant}\"\n"
        );
        base.jdk("/opt/java/openjdk", &release)
            .env(&[
                "JAVA_HOME=/opt/java/openjdk",
                "PATH=/opt/java/openjdk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            ])
            .working_dir("/app")
            .cmd(&["java", "-jar", "app.jar"])
    }

    /// The shared .NET runtime `version` (and ASP.NET Core beside it) under `/usr/share/dotnet`,
    /// with `dotnet` on glibc's loader linked from `/usr/bin/dotnet`, as the official images
    /// lay them out.
    pub(crate) fn dotnet_runtime(self, version: &str) -> TestImage {
        let shared = "/usr/share/dotnet/shared";
        self.program("/usr/share/dotnet/dotnet")
            .symlink("/usr/bin/dotnet", "../share/dotnet/dotnet")
            .elf(
                &format!("{shared}/Microsoft.NETCore.App/{version}/libcoreclr.so"),
                library(&["libc.so.6"]),
            )
            .empty(&format!(
                "{shared}/Microsoft.AspNetCore.App/{version}/Microsoft.AspNetCore.dll"
            ))
    }

    /// A framework-dependent .NET app `name` in `dir`: `<name>.dll`, and its runtimeconfig.json
    /// and deps.json with these texts.
    pub(crate) fn dotnet_app(self, dir: &str, name: &str, runtimeconfig: &str, deps: &str) -> TestImage {
        let dir = dir.trim_end_matches('/');
        self.empty(&format!("{dir}/{name}.dll"))
            .file(&format!("{dir}/{name}.runtimeconfig.json"), runtimeconfig)
            .file(&format!("{dir}/{name}.deps.json"), deps)
    }

    /// Adds `K=V` entries to the config's Env.
    pub(crate) fn env(mut self, vars: &[&str]) -> TestImage {
        self.env.extend(strings(vars));
        self
    }

    pub(crate) fn entrypoint(mut self, argv: &[&str]) -> TestImage {
        self.entrypoint = Some(strings(argv));
        self
    }

    pub(crate) fn cmd(mut self, argv: &[&str]) -> TestImage {
        self.cmd = Some(strings(argv));
        self
    }

    pub(crate) fn working_dir(mut self, dir: &str) -> TestImage {
        self.working_dir = Some(dir.to_string());
        self
    }

    /// The image's config.
    pub(crate) fn config(&self) -> ImageConfiguration {
        let mut config = serde_json::json!({"Env": self.env});
        if let Some(e) = &self.entrypoint {
            config["Entrypoint"] = serde_json::json!(e);
        }
        if let Some(c) = &self.cmd {
            config["Cmd"] = serde_json::json!(c);
        }
        if let Some(w) = &self.working_dir {
            config["WorkingDir"] = serde_json::json!(w);
        }
        serde_json::from_value(serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": []}
        }))
        .expect("a valid image config")
    }

    /// The image, its files' contents kept for what the facts declare with this config.
    pub(crate) fn image(&self) -> Image {
        let config = self.config();
        let interests = crate::facts::interests().union(crate::facts::interests_for(&config));
        let tree = FileTree::from_entries(self.entries.clone())
            .expect("a valid tree")
            .keeping(interests);
        Image::unlayered("test", "test", Platform::linux_amd64(), Some(config), tree)
    }

    /// The facts of the image linted alone.
    pub(crate) fn facts(&self) -> Facts {
        crate::facts::derive(&self.image())
    }

    /// The facts of the image as a Kubernetes container runs it. `container` is either a whole
    /// manifest (starting with `apiVersion:` or `kind:`; its first container counts), or the
    /// lines of one container after its `name` and `image`, indented by four spaces:
    ///
    /// ```text
    ///     resources:
    ///       limits: {memory: 512Mi}
    ///     env:
    ///     - {name: MALLOC_ARENA_MAX, value: "2"}
    /// ```
    pub(crate) fn facts_in(&self, container: &str) -> Facts {
        let whole = container.starts_with("apiVersion:") || container.starts_with("kind:");
        let text = if whole {
            container.to_string()
        } else {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    image: x\n{container}"
            )
        };
        let manifests = crate::k8s::read(&[crate::k8s::Input {
            file: "m.yaml".into(),
            text,
        }])
        .expect("a valid manifest");
        let c = manifests.containers.first().expect("a container in the manifest");
        crate::facts::derive_in(&self.image(), Some(c))
    }
}

/// Gives `elf` the build info blob a Go program built as `info` says carries.
pub(crate) fn set_build_info(elf: &mut ElfInfo, info: &crate::facts::go::GoBuildInfo) {
    let blob = crate::facts::go::buildinfo::tests::encode(info);
    elf.scan
        .markers
        .set(&crate::facts::go::GO_BUILDINFO, Found::Bytes(blob));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::libc::LibcFamily;

    #[test]
    fn builds_what_it_says() {
        let f = TestImage::new()
            .glibc()
            .node("20.11.1")
            .sharp("/app", "0.34.1", "linux-x64")
            .env(&["MALLOC_ARENA_MAX=2"])
            .cmd(&["node", "server.js"])
            .working_dir("/app")
            .facts();
        assert_eq!(f.libc.family, LibcFamily::Glibc);
        assert_eq!(f.libc.version.as_deref(), Some("2.36"));
        assert_eq!(f.entrypoint.program.as_deref(), Some("/usr/local/bin/node"));
        assert_eq!(f.entrypoint.working_dir, "/app");
        assert_eq!(f.env.get("MALLOC_ARENA_MAX"), Some("2"));
        assert!(f.sharp.installs[0].usable, "{:?}", f.sharp);
        assert!(f.container.is_none());

        let f = TestImage::new()
            .musl()
            .musl_program("/usr/bin/app")
            .cmd(&["app"])
            .facts_in("    env:\n    - {name: MALLOC_ARENA_MAX, value: \"4\"}\n");
        assert_eq!(f.libc.family, LibcFamily::Musl);
        assert_eq!(f.env.get("MALLOC_ARENA_MAX"), Some("4"));
        assert!(f.container.is_some());
    }
}
