//! A kubeconfig user's `exec` section, checked and resolved as client-go
//! does (versions, interactive mode, the cluster's exec extension).

use std::path::Path;

use base64::Engine as _;

use super::schema::{Cluster, RawExec};
use super::{ExecConfig, InteractiveMode, Problem, Resolved, EXEC_V1, EXEC_V1BETA1};

pub(super) fn exec_config(
    x: &RawExec,
    base: &Path,
    resolved: &Resolved,
    cluster: &Cluster,
) -> Result<ExecConfig, Problem> {
    if x.api_version != EXEC_V1 && x.api_version != EXEC_V1BETA1 {
        return Err(Problem::ExecApiVersion(x.api_version.clone()));
    }
    if x.command.is_empty() {
        return Err(Problem::ExecNoCommand);
    }
    let interactive_mode = match x.interactive_mode.as_deref() {
        None | Some("") => InteractiveMode::IfAvailable,
        Some("Never") => InteractiveMode::Never,
        Some("IfAvailable") => InteractiveMode::IfAvailable,
        Some("Always") => return Err(Problem::ExecInteractiveAlways(x.command.clone())),
        Some(m) => return Err(Problem::ExecUnknownInteractiveMode(m.to_owned())),
    };
    if x.api_version == EXEC_V1 && x.interactive_mode.is_none() {
        return Err(Problem::ExecNoInteractiveMode);
    }
    // client-go: a command with a path separator is relative to the
    // kubeconfig's directory; a bare name is looked up in PATH.
    let command = if x.command.contains('/') && !Path::new(&x.command).is_absolute() {
        base.join(&x.command).display().to_string()
    } else {
        x.command.clone()
    };
    let mut spec_cluster = serde_json::json!({
        "server": resolved.server,
        "insecure-skip-tls-verify": resolved.insecure,
    });
    if let Some(ca) = &resolved.ca_pem {
        spec_cluster["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    if let Some(n) = &resolved.tls_server_name {
        spec_cluster["tls-server-name"] = n.clone().into();
    }
    if let Some(p) = &resolved.proxy_url {
        spec_cluster["proxy-url"] = p.clone().into();
    }
    if resolved.disable_compression {
        spec_cluster["disable-compression"] = true.into();
    }
    if let Some(e) = cluster
        .extensions
        .iter()
        .find(|e| e.name == "client.authentication.k8s.io/exec")
    {
        spec_cluster["config"] = e.extension.clone();
    }
    Ok(ExecConfig {
        api_version: x.api_version.clone(),
        command,
        args: x.args.clone(),
        env: x
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        install_hint: x.install_hint.clone().filter(|h| !h.is_empty()),
        provide_cluster_info: x.provide_cluster_info,
        interactive_mode,
        cluster: spec_cluster,
    })
}
