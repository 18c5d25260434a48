//! The table the OpenAPI v2 protobuf walker follows: gnostic's messages
//! and, for each field number, what to do with it (the messages are declared
//! in `core/proto/openapiv2.proto`, against which the tests check this
//! table).

/// The gnostic messages the walker knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Document,
    Info,
    Paths,
    /// `NamedPathItem` in `Paths.path`: renamed or dropped by name.
    PathEntry,
    PathItem,
    Operation,
    ParametersItem,
    JsonReference,
    Parameter,
    BodyParameter,
    NonBodyParameter,
    /// Header and path parameters (items at 7, vendor extensions at 22).
    SubSchema22,
    /// Form-data and query parameters (items at 8, vendor extensions at 23).
    SubSchema23,
    PrimitivesItems,
    Responses,
    NamedResponseValue,
    ResponseValue,
    Response,
    SchemaItem,
    FileSchema,
    Definitions,
    /// `NamedSchema` in `Definitions`: renamed or dropped by name.
    DefinitionEntry,
    ParameterDefinitions,
    NamedParameter,
    ResponseDefinitions,
    NamedResponse,
    Schema,
    AdditionalPropertiesItem,
    ItemsItem,
    Properties,
    /// `NamedSchema` in `Properties`: a property, its name is not a group's.
    NamedSchema,
    /// A vendor extension; only `x-kubernetes-group-version-kind` is walked.
    NamedAny,
    /// The `Any` of a GVK extension.
    GvkAny,
}

/// What to do with a length-delimited field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Copy as it is.
    Copy,
    /// A message to walk.
    Message(Kind),
    /// A path or definition entry: dropped if shadowed, else walked.
    Entry(Kind),
    /// A `$ref`: `…/NAME`, NAME reverse-DNS.
    Ref,
    /// A path name (`/apis/{group}/...`).
    PathName,
    /// A definition name (reverse-DNS).
    DefinitionName,
    /// The YAML of a GVK extension.
    GvkYaml,
}

/// The action for field `number` of `kind` (gnostic's field numbers).
pub(super) fn action(kind: Kind, number: u32) -> Action {
    use Action::*;
    use Kind::*;
    match (kind, number) {
        (Document, 2) => Message(Info),
        (Document, 8) => Message(Paths),
        (Document, 9) => Message(Definitions),
        (Document, 10) => Message(ParameterDefinitions),
        (Document, 11) => Message(ResponseDefinitions),
        (Document, 16) => Message(NamedAny),
        (Info, 7) => Message(NamedAny),
        (Paths, 1) => Message(NamedAny),
        (Paths, 2) => Entry(PathEntry),
        (PathEntry, 1) => PathName,
        (PathEntry, 2) => Message(PathItem),
        (PathItem, 1) => Ref,
        (PathItem, 2..=8) => Message(Operation),
        (PathItem, 9) => Message(ParametersItem),
        (PathItem, 10) => Message(NamedAny),
        (Operation, 8) => Message(ParametersItem),
        (Operation, 9) => Message(Responses),
        (Operation, 13) => Message(NamedAny),
        (ParametersItem, 1) => Message(Parameter),
        (ParametersItem, 2) => Message(JsonReference),
        (JsonReference, 1) => Ref,
        (Parameter, 1) => Message(BodyParameter),
        (Parameter, 2) => Message(NonBodyParameter),
        (BodyParameter, 5) => Message(Schema),
        (BodyParameter, 6) => Message(NamedAny),
        (NonBodyParameter, 1 | 4) => Message(SubSchema22),
        (NonBodyParameter, 2 | 3) => Message(SubSchema23),
        (SubSchema22, 7) | (SubSchema23, 8) => Message(PrimitivesItems),
        (SubSchema22, 22) | (SubSchema23, 23) => Message(NamedAny),
        (PrimitivesItems, 3) => Message(PrimitivesItems),
        (PrimitivesItems, 18) => Message(NamedAny),
        (Responses, 1) => Message(NamedResponseValue),
        (Responses, 2) => Message(NamedAny),
        (NamedResponseValue, 2) => Message(ResponseValue),
        (ResponseValue, 1) => Message(Response),
        (ResponseValue, 2) => Message(JsonReference),
        (Response, 2) => Message(SchemaItem),
        (Response, 5) => Message(NamedAny),
        (SchemaItem, 1) => Message(Schema),
        (SchemaItem, 2) => Message(FileSchema),
        (FileSchema, 10) => Message(NamedAny),
        (Definitions, 1) => Entry(DefinitionEntry),
        (DefinitionEntry, 1) => DefinitionName,
        (DefinitionEntry, 2) => Message(Schema),
        (ParameterDefinitions, 1) => Message(NamedParameter),
        (NamedParameter, 2) => Message(Parameter),
        (ResponseDefinitions, 1) => Message(NamedResponse),
        (NamedResponse, 2) => Message(Response),
        (Schema, 1) => Ref,
        (Schema, 21) => Message(AdditionalPropertiesItem),
        (Schema, 23) => Message(ItemsItem),
        (Schema, 24) => Message(Schema),
        (Schema, 25) => Message(Properties),
        (Schema, 31) => Message(NamedAny),
        (AdditionalPropertiesItem, 1) => Message(Schema),
        (ItemsItem, 1) => Message(Schema),
        (Properties, 1) => Message(NamedSchema),
        (NamedSchema, 2) => Message(Schema),
        // NamedAny's value is walked only for the GVK extension (see walk).
        (NamedAny, 2) => Message(GvkAny),
        (GvkAny, 2) => GvkYaml,
        _ => Copy,
    }
}
