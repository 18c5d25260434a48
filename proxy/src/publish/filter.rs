//! Discovery and OpenAPI cut down to the published groups.
