//! What the Kubernetes rules (`lint --k8s`) share: the evidence line of a container's limit.

use crate::finding::Evidence;
use crate::k8s::quantity::Quantity;
use crate::k8s::{Container, Lined};
use crate::units::human_bytes;

/// `Deployment/api container `app`: resources.limits.memory 2Gi (2 GiB) at line 24`.
pub(crate) fn limit_evidence(c: &Container, resource: &str, limit: &Lined<Quantity>) -> Evidence {
    Evidence::plain(format!(
        "{}/{} container `{}`: resources.limits.{resource} {} ({}) at line {}",
        c.workload.kind,
        c.workload.name,
        c.workload.container,
        limit.value.text,
        human_bytes(limit.value.value),
        limit.line
    ))
}

/// A size as a Kubernetes quantity: `3Gi`, `2560Mi`, rounded up to a whole MiB.
pub(crate) fn quantity_text(bytes: u64) -> String {
    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;
    if bytes >= GI && bytes.is_multiple_of(GI) {
        format!("{}Gi", bytes / GI)
    } else {
        format!("{}Mi", bytes.div_ceil(MI))
    }
}

/// `Deployment/api container `app``, for evidence.
pub(crate) fn container_name(c: &Container) -> String {
    format!(
        "{}/{} container `{}`",
        c.workload.kind, c.workload.name, c.workload.container
    )
}

/// The pod-spec lines that give the container a memory-backed `/dev/shm` of `size` bytes, with
/// its memory limit raised by that size (when it has one).
pub(crate) fn dshm_fix(c: Option<&Container>, size: u64) -> String {
    let size_text = quantity_text(size);
    let name = c.map_or("app", |c| c.workload.container.as_str());
    let limit = match c.and_then(|c| c.limits_memory.as_ref()) {
        Some(l) => format!(
            "        resources:\n          limits:\n            memory: {}   # {} + {size_text} for /dev/shm: its pages count against the limit\n",
            quantity_text(l.value.value.saturating_add(size)),
            l.value.text
        ),
        None => format!(
            "        resources:\n          limits:\n            memory: …   # what the program needs + {size_text} for /dev/shm\n"
        ),
    };
    format!(
        "      containers:\n      - name: {name}\n{limit}        volumeMounts:\n        - name: dshm\n          mountPath: /dev/shm\n      volumes:\n      - name: dshm\n        emptyDir:\n          medium: Memory\n          sizeLimit: {size_text}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(quantity_text(3 << 30), "3Gi");
        assert_eq!(quantity_text((2 << 30) + (512 << 20)), "2560Mi");
        assert_eq!(quantity_text(1), "1Mi");
    }
}
