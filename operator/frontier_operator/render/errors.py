"""Why a plan cannot be rendered: a typed reason and a sentence, never a half-built manifest."""

from __future__ import annotations

from enum import StrEnum


class RenderErrorReason(StrEnum):
    POOL_NOT_FOUND = "pool-not-found"
    UNKNOWN_GPU = "unknown-gpu"
    GPU_NOT_IN_POOL = "gpu-not-in-pool"
    GPUS_EXCEED_NODE = "gpus-exceed-node"
    NODES_UNEVEN = "nodes-uneven"
    UNKNOWN_FORMAT = "unknown-format"
    FORMAT_UNSUPPORTED_ON_GPU = "format-unsupported-on-gpu"
    KV_FORMAT_UNSUPPORTED_ON_GPU = "kv-format-unsupported-on-gpu"
    NO_CHECKPOINT = "no-checkpoint"
    SPEC_NEEDS_DRAFT_MODEL = "spec-needs-draft-model"
    PARALLELISM_INVALID = "parallelism-invalid"
    CHUNK_NOT_PAGE_ALIGNED = "chunk-not-page-aligned"
    ROLES_INCOMPLETE = "roles-incomplete"
    PD_ROLES_DISAGREE = "pd-roles-disagree"
    TRANSFER_BACKEND_UNKNOWN = "transfer-backend-unknown"
    MODEL_MISMATCH = "model-mismatch"
    EXTRA_ARG_OWNED = "extra-arg-owned"
    EXTRA_ARG_MALFORMED = "extra-arg-malformed"
    ENV_OWNED = "env-owned"
    PLAN_FILE_INVALID = "plan-file-invalid"


class RenderError(Exception):
    """A plan and target that cannot become correct SGLang pods; `reason` is stable, `detail` is for people."""

    def __init__(self, reason: RenderErrorReason, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}")
