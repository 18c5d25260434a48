//! regroup's configuration: the YAML schema, its validation, and the
//! [`GroupMap`] that renames API groups in every wire form.
//!
//! Pure: no I/O, no clocks, no network. The proxy and `regroup render` build
//! on it; everything here is testable with strings.

pub mod addr;
pub mod builtin;
pub mod cel;
pub mod dns;
pub mod field_path;
pub mod group_map;
pub mod label_selector;
pub mod limits;
pub mod load;
pub mod metadata;
pub mod object_names;
pub mod profiles;
pub mod rule;
pub mod schema;
pub mod short_names;
pub mod validate;

pub use group_map::{is_version_label, Direction, Form, GroupMap, MapRule, Rule};
pub use limits::Limits;
pub use load::{load, ConfigError, CustomField, Settings};
pub use metadata::MetadataMap;
pub use object_names::ObjectNames;
pub use short_names::ShortNames;
