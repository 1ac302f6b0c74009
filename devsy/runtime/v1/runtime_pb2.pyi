from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MountType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MOUNT_TYPE_UNSPECIFIED: _ClassVar[MountType]
    MOUNT_TYPE_BIND: _ClassVar[MountType]
    MOUNT_TYPE_VOLUME: _ClassVar[MountType]
    MOUNT_TYPE_TMPFS: _ClassVar[MountType]

class RecreateMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECREATE_MODE_UNSPECIFIED: _ClassVar[RecreateMode]
    RECREATE_MODE_DELETE: _ClassVar[RecreateMode]
    RECREATE_MODE_STOP: _ClassVar[RecreateMode]
    RECREATE_MODE_ON_RUN: _ClassVar[RecreateMode]

class GpuRequirementValue(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GPU_UNSPECIFIED: _ClassVar[GpuRequirementValue]
    GPU_FALSE: _ClassVar[GpuRequirementValue]
    GPU_OPTIONAL: _ClassVar[GpuRequirementValue]
    GPU_REQUIRED: _ClassVar[GpuRequirementValue]

class RuntimeErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUNTIME_ERROR_CODE_UNKNOWN: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_NOT_FOUND: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_ALREADY_EXISTS: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_INVALID_ARGUMENT: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_UNSUPPORTED: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_UNAVAILABLE: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_FAILED_PRECONDITION: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_PERMISSION_DENIED: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_TIMEOUT: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_CANCELLED: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_RUNTIME_FAILURE: _ClassVar[RuntimeErrorCode]
    RUNTIME_ERROR_CODE_INCOMPATIBLE_VERSION: _ClassVar[RuntimeErrorCode]
MOUNT_TYPE_UNSPECIFIED: MountType
MOUNT_TYPE_BIND: MountType
MOUNT_TYPE_VOLUME: MountType
MOUNT_TYPE_TMPFS: MountType
RECREATE_MODE_UNSPECIFIED: RecreateMode
RECREATE_MODE_DELETE: RecreateMode
RECREATE_MODE_STOP: RecreateMode
RECREATE_MODE_ON_RUN: RecreateMode
GPU_UNSPECIFIED: GpuRequirementValue
GPU_FALSE: GpuRequirementValue
GPU_OPTIONAL: GpuRequirementValue
GPU_REQUIRED: GpuRequirementValue
RUNTIME_ERROR_CODE_UNKNOWN: RuntimeErrorCode
RUNTIME_ERROR_CODE_NOT_FOUND: RuntimeErrorCode
RUNTIME_ERROR_CODE_ALREADY_EXISTS: RuntimeErrorCode
RUNTIME_ERROR_CODE_INVALID_ARGUMENT: RuntimeErrorCode
RUNTIME_ERROR_CODE_UNSUPPORTED: RuntimeErrorCode
RUNTIME_ERROR_CODE_UNAVAILABLE: RuntimeErrorCode
RUNTIME_ERROR_CODE_FAILED_PRECONDITION: RuntimeErrorCode
RUNTIME_ERROR_CODE_PERMISSION_DENIED: RuntimeErrorCode
RUNTIME_ERROR_CODE_TIMEOUT: RuntimeErrorCode
RUNTIME_ERROR_CODE_CANCELLED: RuntimeErrorCode
RUNTIME_ERROR_CODE_RUNTIME_FAILURE: RuntimeErrorCode
RUNTIME_ERROR_CODE_INCOMPATIBLE_VERSION: RuntimeErrorCode

class InfoRequest(_message.Message):
    __slots__ = ("supports_recreate_on_run",)
    SUPPORTS_RECREATE_ON_RUN_FIELD_NUMBER: _ClassVar[int]
    supports_recreate_on_run: bool
    def __init__(self, supports_recreate_on_run: _Optional[bool] = ...) -> None: ...

class InfoResponse(_message.Message):
    __slots__ = ("api_major", "api_minor", "driver_name", "driver_version", "runtime_name", "runtime_version", "capabilities")
    API_MAJOR_FIELD_NUMBER: _ClassVar[int]
    API_MINOR_FIELD_NUMBER: _ClassVar[int]
    DRIVER_NAME_FIELD_NUMBER: _ClassVar[int]
    DRIVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_NAME_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    api_major: int
    api_minor: int
    driver_name: str
    driver_version: str
    runtime_name: str
    runtime_version: str
    capabilities: Capabilities
    def __init__(self, api_major: _Optional[int] = ..., api_minor: _Optional[int] = ..., driver_name: _Optional[str] = ..., driver_version: _Optional[str] = ..., runtime_name: _Optional[str] = ..., runtime_version: _Optional[str] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ...) -> None: ...

class Capabilities(_message.Message):
    __slots__ = ("mount_types", "requires_mount_streaming", "requires_workspace_chown", "recreate_mode", "provisioning_preflight", "reprovision", "logs", "reuse_preflight")
    MOUNT_TYPES_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_MOUNT_STREAMING_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_WORKSPACE_CHOWN_FIELD_NUMBER: _ClassVar[int]
    RECREATE_MODE_FIELD_NUMBER: _ClassVar[int]
    PROVISIONING_PREFLIGHT_FIELD_NUMBER: _ClassVar[int]
    REPROVISION_FIELD_NUMBER: _ClassVar[int]
    LOGS_FIELD_NUMBER: _ClassVar[int]
    REUSE_PREFLIGHT_FIELD_NUMBER: _ClassVar[int]
    mount_types: _containers.RepeatedScalarFieldContainer[MountType]
    requires_mount_streaming: bool
    requires_workspace_chown: bool
    recreate_mode: RecreateMode
    provisioning_preflight: bool
    reprovision: bool
    logs: bool
    reuse_preflight: bool
    def __init__(self, mount_types: _Optional[_Iterable[_Union[MountType, str]]] = ..., requires_mount_streaming: _Optional[bool] = ..., requires_workspace_chown: _Optional[bool] = ..., recreate_mode: _Optional[_Union[RecreateMode, str]] = ..., provisioning_preflight: _Optional[bool] = ..., reprovision: _Optional[bool] = ..., logs: _Optional[bool] = ..., reuse_preflight: _Optional[bool] = ...) -> None: ...

class PreflightRequest(_message.Message):
    __slots__ = ("disable_auto_start",)
    DISABLE_AUTO_START_FIELD_NUMBER: _ClassVar[int]
    disable_auto_start: bool
    def __init__(self, disable_auto_start: _Optional[bool] = ...) -> None: ...

class PreflightResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProvisioningPreflightRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProvisioningPreflightResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReusePreflightRequest(_message.Message):
    __slots__ = ("workspace_id", "remote_user")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    REMOTE_USER_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    remote_user: str
    def __init__(self, workspace_id: _Optional[str] = ..., remote_user: _Optional[str] = ...) -> None: ...

class ReusePreflightResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FindRequest(_message.Message):
    __slots__ = ("workspace_id",)
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class FindResponse(_message.Message):
    __slots__ = ("found", "container")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    found: bool
    container: ContainerDetails
    def __init__(self, found: _Optional[bool] = ..., container: _Optional[_Union[ContainerDetails, _Mapping]] = ...) -> None: ...

class ContainerDetails(_message.Message):
    __slots__ = ("id", "created_at", "state", "config", "mounts")
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    MOUNTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    created_at: str
    state: ContainerState
    config: ContainerConfig
    mounts: _containers.RepeatedCompositeFieldContainer[ContainerMount]
    def __init__(self, id: _Optional[str] = ..., created_at: _Optional[str] = ..., state: _Optional[_Union[ContainerState, _Mapping]] = ..., config: _Optional[_Union[ContainerConfig, _Mapping]] = ..., mounts: _Optional[_Iterable[_Union[ContainerMount, _Mapping]]] = ...) -> None: ...

class ContainerState(_message.Message):
    __slots__ = ("status", "started_at", "exit_code", "error")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    status: str
    started_at: str
    exit_code: int
    error: str
    def __init__(self, status: _Optional[str] = ..., started_at: _Optional[str] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class ContainerConfig(_message.Message):
    __slots__ = ("labels", "working_dir", "user")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABELS_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.ScalarMap[str, str]
    working_dir: str
    user: str
    def __init__(self, labels: _Optional[_Mapping[str, str]] = ..., working_dir: _Optional[str] = ..., user: _Optional[str] = ...) -> None: ...

class ContainerMount(_message.Message):
    __slots__ = ("type", "source", "destination")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    type: str
    source: str
    destination: str
    def __init__(self, type: _Optional[str] = ..., source: _Optional[str] = ..., destination: _Optional[str] = ...) -> None: ...

class TargetArchitectureRequest(_message.Message):
    __slots__ = ("workspace_id",)
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class TargetArchitectureResponse(_message.Message):
    __slots__ = ("architecture",)
    ARCHITECTURE_FIELD_NUMBER: _ClassVar[int]
    architecture: str
    def __init__(self, architecture: _Optional[str] = ...) -> None: ...

class RunImageRequest(_message.Message):
    __slots__ = ("workspace_id", "image", "image_built_locally", "user", "entrypoint", "args", "environment", "labels", "cap_add", "security_opt", "privileged", "init", "workspace_mount", "mounts", "userns", "uid_map", "gid_map", "platform", "host_requirements", "remote_user", "dockerless", "allow_recreate")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_BUILT_LOCALLY_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    ENTRYPOINT_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CAP_ADD_FIELD_NUMBER: _ClassVar[int]
    SECURITY_OPT_FIELD_NUMBER: _ClassVar[int]
    PRIVILEGED_FIELD_NUMBER: _ClassVar[int]
    INIT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_MOUNT_FIELD_NUMBER: _ClassVar[int]
    MOUNTS_FIELD_NUMBER: _ClassVar[int]
    USERNS_FIELD_NUMBER: _ClassVar[int]
    UID_MAP_FIELD_NUMBER: _ClassVar[int]
    GID_MAP_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    HOST_REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    REMOTE_USER_FIELD_NUMBER: _ClassVar[int]
    DOCKERLESS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_RECREATE_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    image: str
    image_built_locally: bool
    user: str
    entrypoint: str
    args: _containers.RepeatedScalarFieldContainer[str]
    environment: _containers.ScalarMap[str, str]
    labels: _containers.RepeatedScalarFieldContainer[str]
    cap_add: _containers.RepeatedScalarFieldContainer[str]
    security_opt: _containers.RepeatedScalarFieldContainer[str]
    privileged: bool
    init: bool
    workspace_mount: Mount
    mounts: _containers.RepeatedCompositeFieldContainer[Mount]
    userns: str
    uid_map: _containers.RepeatedScalarFieldContainer[str]
    gid_map: _containers.RepeatedScalarFieldContainer[str]
    platform: str
    host_requirements: HostRequirements
    remote_user: str
    dockerless: bool
    allow_recreate: bool
    def __init__(self, workspace_id: _Optional[str] = ..., image: _Optional[str] = ..., image_built_locally: _Optional[bool] = ..., user: _Optional[str] = ..., entrypoint: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., environment: _Optional[_Mapping[str, str]] = ..., labels: _Optional[_Iterable[str]] = ..., cap_add: _Optional[_Iterable[str]] = ..., security_opt: _Optional[_Iterable[str]] = ..., privileged: _Optional[bool] = ..., init: _Optional[bool] = ..., workspace_mount: _Optional[_Union[Mount, _Mapping]] = ..., mounts: _Optional[_Iterable[_Union[Mount, _Mapping]]] = ..., userns: _Optional[str] = ..., uid_map: _Optional[_Iterable[str]] = ..., gid_map: _Optional[_Iterable[str]] = ..., platform: _Optional[str] = ..., host_requirements: _Optional[_Union[HostRequirements, _Mapping]] = ..., remote_user: _Optional[str] = ..., dockerless: _Optional[bool] = ..., allow_recreate: _Optional[bool] = ...) -> None: ...

class RunImageResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Mount(_message.Message):
    __slots__ = ("type", "source", "target", "read_only", "options")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    type: MountType
    source: str
    target: str
    read_only: bool
    options: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, type: _Optional[_Union[MountType, str]] = ..., source: _Optional[str] = ..., target: _Optional[str] = ..., read_only: _Optional[bool] = ..., options: _Optional[_Iterable[str]] = ...) -> None: ...

class HostRequirements(_message.Message):
    __slots__ = ("cpus", "memory_bytes", "storage_bytes", "gpu")
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    STORAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    cpus: int
    memory_bytes: int
    storage_bytes: int
    gpu: GpuRequirement
    def __init__(self, cpus: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., storage_bytes: _Optional[int] = ..., gpu: _Optional[_Union[GpuRequirement, _Mapping]] = ...) -> None: ...

class GpuRequirement(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: GpuRequirementValue
    def __init__(self, value: _Optional[_Union[GpuRequirementValue, str]] = ...) -> None: ...

class StartRequest(_message.Message):
    __slots__ = ("workspace_id",)
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class StartResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StopRequest(_message.Message):
    __slots__ = ("workspace_id",)
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class StopResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("workspace_id",)
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExecClientMessage(_message.Message):
    __slots__ = ("start", "stdin", "close_stdin")
    START_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    CLOSE_STDIN_FIELD_NUMBER: _ClassVar[int]
    start: ExecStart
    stdin: bytes
    close_stdin: CloseStdin
    def __init__(self, start: _Optional[_Union[ExecStart, _Mapping]] = ..., stdin: _Optional[bytes] = ..., close_stdin: _Optional[_Union[CloseStdin, _Mapping]] = ...) -> None: ...

class ExecStart(_message.Message):
    __slots__ = ("workspace_id", "argv", "user", "workdir", "environment", "tty")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    user: str
    workdir: str
    environment: _containers.ScalarMap[str, str]
    tty: bool
    def __init__(self, workspace_id: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., user: _Optional[str] = ..., workdir: _Optional[str] = ..., environment: _Optional[_Mapping[str, str]] = ..., tty: _Optional[bool] = ...) -> None: ...

class CloseStdin(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExecServerMessage(_message.Message):
    __slots__ = ("stdout", "stderr", "exit")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    stdout: OutputChunk
    stderr: OutputChunk
    exit: ExecExit
    def __init__(self, stdout: _Optional[_Union[OutputChunk, _Mapping]] = ..., stderr: _Optional[_Union[OutputChunk, _Mapping]] = ..., exit: _Optional[_Union[ExecExit, _Mapping]] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class ExecExit(_message.Message):
    __slots__ = ("exit_code", "signal")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    signal: str
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[str] = ...) -> None: ...

class LogsRequest(_message.Message):
    __slots__ = ("workspace_id",)
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class RuntimeError(_message.Message):
    __slots__ = ("code", "message", "runtime_message", "retryable", "details")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: RuntimeErrorCode
    message: str
    runtime_message: str
    retryable: bool
    details: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[_Union[RuntimeErrorCode, str]] = ..., message: _Optional[str] = ..., runtime_message: _Optional[str] = ..., retryable: _Optional[bool] = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...
