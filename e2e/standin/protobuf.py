"""A small Kubernetes protobuf encoder for the stand-in (stdlib only).

It turns the stand-in's JSON objects into the bytes kube-apiserver sends for
`Accept: application/vnd.kubernetes.protobuf`: the envelope (`k8s\\0`, then a
`runtime.Unknown` {1 typeMeta {1 apiVersion, 2 kind}, 2 raw, 3
contentEncoding, 4 contentType}), lists ({1 ListMeta, 2 items}) and watch
frames (a 4-byte big-endian length, then a `meta.k8s.io/v1 WatchEvent` {1
type, 2 object: RawExtension {1 raw = the envelope}}).

Encoded as Kubernetes' generated marshalers do (the captures of
testdata/kube-1.24 show it, and `test_watch_list.py` compares this encoder
with them byte for byte): fields in ascending number; a Go value field (a
string, an int, a struct that is not a pointer) is always written, empty or
zero included, so a bookmark's ObjectMeta carries an empty name; a pointer
field only when set; map entries sorted by key, each with key and value;
a zero `Time` as an empty message. Field numbers are Kubernetes' (the
`protobuf:"..."` tags of k8s.io/api and k8s.io/apimachinery `types.go`,
looked up, not copied), listed in the schemas below.

Only the kinds in SCHEMAS can be encoded (`supports`). Their schemas list
every field these kinds have as of Kubernetes 1.36; a JSON member that is
none of them (the stand-in stores built-in objects unpruned) is left out,
as a real apiserver would have dropped it.
"""
import base64
import datetime
import json

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_CONTENT_TYPE = "application/vnd.kubernetes.protobuf;stream=watch"


# ---- wire ---------------------------------------------------------------------------------

def varint(n):
    n &= (1 << 64) - 1  # a negative int64 is its two's complement, ten bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(number, wire_type):
    return varint(number << 3 | wire_type)


def length_delimited(number, data):
    if isinstance(data, str):
        data = data.encode()
    return key(number, 2) + varint(len(data)) + data


def varint_field(number, n):
    return key(number, 0) + varint(int(n))


# ---- schemas ------------------------------------------------------------------------------
# A message is a tuple of fields (number, JSON name, type, mode), in ascending
# number. type: "string", "bytes" (base64 in JSON), "int" (varint), "bool",
# "time" (meta/v1 Time from RFC 3339), "fieldsV1" (its JSON value as raw
# bytes), "map" (string to string), "map-bytes" (string to base64 bytes), or
# a message (tuple). mode: "value" (a Go value: always written), "ptr"
# (written when present), "rep" (one field per element). A JSON name of None
# is an inlined struct (`json:",inline"`): its fields sit in the parent's JSON.

TIME = ((1, "seconds", "int", "value"), (2, "nanos", "int", "value"))

# meta/v1 ManagedFieldsEntry: manager 1, operation 2, apiVersion 3, time 4,
# fieldsType 6, fieldsV1 7 ({1 Raw}), subresource 8 (5 is a tombstone).
MANAGED_FIELDS_ENTRY = (
    (1, "manager", "string", "value"), (2, "operation", "string", "value"),
    (3, "apiVersion", "string", "value"), (4, "time", "time", "ptr"),
    (6, "fieldsType", "string", "value"), (7, "fieldsV1", "fieldsV1", "ptr"),
    (8, "subresource", "string", "value"))

# meta/v1 OwnerReference: kind 1, name 3, uid 4, apiVersion 5, controller 6,
# blockOwnerDeletion 7 (the last two *bool).
OWNER_REFERENCE = (
    (1, "kind", "string", "value"), (3, "name", "string", "value"), (4, "uid", "string", "value"),
    (5, "apiVersion", "string", "value"), (6, "controller", "bool", "ptr"),
    (7, "blockOwnerDeletion", "bool", "ptr"))

# meta/v1 ObjectMeta: name 1, generateName 2, namespace 3, selfLink 4, uid 5,
# resourceVersion 6, generation 7, creationTimestamp 8 (a Time value),
# deletionTimestamp 9 (*Time), deletionGracePeriodSeconds 10 (*int64),
# labels 11, annotations 12, ownerReferences 13, finalizers 14,
# managedFields 17. 15 (clusterName) was removed in Kubernetes 1.25: 1.24
# still wrote it, empty (KUBE_1_24 below, for the captures).
OBJECT_META = (
    (1, "name", "string", "value"), (2, "generateName", "string", "value"),
    (3, "namespace", "string", "value"), (4, "selfLink", "string", "value"),
    (5, "uid", "string", "value"), (6, "resourceVersion", "string", "value"),
    (7, "generation", "int", "value"), (8, "creationTimestamp", "time", "value"),
    (9, "deletionTimestamp", "time", "ptr"), (10, "deletionGracePeriodSeconds", "int", "ptr"),
    (11, "labels", "map", "value"), (12, "annotations", "map", "value"),
    (13, "ownerReferences", OWNER_REFERENCE, "rep"), (14, "finalizers", "string", "rep"),
    (17, "managedFields", MANAGED_FIELDS_ENTRY, "rep"))
OBJECT_META_1_24 = OBJECT_META[:14] + ((15, "clusterName", "string", "value"),) + OBJECT_META[14:]

# meta/v1 ListMeta: selfLink 1, resourceVersion 2, continue 3,
# remainingItemCount 4 (*int64).
LIST_META = ((1, "selfLink", "string", "value"), (2, "resourceVersion", "string", "value"),
             (3, "continue", "string", "value"), (4, "remainingItemCount", "int", "ptr"))

# meta/v1 LabelSelector: matchLabels 1, matchExpressions 2 {key 1, operator 2,
# values 3}.
LABEL_SELECTOR = ((1, "matchLabels", "map", "value"),
                  (2, "matchExpressions", ((1, "key", "string", "value"), (2, "operator", "string", "value"),
                                           (3, "values", "string", "rep")), "rep"))

# rbac/v1 PolicyRule: verbs 1, apiGroups 2, resources 3, resourceNames 4,
# nonResourceURLs 5. AggregationRule: clusterRoleSelectors 1. Subject: kind
# 1, apiGroup 2, name 3, namespace 4. RoleRef: apiGroup 1, kind 2, name 3.
POLICY_RULE = ((1, "verbs", "string", "rep"), (2, "apiGroups", "string", "rep"),
               (3, "resources", "string", "rep"), (4, "resourceNames", "string", "rep"),
               (5, "nonResourceURLs", "string", "rep"))
AGGREGATION_RULE = ((1, "clusterRoleSelectors", LABEL_SELECTOR, "rep"),)
SUBJECT = ((1, "kind", "string", "value"), (2, "apiGroup", "string", "value"),
           (3, "name", "string", "value"), (4, "namespace", "string", "value"))
ROLE_REF = ((1, "apiGroup", "string", "value"), (2, "kind", "string", "value"), (3, "name", "string", "value"))

# admissionregistration/v1: ServiceReference {namespace 1, name 2, path 3
# (*string), port 4 (*int32)}; WebhookClientConfig {service 1 (ptr),
# caBundle 2 ([]byte), url 3 (*string)}; Rule {apiGroups 1, apiVersions 2,
# resources 3, scope 4 (*string)}; RuleWithOperations {operations 1, rule 2
# (inlined in JSON)}; MatchCondition {name 1, expression 2}.
SERVICE_REFERENCE = ((1, "namespace", "string", "value"), (2, "name", "string", "value"),
                     (3, "path", "string", "ptr"), (4, "port", "int", "ptr"))
CLIENT_CONFIG = ((1, "service", SERVICE_REFERENCE, "ptr"), (2, "caBundle", "bytes", "ptr"),
                 (3, "url", "string", "ptr"))
RULE = ((1, "apiGroups", "string", "rep"), (2, "apiVersions", "string", "rep"),
        (3, "resources", "string", "rep"), (4, "scope", "string", "ptr"))
RULE_WITH_OPERATIONS = ((1, "operations", "string", "rep"), (2, None, RULE, "value"))
MATCH_CONDITION = ((1, "name", "string", "value"), (2, "expression", "string", "value"))
# ValidatingWebhook: name 1, clientConfig 2, rules 3, failurePolicy 4,
# namespaceSelector 5, sideEffects 6, timeoutSeconds 7,
# admissionReviewVersions 8, matchPolicy 9, objectSelector 10,
# matchConditions 11. MutatingWebhook: the same to 9, then
# reinvocationPolicy 10, objectSelector 11, matchConditions 12.
_WEBHOOK = ((1, "name", "string", "value"), (2, "clientConfig", CLIENT_CONFIG, "value"),
            (3, "rules", RULE_WITH_OPERATIONS, "rep"), (4, "failurePolicy", "string", "ptr"),
            (5, "namespaceSelector", LABEL_SELECTOR, "ptr"), (6, "sideEffects", "string", "ptr"),
            (7, "timeoutSeconds", "int", "ptr"), (8, "admissionReviewVersions", "string", "rep"),
            (9, "matchPolicy", "string", "ptr"))
VALIDATING_WEBHOOK = _WEBHOOK + ((10, "objectSelector", LABEL_SELECTOR, "ptr"),
                                 (11, "matchConditions", MATCH_CONDITION, "rep"))
MUTATING_WEBHOOK = _WEBHOOK + ((10, "reinvocationPolicy", "string", "ptr"),
                               (11, "objectSelector", LABEL_SELECTOR, "ptr"),
                               (12, "matchConditions", MATCH_CONDITION, "rep"))

META = (1, "metadata", "OBJECT_META", "value")  # resolved per encoding (1.24 or not)

# Top-level kinds by (group, kind): each starts with metadata 1.
SCHEMAS = {
    # rbac/v1 ClusterRole {metadata 1, rules 2, aggregationRule 3 (ptr)};
    # Role {metadata 1, rules 2}.
    ("rbac.authorization.k8s.io", "ClusterRole"): (META, (2, "rules", POLICY_RULE, "rep"),
                                                   (3, "aggregationRule", AGGREGATION_RULE, "ptr")),
    ("rbac.authorization.k8s.io", "Role"): (META, (2, "rules", POLICY_RULE, "rep")),
    # ClusterRoleBinding and RoleBinding {metadata 1, subjects 2, roleRef 3}.
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (META, (2, "subjects", SUBJECT, "rep"),
                                                          (3, "roleRef", ROLE_REF, "value")),
    ("rbac.authorization.k8s.io", "RoleBinding"): (META, (2, "subjects", SUBJECT, "rep"),
                                                   (3, "roleRef", ROLE_REF, "value")),
    # {metadata 1, Webhooks 2}.
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (
        META, (2, "webhooks", VALIDATING_WEBHOOK, "rep")),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): (
        META, (2, "webhooks", MUTATING_WEBHOOK, "rep")),
    # core/v1 ConfigMap {metadata 1, data 2, binaryData 3, immutable 4 (*bool)}.
    ("", "ConfigMap"): (META, (2, "data", "map", "value"), (3, "binaryData", "map-bytes", "value"),
                        (4, "immutable", "bool", "ptr")),
}


def supports(group, kind):
    return (group, kind) in SCHEMAS


# ---- encoding -----------------------------------------------------------------------------

def seconds(rfc3339):
    t = datetime.datetime.strptime(rfc3339.replace("Z", "+00:00"), "%Y-%m-%dT%H:%M:%S%z")
    return int(t.timestamp())


def scalar(number, typ, value):
    if typ == "string":
        return length_delimited(number, value or "")
    if typ == "bytes":
        return length_delimited(number, base64.b64decode(value or ""))
    if typ == "int":
        return varint_field(number, value or 0)
    if typ == "bool":
        return varint_field(number, 1 if value else 0)
    if typ == "time":  # a zero Time is an empty message
        return length_delimited(number, message({"seconds": seconds(value), "nanos": 0}, TIME) if value else b"")
    if typ == "fieldsV1":
        return length_delimited(number, length_delimited(1, json.dumps(value, separators=(",", ":"))))
    raise ValueError(f"unknown protobuf type {typ!r}")


def message(obj, fields, kube_1_24=False):
    """`obj` (a JSON object, or None: all zero) as the message `fields`."""
    obj, out = obj or {}, bytearray()
    for number, name, typ, mode in fields:
        if typ == "OBJECT_META":
            typ = OBJECT_META_1_24 if kube_1_24 else OBJECT_META
        value = obj if name is None else obj.get(name)
        if mode == "ptr" and value is None:
            continue
        if typ in ("map", "map-bytes"):
            vtype = "bytes" if typ == "map-bytes" else "string"
            for k in sorted(value or {}):
                out += length_delimited(number, scalar(1, "string", k) + scalar(2, vtype, value[k]))
        elif mode == "rep":
            for item in value or []:
                out += length_delimited(number, message(item, typ, kube_1_24)) if isinstance(typ, tuple) \
                    else scalar(number, typ, item)
        elif isinstance(typ, tuple):
            out += length_delimited(number, message(value, typ, kube_1_24))
        else:
            out += scalar(number, typ, value)
    return bytes(out)


def group_of(api_version):
    return api_version.rpartition("/")[0]


def envelope(api_version, kind, raw):
    """`k8s\\0` + runtime.Unknown {typeMeta {apiVersion, kind}, raw, "", ""}."""
    type_meta = length_delimited(1, api_version) + length_delimited(2, kind)
    return MAGIC + length_delimited(1, type_meta) + length_delimited(2, raw) \
        + length_delimited(3, b"") + length_delimited(4, b"")


def encode_object(obj, kube_1_24=False):
    """A whole object (with apiVersion and kind) in its envelope."""
    schema = SCHEMAS[(group_of(obj["apiVersion"]), obj["kind"])]
    return envelope(obj["apiVersion"], obj["kind"], message(obj, schema, kube_1_24))


def encode_list(api_version, kind, resource_version, items, kube_1_24=False):
    """A `{kind}List` {1 ListMeta, 2 items} in its envelope; `items` without
    apiVersion and kind, as in a typed list."""
    schema = SCHEMAS[(group_of(api_version), kind)]
    body = length_delimited(1, message({"resourceVersion": resource_version}, LIST_META))
    for item in items:
        body += length_delimited(2, message(item, schema, kube_1_24))
    return envelope(api_version, kind + "List", body)


def watch_frame(event_type, obj, kube_1_24=False):
    """One length-prefixed WatchEvent {1 type, 2 RawExtension {1 raw}}."""
    event = length_delimited(1, event_type) + length_delimited(2, length_delimited(1, encode_object(obj, kube_1_24)))
    return len(event).to_bytes(4, "big") + event
