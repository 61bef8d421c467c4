//! Facts about an image, derived from its merged file tree and config without running
//! anything: platform, libc, the loader's view, preloads, the allocator in effect, the
//! entrypoint, runtimes and packages. Pure: no I/O, no tar, no network. Rules read only these.

pub mod allocator;
pub mod dotnet;
pub mod entrypoint;
pub mod env;
pub mod ldcache;
pub mod libc;
pub mod loader;
pub mod next;
pub mod node;
pub mod os;
pub mod platform;
pub mod preload;
pub mod sharp;

pub use env::Env;

use crate::image::Image;
use serde::Serialize;

/// Everything memlint knows about an image. JSON keys are a contract with users' scripts.
#[derive(Debug, Serialize)]
pub struct Facts {
    /// The config's environment (reported under `image.config.env`).
    #[serde(skip)]
    pub env: Env,
    pub platform: platform::PlatformFacts,
    pub os: os::OsFacts,
    pub libc: libc::Libc,
    pub loader: loader::LoaderFacts,
    pub preloads: Vec<preload::Preload>,
    pub allocator: allocator::AllocatorFacts,
    pub entrypoint: entrypoint::Entrypoint,
    pub node: Option<node::NodeFacts>,
    pub sharp: sharp::SharpFacts,
    pub next: Option<next::NextFacts>,
    pub dotnet: dotnet::DotnetFacts,
}

/// Derives the facts of an image.
pub fn derive(image: &Image) -> Facts {
    let tree = &image.tree;
    let env = Env::from_config(image.config.as_ref());
    let os = os::derive(tree);
    let platform = platform::derive(tree, &image.platform);
    let entrypoint = entrypoint::derive(tree, image.config.as_ref(), &env);
    let libc = libc::derive(tree, &os, &entrypoint, &platform);
    let loader = loader::Loader::new(
        tree,
        &env,
        &libc,
        &platform,
        entrypoint.program.as_deref(),
        &entrypoint.working_dir,
    );
    let mut preloads = preload::derive(&loader, &env, &entrypoint);
    for p in &mut preloads {
        if let Some(n) = p.removed_in_layer {
            p.removed_by = image.layers.get(n as usize - 1).and_then(|l| l.history.clone());
            if let Some(h) = &p.removed_by {
                p.reason =
                    p.reason
                        .replacen(&format!("layer {n}"), &format!("layer {n} (`{}`)", h.trim()), 1);
            }
        }
    }
    let allocator = allocator::derive(&loader, &env, &libc, &preloads, &entrypoint);
    let node = node::derive(tree, &env, &entrypoint);
    let sharp = sharp::derive(&loader, &libc);
    let next = next::derive(tree);
    let dotnet = dotnet::derive(&loader, &env);
    Facts {
        loader: loader.facts(),
        env: env.clone(),
        platform,
        os,
        libc,
        preloads,
        allocator,
        entrypoint,
        node,
        sharp,
        next,
        dotnet,
    }
}
