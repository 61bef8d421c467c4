//! A Kubernetes container's context applied to its image (`lint --k8s`): its `command`/`args`
//! in place of the image's Entrypoint/Cmd as the kubelet does it, its `env` over the image's
//! `Env`, and its resources for the rules that judge settings against the memory limit.

use super::env::{Origin, Value, Var};
use crate::k8s::{Container, EnvValue};
use oci_spec::image::{Config, ImageConfiguration};

/// The config the container runs with: the kubelet's rules for `command` and `args`
/// (`command` alone drops the image's Cmd; `args` alone keeps its Entrypoint) and `workingDir`
/// in place of WorkingDir. The env stays the image's: [`env_vars`] goes over it with each
/// variable's manifest line.
pub(crate) fn config_for(image: Option<&ImageConfiguration>, c: &Container) -> ImageConfiguration {
    let mut config = image.cloned().unwrap_or_default();
    let mut run: Config = config.config().clone().unwrap_or_default();
    match (&c.command, &c.args) {
        (Some(command), args) => {
            run.set_entrypoint(Some(command.value.clone()));
            run.set_cmd(args.as_ref().map(|a| a.value.clone()));
        }
        (None, Some(args)) => {
            run.set_cmd(Some(args.value.clone()));
        }
        (None, None) => {}
    }
    if let Some(dir) = &c.working_dir {
        run.set_working_dir(Some(dir.clone()));
    }
    config.set_config(Some(run));
    config
}

/// [`config_for`] with the container's known `env` values after the image's, as the process
/// gets them: what the layer reader needs to know which files the command will read.
pub(crate) fn config_with_env(image: Option<&ImageConfiguration>, c: &Container) -> ImageConfiguration {
    let mut config = config_for(image, c);
    let mut run: Config = config.config().clone().unwrap_or_default();
    let mut env = run.env().clone().unwrap_or_default();
    for e in &c.env {
        if let EnvValue::Value { value }
        | EnvValue::Resource {
            value: Some(value), ..
        } = &e.value
        {
            env.push(format!("{}={value}", e.name));
        }
    }
    run.set_env(Some(env));
    config.set_config(Some(run));
    config
}

/// The container's `env` as settings over the image's, each naming its manifest line. A value
/// the manifest does not hold (a secret, a config map) is undecided: a rule that needs it says
/// so rather than guess.
pub(crate) fn env_vars(c: &Container) -> Vec<Var> {
    c.env
        .iter()
        .map(|e| {
            let (value, text) = match &e.value {
                EnvValue::Value { value } => (Value::Set(value.clone()), format!("{}: {value}", e.name)),
                EnvValue::Resource {
                    resource,
                    value: Some(v),
                } => (
                    Value::Set(v.clone()),
                    format!("{}: resourceFieldRef {resource}", e.name),
                ),
                EnvValue::Resource {
                    value: None,
                    resource,
                } => (
                    Value::Undecided {
                        why: format!(
                            "`resourceFieldRef: {resource}` of a resource the container does not set"
                        ),
                        if_set: None,
                    },
                    format!("{}: resourceFieldRef {resource}", e.name),
                ),
                EnvValue::Unknown { why } => (
                    Value::Undecided {
                        why: why.clone(),
                        if_set: None,
                    },
                    format!("{}: valueFrom ({why})", e.name),
                ),
            };
            Var {
                name: e.name.clone(),
                value,
                origin: Origin::Manifest { line: e.line },
                text: text.into(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::Input;

    fn container(yaml: &str) -> Container {
        let m = crate::k8s::read(&[Input {
            file: "m.yaml".into(),
            text: format!(
                "kind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    image: x\n{yaml}"
            ),
        }])
        .unwrap();
        m.containers[0].clone()
    }

    fn image(entrypoint: &[&str], cmd: &[&str]) -> ImageConfiguration {
        let json = serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Entrypoint": entrypoint, "Cmd": cmd, "Env": ["A=1", "B=2"]},
            "rootfs": {"type": "layers", "diff_ids": []}
        });
        serde_json::from_value(json).unwrap()
    }

    fn run(c: &ImageConfiguration) -> (Option<Vec<String>>, Option<Vec<String>>) {
        let cfg = c.config().as_ref().unwrap();
        (cfg.entrypoint().clone(), cfg.cmd().clone())
    }

    /// The four cases of "Define a Command and Arguments for a Container" (kubernetes.io).
    #[test]
    fn command_and_args_as_the_kubelet_applies_them() {
        let img = image(&["/ep"], &["--cmd"]);
        let s = |v: &[&str]| Some(v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(
            run(&config_for(Some(&img), &container(""))),
            (s(&["/ep"]), s(&["--cmd"]))
        );
        assert_eq!(
            run(&config_for(Some(&img), &container("    command: [/c]\n"))),
            (s(&["/c"]), None)
        );
        assert_eq!(
            run(&config_for(Some(&img), &container("    args: [--a]\n"))),
            (s(&["/ep"]), s(&["--a"]))
        );
        assert_eq!(
            run(&config_for(
                Some(&img),
                &container("    command: [/c]\n    args: [--a]\n")
            )),
            (s(&["/c"]), s(&["--a"]))
        );
        // An empty list is no list (containerd's setOCIProcessArgs): `helm` renders `[]` often.
        assert_eq!(
            run(&config_for(
                Some(&img),
                &container("    command: []\n    args: [--a]\n")
            )),
            (s(&["/ep"]), s(&["--a"]))
        );
        assert_eq!(
            run(&config_for(Some(&img), &container("    args: []\n"))),
            (s(&["/ep"]), s(&["--cmd"]))
        );
        let c = container("    env:\n    - {name: B, value: three}\n    - name: S\n      valueFrom: {secretKeyRef: {name: s, key: k}}\n");
        let env = config_with_env(Some(&img), &c)
            .config()
            .as_ref()
            .unwrap()
            .env()
            .clone()
            .unwrap();
        assert_eq!(env, ["A=1", "B=2", "B=three"]);
        let vars = env_vars(&c);
        assert_eq!(vars[0].origin, Origin::Manifest { line: 8 });
        assert!(matches!(vars[1].value, Value::Undecided { .. }));
    }
}
