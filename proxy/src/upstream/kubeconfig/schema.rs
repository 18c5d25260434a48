//! The kubeconfig file as written, field for field (client-go's names);
//! `mod.rs` resolves it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub(super) struct File {
    #[serde(default)]
    pub(super) clusters: Vec<NamedCluster>,
    #[serde(default)]
    pub(super) users: Vec<NamedUser>,
    #[serde(default)]
    pub(super) contexts: Vec<NamedContext>,
    #[serde(default)]
    pub(super) current_context: String,
}

#[derive(Deserialize)]
pub(super) struct NamedCluster {
    pub(super) name: String,
    #[serde(default)]
    pub(super) cluster: Cluster,
}

#[derive(Deserialize)]
pub(super) struct NamedUser {
    pub(super) name: String,
    #[serde(default)]
    pub(super) user: User,
}

#[derive(Deserialize)]
pub(super) struct NamedContext {
    pub(super) name: String,
    #[serde(default)]
    pub(super) context: Context,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
pub(super) struct Cluster {
    #[serde(default)]
    pub(super) server: String,
    pub(super) certificate_authority: Option<PathBuf>,
    pub(super) certificate_authority_data: Option<String>,
    #[serde(default)]
    pub(super) insecure_skip_tls_verify: bool,
    pub(super) tls_server_name: Option<String>,
    pub(super) proxy_url: Option<String>,
    #[serde(default)]
    pub(super) disable_compression: bool,
    #[serde(default)]
    pub(super) extensions: Vec<NamedExtension>,
}

#[derive(Deserialize, Clone)]
pub(super) struct NamedExtension {
    pub(super) name: String,
    #[serde(default)]
    pub(super) extension: serde_json::Value,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
pub(super) struct User {
    pub(super) token: Option<String>,
    /// client-go's name is `tokenFile` (camel case, unlike its neighbours).
    #[serde(rename = "tokenFile")]
    pub(super) token_file: Option<PathBuf>,
    /// Not a kubectl field: read only to say so (kubectl would silently
    /// ignore it and run without a credential).
    #[serde(rename = "token-file")]
    pub(super) misspelt_token_file: Option<serde_json::Value>,
    pub(super) client_certificate: Option<PathBuf>,
    pub(super) client_certificate_data: Option<String>,
    pub(super) client_key: Option<PathBuf>,
    pub(super) client_key_data: Option<String>,
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
    #[serde(rename = "as")]
    pub(super) impersonate: Option<String>,
    #[serde(rename = "as-uid")]
    pub(super) impersonate_uid: Option<String>,
    #[serde(rename = "as-groups")]
    pub(super) impersonate_groups: Option<Vec<String>>,
    #[serde(rename = "as-user-extra")]
    pub(super) impersonate_extra: Option<BTreeMap<String, Vec<String>>>,
    pub(super) exec: Option<RawExec>,
    pub(super) auth_provider: Option<RawAuthProvider>,
}

#[derive(Deserialize, Clone)]
pub(super) struct RawAuthProvider {
    #[serde(default)]
    pub(super) name: String,
}

#[derive(Deserialize, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawExec {
    #[serde(default)]
    pub(super) api_version: String,
    #[serde(default)]
    pub(super) command: String,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: Vec<RawEnv>,
    pub(super) install_hint: Option<String>,
    #[serde(default)]
    pub(super) provide_cluster_info: bool,
    pub(super) interactive_mode: Option<String>,
}

#[derive(Deserialize, Clone)]
pub(super) struct RawEnv {
    pub(super) name: String,
    #[serde(default)]
    pub(super) value: String,
}

#[derive(Deserialize, Default, Clone)]
pub(super) struct Context {
    #[serde(default)]
    pub(super) cluster: String,
    #[serde(default)]
    pub(super) user: String,
}
