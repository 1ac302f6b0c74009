"""devsy's compiled Runtime Protocol descriptor equals the Go SDK's API 1.2 surface, plus a listed set of API 1.3
additions, and nothing else.

The 1.2 surface is data (tests/data/runtime_v1_2_surface.json, taken from the Go devsy-runtime-sdk; its `_source`
says from where): every message, field (name, number, type, label, type_name, json_name, oneof), oneof, enum value
(name and number) and RPC (path, types, streaming flags), and the file's package, syntax and go_package. Fields and
enum values are matched by number (the wire contract), so a renamed, retyped or relabelled field is reported by
what changed. A descriptor that differs in anything else fails, naming each element and attribute that differs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FileDescriptor

from devsy.runtime.v1 import runtime_pb2 as pb

SURFACE_1_2 = Path(__file__).parent / "data" / "runtime_v1_2_surface.json"

# devsy's API 1.3 additions, the only elements devsy's proto may have beyond Go 1.2. They are provisional: devsy's
# own until a Go 1.3 proto is published (then they move into the data file, or change with it). Go 1.2 peers ignore
# them: an unknown field is skipped, an unknown enum value is kept as a number and never sent by devsy to a provider
# that did not opt in. Each entry pins the element's attributes as the surface data would.
API_1_3_ADDITIONS: dict[str, dict[str, Any]] = {
    # The host understands RECREATE_MODE_ON_RUN; a runtime advertises ON_RUN only when this is true.
    "field devsy.runtime.v1.InfoRequest #1": {
        "name": "supports_recreate_on_run", "type": "bool", "label": "singular", "type_name": None,
        "json_name": "supportsRecreateOnRun", "oneof": None},
    # A runtime that recreates the instance inside RunImage when the host allows it.
    "enum value devsy.runtime.v1.RecreateMode #3": {"name": "RECREATE_MODE_ON_RUN"},
    # The host allows an ON_RUN runtime to replace an existing instance in this RunImage.
    "field devsy.runtime.v1.RunImageRequest #22": {
        "name": "allow_recreate", "type": "bool", "label": "singular", "type_name": None,
        "json_name": "allowRecreate", "oneof": None},
}


def _field(field: Any, proto: descriptor_pb2.FieldDescriptorProto) -> dict[str, Any]:
    target = field.message_type or field.enum_type
    if proto.proto3_optional:
        label = "optional"
    elif field.message_type is not None and field.message_type.GetOptions().map_entry:
        label = "map"
    else:
        label = "repeated" if field.is_repeated else "singular"
    real_oneof = field.containing_oneof if field.containing_oneof and not proto.proto3_optional else None
    return {"name": field.name, "type": descriptor_pb2.FieldDescriptorProto.Type.Name(field.type)
            .removeprefix("TYPE_").lower(), "label": label, "type_name": target.full_name if target else None,
            "json_name": field.json_name, "oneof": real_oneof.name if real_oneof else None}


def _messages(message: Descriptor, out: dict[str, Any]) -> None:
    proto = descriptor_pb2.DescriptorProto()
    message.CopyToProto(proto)
    protos = {f.number: f for f in proto.field}
    out[message.full_name] = {
        "map_entry": message.GetOptions().map_entry,
        "fields": [{"number": f.number, **_field(f, protos[f.number])} for f in message.fields],
        "oneofs": {o.name: [f.name for f in o.fields] for o in message.oneofs
                   if not protos[o.fields[0].number].proto3_optional},
    }
    for nested in message.nested_types:
        _messages(nested, out)


def surface(file: FileDescriptor) -> dict[str, Any]:
    """The protocol surface of a compiled .proto file, in the shape of the data file."""
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    messages: dict[str, Any] = {}
    for message in file.message_types_by_name.values():
        _messages(message, messages)
    return {
        "file": {"name": file.name, "package": file.package, "syntax": proto.syntax or "proto2",
                 "go_package": proto.options.go_package},
        "messages": messages,
        "enums": {e.full_name: [{"name": v.name, "number": v.number} for v in e.values]
                  for e in file.enum_types_by_name.values()},
        "services": {s.full_name: {f"/{s.full_name}/{m.name}": {
            "input": m.input_type.full_name, "output": m.output_type.full_name,
            "client_streaming": m.client_streaming, "server_streaming": m.server_streaming} for m in s.methods}
            for s in file.services_by_name.values()},
    }


def elements(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every element of a surface under a readable key, with its attributes: fields and enum values by number."""
    out: dict[str, dict[str, Any]] = {"file": dict(data["file"])}
    for name, message in data["messages"].items():
        out[f"message {name}"] = {"map_entry": message["map_entry"]}
        for field in message["fields"]:
            out[f"field {name} #{field['number']}"] = {k: v for k, v in field.items() if k != "number"}
        for oneof, members in message["oneofs"].items():
            out[f"oneof {name}.{oneof}"] = {"fields": sorted(members)}
    for name, values in data["enums"].items():
        out[f"enum {name}"] = {}
        for value in values:
            out[f"enum value {name} #{value['number']}"] = {"name": value["name"]}
    for name, methods in data["services"].items():
        out[f"service {name}"] = {}
        for path, method in methods.items():
            out[f"rpc {path}"] = dict(method)
    return out


def differences(expected: Mapping[str, Any], actual: Mapping[str, Any],
                additions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What `actual` (devsy) changes from `expected` (Go 1.2), one line per element or attribute; [] if nothing."""
    want, have = elements(expected), elements(actual)
    problems = []
    for key in sorted(want.keys() | have.keys()):
        if key not in have:
            problems.append(f"{key} {want[key]}: in Go 1.2, missing from devsy")
        elif key not in want:
            if key not in additions:
                problems.append(f"{key} {have[key]}: in devsy, not in Go 1.2 nor among the API 1.3 additions")
            elif have[key] != additions[key]:
                problems.append(f"{key}: the API 1.3 addition is {have[key]} in devsy, listed as {additions[key]}")
        else:
            problems += [f"{key}: {attr} is {have[key].get(attr)!r} in devsy, {want[key].get(attr)!r} in Go 1.2"
                         for attr in sorted(want[key].keys() | have[key].keys())
                         if want[key].get(attr) != have[key].get(attr)]
    problems += [f"{key}: listed as an API 1.3 addition, but devsy has no such element"
                 for key in sorted(additions) if key not in have]
    return problems


def _go_1_2() -> dict[str, Any]:
    return json.loads(SURFACE_1_2.read_text())


def test_devsys_descriptor_is_go_1_2_plus_the_listed_api_1_3_additions() -> None:
    problems = differences(_go_1_2(), surface(pb.DESCRIPTOR), API_1_3_ADDITIONS)
    assert not problems, "devsy's runtime.proto differs from the Go SDK's API 1.2 surface:\n  " + "\n  ".join(problems)


def _edited(edit: str) -> dict[str, Any]:
    """The Go 1.2 surface with one change, as if devsy's proto had drifted that way."""
    data = copy.deepcopy(_go_1_2())
    fields = {f["name"]: f for f in data["messages"]["devsy.runtime.v1.HostRequirements"]["fields"]}
    memory, gpu = fields["memory_bytes"], fields["gpu"]
    if edit == "number":
        memory["number"] = 5
    elif edit == "type":
        memory["type"] = "int64"
    elif edit == "label":
        memory["label"] = "repeated"
    elif edit == "name":
        memory["name"] = "memory"
    elif edit == "type_name":
        gpu["type_name"] = "devsy.runtime.v1.GpuRequirementValue"
    elif edit == "enum value":
        data["enums"]["devsy.runtime.v1.GpuRequirementValue"][3]["name"] = "GPU_REQUIREMENT_VALUE_REQUIRED"
    elif edit == "streaming":
        data["services"]["devsy.runtime.v1.RuntimeDriver"]["/devsy.runtime.v1.RuntimeDriver/Logs"][
            "server_streaming"] = False
    return data


@pytest.mark.parametrize(("edit", "reported"), [
    ("number", ["field devsy.runtime.v1.HostRequirements #2 ", "field devsy.runtime.v1.HostRequirements #5 "]),
    ("type", ["field devsy.runtime.v1.HostRequirements #2: type is 'uint64' in devsy, 'int64' in Go 1.2"]),
    ("label", ["field devsy.runtime.v1.HostRequirements #2: label is 'singular' in devsy, 'repeated' in Go 1.2"]),
    ("name", ["field devsy.runtime.v1.HostRequirements #2: name is 'memory_bytes' in devsy, 'memory' in Go 1.2"]),
    ("type_name", ["field devsy.runtime.v1.HostRequirements #4: type_name is 'devsy.runtime.v1.GpuRequirement'"]),
    ("enum value", ["enum value devsy.runtime.v1.GpuRequirementValue #3: name is 'GPU_REQUIRED' in devsy, "
                    "'GPU_REQUIREMENT_VALUE_REQUIRED' in Go 1.2"]),
    ("streaming", ["rpc /devsy.runtime.v1.RuntimeDriver/Logs: server_streaming is True in devsy, False in Go 1.2"]),
])
def test_a_drift_in_any_1_2_element_is_reported_by_name(edit: str, reported: list[str]) -> None:
    # The comparison against an edited copy of the data: what the pin test reports if devsy's proto drifts so.
    problems = differences(_edited(edit), surface(pb.DESCRIPTOR), API_1_3_ADDITIONS)
    for text in reported:
        assert any(p.startswith(text) for p in problems), f"{text!r} not reported; got {problems}"
    assert len(problems) == len(reported), problems


def test_an_unlisted_addition_or_a_dropped_1_3_addition_is_reported() -> None:
    without = {k: v for k, v in API_1_3_ADDITIONS.items() if "RunImageRequest" not in k}
    assert differences(_go_1_2(), surface(pb.DESCRIPTOR), without) == [
        "field devsy.runtime.v1.RunImageRequest #22 {'name': 'allow_recreate', 'type': 'bool', 'label': 'singular', "
        "'type_name': None, 'json_name': 'allowRecreate', 'oneof': None}: in devsy, not in Go 1.2 nor among the API "
        "1.3 additions"]
    stale = {**API_1_3_ADDITIONS, "field devsy.runtime.v1.ExecStart #7": {"name": "pty"}}
    assert differences(_go_1_2(), surface(pb.DESCRIPTOR), stale) == [
        "field devsy.runtime.v1.ExecStart #7: listed as an API 1.3 addition, but devsy has no such element"]


def test_the_data_is_the_surface_the_go_peers_speak() -> None:
    # The Go binaries embed the descriptor they were built with (protoc-gen-go's raw descriptor); the data file must
    # be exactly its surface, so the pin is the Go peers' contract, not a hand copy of it.
    from go_interop import require_go_binary

    binary = require_go_binary("go-fake-runtime").read_bytes()
    start = binary.find(b"\n\x1edevsy/runtime/v1/runtime.proto\x12\x10devsy.runtime.v1")
    assert start >= 0, "go-fake-runtime embeds no devsy/runtime/v1/runtime.proto descriptor"
    end = binary.index(b"b\x06proto3", start) + len(b"b\x06proto3")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(binary[start:end]))
    go = surface(pool.FindFileByName("devsy/runtime/v1/runtime.proto"))
    assert differences(_go_1_2(), go, {}) == []
