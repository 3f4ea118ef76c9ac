"""Loaded heads and the standalone/shared loading lifecycle.

``load_artifact`` gives a ``Model``: a head with a private base. The shared path
verifies one base (``load_artifact_base``) and attaches further heads to it
(``load_artifact_with_base``), refusing any whose base pins differ.
"""

from __future__ import annotations

import os
from typing import Sequence

import torch

from laya.serving import batch
from laya.artifact.manifest import BASE_ROLES, ArtifactFiles, PinnedFile, read_artifact_files
from laya.serving.base import BaseOptions, VerifiedBase
from laya.artifact.binding import require, sha256
from laya.serving.cancel import CancelToken, CheckFn
from laya.serving.config import HeadConfig, TaskInfo, parse_encoder_config, parse_head_config
from laya.errors import ArtifactError, BudgetExceeded, LayaError, PinMismatch, RequestError
from laya.serving.finite import require_finite
from laya.serving.head_network import HeadNetwork, calibrated, head_parameter_specs
from laya.serving.rendering import Rendered
from laya.serving.request import Prediction, Request
from laya.artifact.weights import FrozenWeights, load_tensors


class Head:
    """A task head attached to a verified base, with its own tasks and calibration."""

    def __init__(self, files: ArtifactFiles, base: VerifiedBase):
        self.base = base
        self.source = str(files.directory)
        self.config: HeadConfig = parse_head_config(
            files["head_config"],
            option_markers=len(base.special.option_markers),
            max_positions=base.config.max_position_embeddings,
            hidden_size=base.hidden_size,
        )
        specs = head_parameter_specs(self.config, base.hidden_size, base.config.layer_norm_eps)
        tensors = load_tensors(files["head_weights"], specs)
        self._weights = FrozenWeights(lambda: HeadNetwork(self.config, base.hidden_size, base.config.layer_norm_eps),
                                      tensors, owner=f"head {self.source}", device=base.options.device)
        self.digest = head_digest(files["head_config"], files["head_weights"])

    @property
    def tasks(self) -> dict[str, TaskInfo]:
        return dict(self.config.tasks)

    def weight_tensors(self) -> dict[str, torch.Tensor]:
        """This head's own frozen tensors by name (the base's: ``base.weight_tensors()``)."""
        return self._weights.module.state_dict()

    @property
    def kind(self) -> str:
        return self.config.kind

    def predict(self, request: Request, *, cancel: CancelToken | None = None) -> Prediction:
        """Validate, render, encode and score ``request`` under the base's gate."""
        return batch.unwrap(self.predict_many([request], cancel=cancel)[0])

    def predict_many(self, requests: Sequence[Request], *,
                     cancel: CancelToken | None = None) -> list[Prediction | LayaError]:
        """Each request's prediction, or the error that refused it, in order, from one
        forward (laya.serving.batch): every prediction bitwise what ``predict`` gives it alone."""
        return batch.serve_requests(self, requests, cancel)

    def prepare(self, request: Request) -> tuple[TaskInfo, Rendered]:
        """Typed validation, task lookup, rendering and this head's budgets; no compute."""
        if not isinstance(request, Request):
            raise RequestError(f"expected a laya.Request, got {type(request).__name__}")
        task = self.config.tasks.get(request.task)
        if task is None:
            raise RequestError(f"unknown task {request.task!r}; this head has {sorted(self.config.tasks)}", field="task")
        if len(request.options) > task.max_options:
            raise BudgetExceeded(f"{len(request.options)} options, task {task.name!r} allows {task.max_options}",
                                 field="options")
        longest = self.config.sequence_budget * self.base.chars_per_token
        for field, text in request.texts():  # before tokenizing: its cost is the text's length
            if len(text) > longest:
                raise BudgetExceeded(f"is {len(text)} characters; within the head's sequence budget of "
                                     f"{self.config.sequence_budget} tokens a text has at most {longest} "
                                     f"({self.base.chars_per_token} per token)", field=field)
        rendered = self.base.render(request)
        if len(rendered.token_ids) > self.config.sequence_budget:
            raise BudgetExceeded(f"renders to {len(rendered.token_ids)} tokens, the head's sequence budget is "
                                 f"{self.config.sequence_budget}", field="sequence")
        return task, rendered

    def finish(self, states: torch.Tensor, rendered: Rendered, task: TaskInfo, check: CheckFn | None,
               adapter_id: str | None = None) -> Prediction:
        """Score the options from final encoder states and apply the task's calibration."""
        self._weights.check_unmodified()
        with torch.inference_mode():
            scores = self._weights.module.scores(states, rendered, task, check)
        if check is not None:
            check()
        require_finite(scores, "scores", f"head {self.source}")
        probabilities, decision = calibrated(scores, task)
        require_finite(torch.tensor(probabilities, device="cpu"), "probabilities", f"head {self.source}")
        return Prediction(task.name, probabilities, decision, self.digest, adapter_id)


# A standalone artifact is a head whose base is its own; the public name says which load made it.
Model = Head


def head_digest(config: PinnedFile, weights: PinnedFile) -> str:
    """A head's identity: sha256 over its config and weights digests."""
    return sha256(f"{config.sha256}\n{weights.sha256}\n".encode())


def load_artifact(artifact_dir: str | os.PathLike) -> Model:
    """Load a complete artifact standalone: its own base, its own head."""
    files = read_artifact_files(artifact_dir)
    return Model(files, VerifiedBase(files))


def load_artifact_base(artifact_dir: str | os.PathLike, base_dir: str | os.PathLike | None = None, *,
                       options: BaseOptions | None = None) -> VerifiedBase:
    """Verify and load the base that ``artifact_dir`` pins, once, for sharing.

    With ``base_dir`` the base is loaded from that (possibly base-only) artifact,
    and ``artifact_dir``'s own base pins must equal it.
    """
    files = read_artifact_files(artifact_dir, require_head=False)
    if base_dir is None:
        return VerifiedBase(files, options)
    base_files = read_artifact_files(base_dir, require_head=False)
    base = VerifiedBase(base_files, options)
    check_base_pins(files, base)
    return base


def load_artifact_with_base(artifact_dir: str | os.PathLike, base: VerifiedBase) -> Head:
    """Attach the head of ``artifact_dir`` to an already verified ``base``."""
    if not isinstance(base, VerifiedBase):
        raise TypeError(f"base must be a laya.VerifiedBase, got {type(base).__name__}")
    files = read_artifact_files(artifact_dir)
    check_base_pins(files, base)
    return Head(files, base)


def check_base_pins(files: ArtifactFiles, base: VerifiedBase) -> None:
    """Refuse ``files`` unless every base pin (the sha256 of each base role, ``BASE_ROLES`` in
    order) equals ``base``'s, naming the first that differs."""
    pins = {role: files[role].sha256 for role in BASE_ROLES}
    require(BASE_ROLES, base.pins, pins, lambda role, _: PinMismatch(
        f"artifact {files.directory} pins sha256 {pins[role]}, the base ({base.source}) has {base.pins[role]}",
        pin=_pin_name(files[role], base), file=files[role].path))


def _pin_name(theirs: PinnedFile, base: VerifiedBase) -> str:
    """The differing file's role, or ``depth`` for an encoder config that differs in depth."""
    if theirs.role != "encoder_config":
        return theirs.role
    try:
        depth = parse_encoder_config(theirs).num_hidden_layers
    except ArtifactError:
        depth = None
    if depth is not None and depth != base.depth:
        return "depth"
    return theirs.role
