//! The image's own command, as the facts that add interests once the config is known read it.

use oci_spec::image::ImageConfiguration;

/// The words the runtime starts: the config's Entrypoint, then its Cmd; empty without either.
pub(crate) fn config_argv(config: &ImageConfiguration) -> Vec<String> {
    let Some(c) = config.config().as_ref() else {
        return Vec::new();
    };
    c.entrypoint()
        .iter()
        .flatten()
        .chain(c.cmd().iter().flatten())
        .cloned()
        .collect()
}

/// `p` as a program started in `dir` finds it: as it is when absolute, else from `dir` (a
/// leading `./` dropped, so that the path is the one the image's tree holds).
pub(crate) fn absolute(dir: &str, p: &str) -> String {
    if p.starts_with('/') {
        p.to_string()
    } else {
        format!("{}/{}", dir.trim_end_matches('/'), p.trim_start_matches("./"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_from_the_working_folder() {
        assert_eq!(absolute("/app/", "./conf/redis.conf"), "/app/conf/redis.conf");
        assert_eq!(absolute("/", "redis.conf"), "/redis.conf");
        assert_eq!(absolute("/app", "/etc/redis.conf"), "/etc/redis.conf");
    }
}
