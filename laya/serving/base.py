"""The verified, frozen, shareable encoder: config, weights, tokenizer, special
ids and sequence format, all parsed from the bytes whose sha256 the manifest pins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from tokenizers import Tokenizer

from laya.artifact.manifest import BASE_ROLES, ArtifactFiles
from laya.artifact.binding import sha256
from laya.serving.cancel import CheckFn
from laya.serving.config import parse_encoder_config, parse_sequence_format, parse_special_tokens
from laya.serving.encoder import Encoder, encoder_parameter_shapes, kernel_identity
from laya.errors import ArtifactError, NumericError, RequestError
from laya.serving.finite import require_finite
from laya.serving.gate import Gate
from laya.serving.rendering import Rendered, render, token_types
from laya.serving.request import Request
from laya.artifact.weights import FrozenWeights, load_tensors


@dataclass(frozen=True)
class BaseOptions:
    """How a base computes. Only the device is selectable; numerics stay float32."""

    device: str = "cpu"


class VerifiedBase:
    """One frozen encoder with its tokenizer and sequence policy, shared by heads.

    Opaque on purpose: heads attach through ``laya.load_artifact_with_base``, which
    compares pins, never dimensions.
    """

    def __init__(self, files: ArtifactFiles, options: BaseOptions | None = None):
        self.options = options or BaseOptions()
        self.gate = Gate()  # every forward on this base, standalone or shared, passes here
        self.pins: dict[str, str] = {role: files[role].sha256 for role in BASE_ROLES}
        self.source = str(files.directory)
        self.config = parse_encoder_config(files["encoder_config"])
        self.tokenizer = _parse_tokenizer(files["tokenizer"], self.config.vocab_size)
        self.chars_per_token = chars_per_token(self.tokenizer)
        self.special = parse_special_tokens(files["special_tokens"], self.config.vocab_size)
        for name, token in [("cls", self.special.cls), ("sep", self.special.sep), ("pad", self.special.pad),
                            ("state", self.special.state)] + [(f"option_markers[{i}]", t) for i, t in enumerate(self.special.option_markers)]:
            if self.tokenizer.id_to_token(token) is None:
                raise ArtifactError(f"id {token} is not in the tokenizer's vocabulary", file=files["special_tokens"].path, field=name)
        self.sequence_format = parse_sequence_format(files["sequence_format"], self.config.type_vocab_size)
        shapes = encoder_parameter_shapes(self.config)
        tensors = load_tensors(files["encoder_weights"], {n: (s, torch.float32) for n, s in shapes.items()})
        self._weights = FrozenWeights(lambda: Encoder(self.config), tensors, owner=f"base {self.source}",
                                      device=self.options.device)
        # What fixes the numbers an encode returns, besides the token ids: the cache key's prefix and
        # a feature store's kernel. v3: grouped attention and the device's linear kernels (docs/serving.md).
        kernel = kernel_identity(self.options.device) + "|"
        self.identity = sha256((kernel + "|".join(self.pins[r] for r in BASE_ROLES)).encode())

    @property
    def depth(self) -> int:
        return self.config.num_hidden_layers

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    def weight_tensors(self) -> dict[str, torch.Tensor]:
        """The frozen encoder tensors by name (read them, never write them)."""
        return self._weights.module.state_dict()

    def check_unmodified(self) -> None:
        """Raise if anyone wrote to the frozen encoder weights in place since loading."""
        self._weights.check_unmodified()

    def render(self, request: Request) -> Rendered:
        return render(request, self.tokenizer, self.special, self.sequence_format)

    def encode(self, token_ids: Sequence[int], *, check: CheckFn | None = None) -> torch.Tensor:
        """Final float32 encoder states, [len(token_ids), hidden], for one unpadded sequence:
        a packed forward of one, so bitwise what the sequence gets in any batch."""
        (states,) = self.encode_packed([token_ids], check=check)
        if isinstance(states, NumericError):
            raise states
        return states

    def encode_packed(self, sequences: Sequence[Sequence[int]], *,
                      check: CheckFn | None = None) -> list[torch.Tensor | NumericError]:
        """Each sequence's final states from one packed forward (laya.serving.encoder), each bitwise
        what it gets alone; a sequence whose states are not finite gets its NumericError
        instead, and the others still get their states. No sequences get no states."""
        if not sequences:
            return []
        ids, types, lengths = self._inputs(sequences)
        with torch.inference_mode():
            packed = self._weights.module(ids, types, lengths, check)
        return [self._finite(states) for states in packed.split(lengths)]

    def encode_layers(self, token_ids: Sequence[int]) -> list[torch.Tensor]:
        """Instrumented pass: the embedding output and every layer's output, for inspection
        (the forward ``encode`` runs, one sequence packed)."""
        ids, types, lengths = self._inputs([token_ids])
        with torch.inference_mode():
            return list(self._weights.module.layer_states(ids, types, lengths))

    def _finite(self, states: torch.Tensor) -> torch.Tensor | NumericError:
        try:
            require_finite(states, "encoder states", f"base {self.source}")
        except NumericError as exc:
            return exc
        return states

    def _inputs(self, sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """Validated ids and token types of the sequences, concatenated, as device tensors, and
        each sequence's length; refuses edited weights."""
        checked = [self._checked_ids(token_ids) for token_ids in sequences]
        self.check_unmodified()
        ids = [token for sequence in checked for token in sequence]
        types = [t for sequence in checked for t in token_types(sequence, self.special, self.sequence_format)]
        device = self.options.device
        return (torch.tensor(ids, dtype=torch.long, device=device),
                torch.tensor(types, dtype=torch.long, device=device), [len(sequence) for sequence in checked])

    def _checked_ids(self, token_ids: Sequence[int]) -> list[int]:
        ids = list(token_ids)
        if not ids or len(ids) > self.config.max_position_embeddings:
            raise RequestError(f"sequence length {len(ids)} is outside [1, {self.config.max_position_embeddings}]",
                               field="token_ids")
        for i, token in enumerate(ids):
            if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < self.config.vocab_size:
                raise RequestError(f"{token!r} is not a token id below {self.config.vocab_size}", field=f"token_ids[{i}]")
        return ids


def chars_per_token(tokenizer: Tokenizer) -> int:
    """The most characters of a request text one token stands for, plus one for a separator
    before it: the longest piece of the vocabulary (added tokens included; a continuation
    prefix such as ``##`` not counted, it spells no character of the text) or, for WordPiece,
    the longest word it still looks up (a word it cannot split, up to that length, is one
    [UNK]), whichever is longer. docs/serving.md, "Bounds before tokenizing", says what a
    text longer than a budget of these can and cannot be."""
    model = tokenizer.model
    prefix = getattr(model, "continuing_subword_prefix", None) or ""
    longest = max((len(piece) - len(prefix) if prefix and piece.startswith(prefix) else len(piece))
                  for piece in tokenizer.get_vocab(with_added_tokens=True))
    return max(longest, getattr(model, "max_input_chars_per_word", 0) or 0) + 1


def _parse_tokenizer(pinned, vocab_size: int) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_str(pinned.data.decode("utf-8"))
    except (UnicodeDecodeError, Exception) as exc:  # tokenizers raises a bare Exception on bad JSON
        raise ArtifactError(f"not a valid tokenizers JSON ({exc})", file=pinned.path) from None
    # laya encodes unpadded pieces and refuses over-budget requests: a tokenizer's own
    # batch padding or truncation settings must never apply (the bytes stay as pinned).
    tokenizer.no_padding()
    tokenizer.no_truncation()
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size > vocab_size:
        raise ArtifactError(f"tokenizer has {size} tokens, the encoder embeds only {vocab_size}", file=pinned.path)
    return tokenizer
