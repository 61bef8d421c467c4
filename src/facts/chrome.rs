//! Chrome and Chromium, and what starts them: whether the browser gets
//! `--disable-dev-shm-usage`, which moves its shared memory from `/dev/shm` to `/tmp`.
//!
//! - Browsers: ELF files named `chrome`, `chromium`, `chromium-browser`, `headless_shell` or
//!   `chrome-headless-shell` (Debian's `/usr/lib/chromium/chromium`, Alpine's
//!   `/usr/lib/chromium/chrome`, Google's `/opt/google/chrome/chrome`, the builds Puppeteer and
//!   Playwright download).
//! - Launchers, each with whether it passes the switch, decided from the image:
//!   - Selenium (the Python `selenium` distribution, the npm `selenium-webdriver` package) and
//!     chromedriver start the browser with the switches the test code gives; neither adds this
//!     one. Debian's `/usr/bin/chromium` wrapper adds it from `/etc/chromium.d/dev-shm` when
//!     `findmnt` reports less than 3.8 GB free on `/dev/shm`: it passes when that file holds the
//!     switch, `findmnt` is in the image and the browser found is the wrapper.
//!   - chrome-launcher (and Lighthouse, which starts Chrome through it): its `dist/flags.js`
//!     lists the switches it adds.
//!   - Puppeteer and Playwright: their Chrome launcher's default arguments
//!     (`ChromeLauncher.js`, `chromiumSwitches.js`) hold the switch; a launch with
//!     `ignoreDefaultArgs` drops it, which only the application's code says.
//!   - The entrypoint itself, when it runs the browser: its arguments (and Debian's
//!     `CHROMIUM_FLAGS`).

use super::entrypoint::Entrypoint;
use super::python::PythonFacts;
use super::Env;
use crate::tree::{FileTree, Interests, NodeKind};
use serde::Serialize;

/// The switch that moves Chrome's shared memory to `/tmp`.
pub(crate) const SWITCH: &str = "--disable-dev-shm-usage";

const BROWSER_NAMES: &[&str] = &[
    "chrome",
    "chromium",
    "chromium-browser",
    "headless_shell",
    "chrome-headless-shell",
];

/// Launcher sources that list default switches, by package: (package, files under it).
const LAUNCHER_FILES: &[(&str, &str, &[&str])] = &[
    (
        "puppeteer",
        "puppeteer-core",
        &[
            "lib/cjs/puppeteer/node/ChromeLauncher.js",
            "lib/cjs/puppeteer/node/Launcher.js",
        ],
    ),
    (
        "puppeteer",
        "puppeteer",
        &[
            "lib/cjs/puppeteer/node/ChromeLauncher.js",
            "lib/cjs/puppeteer/node/Launcher.js",
        ],
    ),
    (
        "playwright",
        "playwright-core",
        &["lib/server/chromium/chromiumSwitches.js"],
    ),
    ("chrome-launcher", "chrome-launcher", &["dist/flags.js"]),
];
/// Bytes kept of a launcher's source: Puppeteer 24's ChromeLauncher.js is about 12 KiB.
const SOURCE_CAP: u64 = 256 * 1024;
/// Debian's chromium wrapper and the files it sources.
const DEBIAN_WRAPPER: &str = "/usr/bin/chromium";
const DEBIAN_FLAGS_DIR: &str = "/etc/chromium.d";
const FLAGS_CAP: u64 = 16 * 1024;

/// How a launcher starts the browser.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Launcher {
    /// `selenium`, `chromedriver`, `chrome-launcher`, `lighthouse`, `puppeteer`, `playwright`
    /// or `entrypoint`.
    pub(crate) name: &'static str,
    /// Its package, binary or the entrypoint's program.
    pub(crate) path: String,
    /// Whether it passes `--disable-dev-shm-usage`: `null` when the image does not say.
    pub(crate) passes_switch: Option<bool>,
    /// Why, in words.
    pub(crate) why: String,
}

/// The browsers and their launchers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct ChromeFacts {
    pub(crate) browsers: Vec<String>,
    pub(crate) launchers: Vec<Launcher>,
}

/// What [`derive`] reads: the launchers' sources and Debian's wrapper's flag files.
pub(crate) fn interests() -> Interests {
    let mut i = Interests::default().keep(&format!("{DEBIAN_FLAGS_DIR}/*"), FLAGS_CAP);
    for (_, package, files) in LAUNCHER_FILES {
        for f in *files {
            i = i.keep(&format!("**/node_modules/{package}/{f}"), SOURCE_CAP);
        }
        i = i.keep(&format!("**/node_modules/{package}/package.json"), FLAGS_CAP);
    }
    i.keep("**/node_modules/lighthouse/package.json", FLAGS_CAP)
        .keep("**/node_modules/selenium-webdriver/package.json", FLAGS_CAP)
}

/// The browsers and launchers of the image; `None` without a browser.
pub(crate) fn derive(
    tree: &FileTree,
    env: &Env,
    entry: &Entrypoint,
    python: Option<&PythonFacts>,
) -> Option<ChromeFacts> {
    let mut browsers = Vec::new();
    // node_modules folders by their parent's path, for the launcher packages.
    let mut node_modules = Vec::new();
    for id in tree.walk() {
        let node = tree.node(id);
        let name = node.name();
        if node.is_dir() && name == "node_modules" {
            node_modules.push(id);
        } else if BROWSER_NAMES.contains(&name)
            && matches!(node.kind, NodeKind::File)
            && tree.elf(id).is_some()
        {
            browsers.push(tree.path_of(id));
        }
    }
    if browsers.is_empty() {
        return None;
    }
    browsers.sort();
    let debian_hook = debian_hook(tree);
    let mut launchers = Vec::new();
    for dir in node_modules {
        let base = tree.path_of(dir);
        for (name, package, files) in LAUNCHER_FILES {
            let root = format!("{base}/{package}");
            if !tree.is_file_at(&format!("{root}/package.json")) {
                continue;
            }
            let source = files
                .iter()
                .map(|f| format!("{root}/{f}"))
                .find_map(|p| tree.kept_text(&p).map(|t| (p, t)));
            let (passes, why) = match source {
                Some((p, t)) if t.contains(SWITCH) => (
                    Some(true),
                    format!(
                        "{p} passes {SWITCH} by default (unless the code launches it with ignoreDefaultArgs)"
                    ),
                ),
                Some((p, _)) => (Some(false), format!("{p} does not pass {SWITCH}")),
                None => (
                    None,
                    format!(
                        "{root} has none of the launcher sources memlint reads ({})",
                        files.join(", ")
                    ),
                ),
            };
            launchers.push(Launcher {
                name,
                path: root,
                passes_switch: passes,
                why,
            });
        }
        let lighthouse = format!("{base}/lighthouse");
        if tree.is_file_at(&format!("{lighthouse}/package.json")) {
            launchers.push(Launcher {
                name: "lighthouse",
                path: lighthouse,
                passes_switch: Some(false),
                why: format!(
                    "Lighthouse starts Chrome through chrome-launcher, whose default flags have no {SWITCH}"
                ),
            });
        }
        let webdriver = format!("{base}/selenium-webdriver");
        if tree.is_file_at(&format!("{webdriver}/package.json")) {
            launchers.push(selenium_like("selenium", webdriver, &debian_hook));
        }
    }
    if let Some(p) = python.and_then(|p| p.package("selenium")) {
        launchers.push(selenium_like("selenium", p.path.clone(), &debian_hook));
    }
    for driver in [
        "/usr/bin/chromedriver",
        "/usr/lib/chromium/chromedriver",
        "/usr/local/bin/chromedriver",
    ] {
        if let Some(id) = tree.lookup(driver).ok().flatten() {
            let real = tree.path_of(id);
            if !launchers.iter().any(|l| l.path == real) {
                launchers.push(selenium_like("chromedriver", real, &debian_hook));
            }
        }
    }
    if let Some(l) = from_entrypoint(entry, env, &browsers, &debian_hook) {
        launchers.push(l);
    }
    Some(ChromeFacts { browsers, launchers })
}

/// Whether Debian's wrapper adds the switch on a small `/dev/shm`, and the file that says so.
fn debian_hook(tree: &FileTree) -> Option<String> {
    if !tree.is_file_at(DEBIAN_WRAPPER) {
        return None;
    }
    let Some(NodeKind::Dir(children)) = tree
        .lookup(DEBIAN_FLAGS_DIR)
        .ok()
        .flatten()
        .map(|id| tree.node(id).kind)
    else {
        return None;
    };
    let mut names: Vec<&str> = children.keys().copied().collect();
    names.sort_unstable();
    let file = names
        .into_iter()
        .map(|n| format!("{DEBIAN_FLAGS_DIR}/{n}"))
        .find(|p| {
            tree.kept_text(p).is_some_and(|t| {
                t.lines().any(|l| {
                    !l.trim_start().starts_with('#') && l.contains(SWITCH) && l.contains("CHROMIUM_FLAGS")
                })
            })
        })?;
    // The hook measures /dev/shm with findmnt: without it the test fails and adds nothing.
    let findmnt = ["/usr/bin/findmnt", "/bin/findmnt"]
        .iter()
        .any(|p| tree.is_file_at(p));
    findmnt.then_some(file)
}

fn selenium_like(name: &'static str, path: String, debian_hook: &Option<String>) -> Launcher {
    let (passes, why) = match debian_hook {
        Some(hook) => (
            Some(true),
            format!("{name} starts the browser without {SWITCH}, and Debian's {DEBIAN_WRAPPER} adds it ({hook}) when /dev/shm has less than 3.8 GB free"),
        ),
        None => (
            Some(false),
            format!("{name} starts the browser with the switches the code gives it, and adds no {SWITCH}"),
        ),
    };
    Launcher {
        name,
        path,
        passes_switch: passes,
        why,
    }
}

/// The entrypoint, when it runs a browser.
fn from_entrypoint(
    entry: &Entrypoint,
    env: &Env,
    browsers: &[String],
    debian_hook: &Option<String>,
) -> Option<Launcher> {
    let program = entry.program.as_deref()?;
    let words: Vec<&String> = entry
        .argv
        .iter()
        .chain(entry.steps.iter().flat_map(|s| s.argv.iter()))
        .chain(entry.args.iter())
        .collect();
    let via_wrapper = entry
        .steps
        .iter()
        .any(|s| s.path.as_deref() == Some(DEBIAN_WRAPPER))
        || program == DEBIAN_WRAPPER;
    if !browsers.iter().any(|b| b == program) && !via_wrapper {
        return None;
    }
    let in_args = words.iter().any(|w| w.as_str() == SWITCH);
    let in_flags = via_wrapper
        && env
            .get("CHROMIUM_FLAGS")
            .is_some_and(|f| f.split_whitespace().any(|w| w == SWITCH));
    let (passes, why) = if in_args {
        (Some(true), format!("the entrypoint passes {SWITCH}"))
    } else if in_flags {
        (Some(true), format!("CHROMIUM_FLAGS holds {SWITCH}"))
    } else if let (true, Some(hook)) = (via_wrapper, debian_hook) {
        (
            Some(true),
            format!(
                "Debian's {DEBIAN_WRAPPER} adds {SWITCH} ({hook}) when /dev/shm has less than 3.8 GB free"
            ),
        )
    } else {
        (
            Some(false),
            format!("the entrypoint starts {program} without {SWITCH}"),
        )
    };
    Some(Launcher {
        name: "entrypoint",
        path: program.to_string(),
        passes_switch: passes,
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::testing::{library, TestImage};

    fn chromium() -> TestImage {
        TestImage::new()
            .glibc()
            .elf("/usr/lib/chromium/chromium", library(&[]))
            .file(
                DEBIAN_WRAPPER,
                "#!/bin/sh\nexec /usr/lib/chromium/chromium $CHROMIUM_FLAGS \"$@\"\n",
            )
    }

    fn launchers(i: TestImage) -> Vec<(&'static str, Option<bool>)> {
        i.facts()
            .chrome
            .map(|c| c.launchers.iter().map(|l| (l.name, l.passes_switch)).collect())
            .unwrap_or_default()
    }

    #[test]
    fn puppeteer_passes_the_switch_chrome_launcher_does_not() {
        let i = chromium()
            .npm_package("/app", "puppeteer-core", "24.1.0")
            .file(
                "/app/node_modules/puppeteer-core/lib/cjs/puppeteer/node/ChromeLauncher.js",
                "const chromeArguments = ['--disable-dev-shm-usage', '--no-first-run'];",
            )
            .npm_package("/app", "chrome-launcher", "1.1.2")
            .file(
                "/app/node_modules/chrome-launcher/dist/flags.js",
                "export const DEFAULT_FLAGS = ['--disable-sync'];",
            );
        assert_eq!(
            launchers(i),
            [("puppeteer", Some(true)), ("chrome-launcher", Some(false))]
        );
    }

    #[test]
    fn chromedriver_and_debians_hook() {
        let driver = chromium()
            .elf("/usr/lib/chromium/chromedriver", library(&[]))
            .symlink("/usr/bin/chromedriver", "../lib/chromium/chromedriver");
        assert_eq!(launchers(driver.clone()), [("chromedriver", Some(false))]);
        let hooked = driver
            .file(
                "/etc/chromium.d/dev-shm",
                "if [ $shm_avail -lt 4080218931 ]\nthen\n\texport CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --disable-dev-shm-usage\"\nfi\n",
            )
            .elf("/usr/bin/findmnt", library(&[]));
        assert_eq!(launchers(hooked), [("chromedriver", Some(true))]);
        // No browser, no facts.
        assert!(TestImage::new().glibc().facts().chrome.is_none());
    }

    #[test]
    fn an_entrypoint_that_starts_the_browser() {
        let plain = chromium().cmd(&[
            "/usr/lib/chromium/chromium",
            "--headless",
            "--remote-debugging-port=9222",
        ]);
        assert_eq!(launchers(plain), [("entrypoint", Some(false))]);
        let switched = chromium().cmd(&["/usr/lib/chromium/chromium", "--headless", SWITCH]);
        assert_eq!(launchers(switched), [("entrypoint", Some(true))]);
    }
}
