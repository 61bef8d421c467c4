//! What the Kubernetes rules (`lint --k8s`) share: the evidence line of a container's limit.

use crate::finding::Evidence;
use crate::k8s::quantity::Quantity;
use crate::k8s::{Container, Lined};
use crate::units::human_bytes;

/// `Deployment/api container `app`: resources.limits.memory 2Gi (2 GiB) at line 24`.
pub fn limit_evidence(c: &Container, resource: &str, limit: &Lined<Quantity>) -> Evidence {
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
