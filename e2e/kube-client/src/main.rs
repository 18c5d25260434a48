//! What a kube-rs controller does, run through regroup for the e2e suite
//! (`e2e/tests/test_kube_rs.py`). Each subcommand prints JSON lines on stdout.
//! The group is the app's (`samplecontroller.k8s.io`) unless `--group` says
//! otherwise (the suite's direct mode uses the cluster's).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiResource, Discovery};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config, ResourceExt};
use serde_json::{json, Value};

/// The field manager of the server-side apply.
const MANAGER: &str = "regroup-e2e-kube";

#[derive(Parser)]
#[command(about = "kube-rs client steps for regroup's e2e tests; prints JSON lines")]
struct Cli {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// Namespace (default: the kubeconfig context's).
    #[arg(long, short, global = true)]
    namespace: Option<String>,
    /// The Foo API group the client uses.
    #[arg(long, global = true, default_value = "samplecontroller.k8s.io")]
    group: String,
    /// The Foo version the client uses.
    #[arg(long, global = true, default_value = "v1alpha1")]
    version: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Full discovery (`Discovery::run`): one line per group with its resources.
    Discovery,
    /// Resolve Foo with `discovery::pinned_kind`, then list Foos (`Api<DynamicObject>`).
    List,
    /// Get a ConfigMap (`Api<ConfigMap>`) and print its ownerReferences.
    GetConfigmap { name: String },
    /// Create a Foo.
    Create { name: String },
    /// Merge patch, then server-side apply (`Patch::Apply`), a Foo.
    Patch { name: String },
    /// Delete a Foo.
    Delete { name: String },
    /// Server-side apply (`Api<ClusterRole>`, typed) of a ClusterRole that
    /// may read Foos, then print every ClusterRole's name.
    ApplyClusterRole { name: String },
    /// `kube::runtime::watcher` on Foos until `name` is added; fails after `--timeout`.
    Watch {
        name: String,
        /// Seconds before giving up (exit status 2).
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Start with a streaming list (WatchList, client-go's default from
        /// 1.35): one watch with `sendInitialEvents=true`, whose bookmark
        /// annotated `k8s.io/initial-events-end` ends the initial events
        /// (`InitDone`), instead of a list then a watch.
        #[arg(long)]
        streaming_list: bool,
    },
}

fn emit(line: Value) {
    println!("{line}");
}

/// The Foo as the client addresses it: from the GVK, without discovery.
fn foo_resource(cli: &Cli) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&cli.group, &cli.version, "Foo"),
        "foos",
    )
}

async fn client(cli: &Cli) -> Result<Client> {
    let mut config = match &cli.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await?,
    };
    if let Some(ns) = &cli.namespace {
        config.default_namespace.clone_from(ns);
    }
    Ok(Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let client = client(&cli).await?;
    let foos: Api<DynamicObject> =
        Api::default_namespaced_with(client.clone(), &foo_resource(&cli));
    match &cli.cmd {
        Cmd::Discovery => {
            let discovery = Discovery::new(client).run().await?;
            for group in discovery.groups_alphabetical() {
                let mut resources = Vec::new();
                for version in group.versions() {
                    for (ar, caps) in group.versioned_resources(version) {
                        resources.push(json!({
                            "apiVersion": ar.api_version, "group": ar.group, "version": ar.version,
                            "kind": ar.kind, "plural": ar.plural,
                            "namespaced": caps.scope == discovery::Scope::Namespaced,
                            "verbs": caps.operations,
                        }));
                    }
                }
                emit(json!({
                    "group": group.name(),
                    "versions": group.versions().collect::<Vec<_>>(),
                    "preferredVersion": group.preferred_version(),
                    "resources": resources,
                }));
            }
        }
        Cmd::List => {
            let gvk = GroupVersionKind::gvk(&cli.group, &cli.version, "Foo");
            let (ar, caps) = discovery::pinned_kind(&client, &gvk).await?;
            emit(json!({"resolved": {
                "apiVersion": ar.api_version, "kind": ar.kind, "plural": ar.plural,
                "namespaced": caps.scope == discovery::Scope::Namespaced,
            }}));
            let api: Api<DynamicObject> = Api::default_namespaced_with(client, &ar);
            let list = api.list(&Default::default()).await?;
            emit(json!({"list": {"apiVersion": list.types.api_version, "kind": list.types.kind}}));
            for item in list.items {
                emit(json!({"item": object_summary(&item)}));
            }
        }
        Cmd::GetConfigmap { name } => {
            let cms: Api<ConfigMap> = Api::default_namespaced(client);
            let cm = cms.get(name).await?;
            emit(json!({"name": cm.name_any(), "ownerReferences": cm.owner_references()}));
        }
        Cmd::Create { name } => {
            let mut obj = DynamicObject::new(name, &foo_resource(&cli));
            obj.data = json!({"spec": {"deploymentName": format!("{name}-deploy"), "replicas": 1}});
            let created = foos.create(&PostParams::default(), &obj).await?;
            emit(json!({"step": "create", "object": created}));
        }
        Cmd::Patch { name } => {
            let merge = Patch::Merge(json!({"spec": {"replicas": 2}}));
            let patched = foos.patch(name, &PatchParams::default(), &merge).await?;
            emit(json!({"step": "merge", "object": patched}));
            let applied = Patch::Apply(json!({
                "apiVersion": foo_resource(&cli).api_version, "kind": "Foo",
                "metadata": {"name": name, "labels": {"e2e.regroup.dev/applied-by": MANAGER}},
                "spec": {"deploymentName": format!("{name}-deploy"), "replicas": 3},
            }));
            let patched = foos
                .patch(name, &PatchParams::apply(MANAGER).force(), &applied)
                .await?;
            emit(json!({"step": "apply", "object": patched}));
        }
        Cmd::Delete { name } => {
            let outcome = foos.delete(name, &DeleteParams::default()).await?;
            let body = outcome
                .map_left(|obj| json!(obj))
                .map_right(|status| json!(status));
            emit(json!({"step": "delete", "object": body.into_inner()}));
        }
        Cmd::ApplyClusterRole { name } => {
            let roles: Api<ClusterRole> = Api::all(client);
            let applied = Patch::Apply(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": [{"apiGroups": [cli.group], "resources": ["foos"], "verbs": ["get"]}],
            }));
            let role = roles
                .patch(name, &PatchParams::apply(MANAGER).force(), &applied)
                .await?;
            emit(json!({"step": "apply", "name": role.name_any(), "rules": role.rules}));
            let names: Vec<String> = roles
                .list(&Default::default())
                .await?
                .items
                .iter()
                .map(|r| r.name_any())
                .collect();
            emit(json!({"step": "list", "names": names}));
        }
        Cmd::Watch {
            name,
            timeout,
            streaming_list,
        } => {
            let config = if *streaming_list {
                watcher::Config::default().streaming_lists()
            } else {
                watcher::Config::default()
            };
            let watch = watch_until_added(foos, name, config);
            match tokio::time::timeout(Duration::from_secs(*timeout), watch).await {
                Ok(result) => result?,
                Err(_) => {
                    emit(json!({"timeout": timeout}));
                    std::process::exit(2);
                }
            }
        }
    }
    Ok(())
}

fn object_summary(obj: &DynamicObject) -> Value {
    let types = obj.types.as_ref();
    json!({
        "apiVersion": types.map(|t| t.api_version.as_str()),
        "kind": types.map(|t| t.kind.as_str()),
        "name": obj.name_any(),
        "ownerReferences": obj.owner_references(),
    })
}

/// Prints each watcher event; returns once `name` is applied (added).
async fn watch_until_added(
    foos: Api<DynamicObject>,
    name: &str,
    config: watcher::Config,
) -> Result<()> {
    let mut events = watcher::watcher(foos, config).boxed();
    while let Some(event) = events.next().await {
        let (event, obj) = match event? {
            Event::Init => ("Init", None),
            Event::InitApply(obj) => ("InitApply", Some(obj)),
            Event::InitDone => ("InitDone", None),
            Event::Apply(obj) => ("Apply", Some(obj)),
            Event::Delete(obj) => ("Delete", Some(obj)),
        };
        let done = event == "Apply" && obj.as_ref().is_some_and(|o| o.name_any() == name);
        emit(json!({"event": event, "object": obj.as_ref().map(object_summary)}));
        if done {
            return Ok(());
        }
    }
    bail!("the watch stream ended before {name} was added")
}
