//! The Paketo/Heroku buildpacks' memory calculator, which sets the heap at start.

use super::*;

/// The JRE or JDK a Java buildpack installs: `/layers/<buildpack>/jre` (Paketo's
/// `paketo-buildpacks_bellsoft-liberica` and the like), whose JAVA_HOME the launcher sets at run time.
pub(super) fn buildpack_homes(tree: &FileTree) -> Vec<String> {
    let Ok(Some(id)) = tree.lookup("/layers") else {
        return Vec::new();
    };
    let NodeKind::Dir(children) = &tree.node(id).kind else {
        return Vec::new();
    };
    children
        .keys()
        .flat_map(|b| ["jre", "jdk"].map(|k| format!("/layers/{b}/{k}")))
        .filter(|h| is_dir(tree, h))
        .collect()
}

/// A buildpack's memory calculator sizes the heap at launch: Cloud Native Buildpacks labels
/// (`io.buildpacks.*`) or Paketo's layers (`/layers/paketo-buildpacks_*`).
pub(super) fn buildpack(tree: &FileTree, config: Option<&ImageConfiguration>) -> Option<String> {
    let labels = config
        .and_then(|c| c.config().as_ref())
        .and_then(|c| c.labels().clone())
        .unwrap_or_default();
    if let Some(k) = labels.keys().find(|k| k.starts_with("io.buildpacks.")) {
        return Some(format!("the image was built by Cloud Native Buildpacks (label {k}): the Java buildpack's memory calculator sets -Xmx and the other memory regions at launch"));
    }
    let Ok(Some(id)) = tree.lookup("/layers") else {
        return None;
    };
    let node = tree.node(id);
    let NodeKind::Dir(children) = &node.kind else {
        return None;
    };
    let found = children.keys().find(|n| n.starts_with("paketo-buildpacks_")).map(|n| {
        format!("/layers/{n} is a Paketo buildpack layer: the Java buildpack's memory calculator sets -Xmx and the other memory regions at launch")
    });
    found
}
