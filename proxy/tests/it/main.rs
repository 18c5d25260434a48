//! regroup's integration tests, one test binary: each file a module, the
//! shared helpers (`common`, `protobuf_support`, `tls_support`,
//! `upstream_support`) modules beside them. One binary links the proxy
//! once instead of once per file. Two tests stay targets of their own:
//! `tests/memory.rs` measures the spawned binary's peak memory and is run
//! alone (`--test-threads=1`), with no other test loading the machine;
//! `tests/observability.rs` asserts exact counts of the process-wide
//! metrics registry, which the tests of one binary would share.

mod common;
mod discovery_order;
mod kube_136;
mod null_items;
mod profiles;
mod protobuf_support;
mod regroup_binary;
mod shared_namespaces;
mod tls_support;
mod upstream_support;
mod watch_list;
mod watch_upstream;

mod binary_observability;
mod caching;
mod catalog_fixtures;
mod catalog_properties;
mod check;
mod cli;
mod credentials;
mod front;
mod front_binary;
mod hidden_watch;
mod inject;
mod media;
mod metadata_keys;
mod namespaced_names;
mod new_places;
mod no_panic;
mod object_names;
mod observability;
mod pod_spec_names;
mod protobuf_fixtures;
mod protobuf_list_stream;
mod protobuf_properties;
mod publish;
mod registration_writes;
mod render;
mod replay;
mod security;
mod short_names;
mod stale_connection;
mod streams;
mod tables;
mod transport;
mod trust_json_patch;
mod trust_protobuf;
mod two_copies;
mod upstream_health;
mod upstream_idle;
mod upstream_protocol;
mod upstream_streams;
mod webhook_reviews;
mod webhooks;
