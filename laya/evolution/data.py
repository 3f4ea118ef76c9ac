"""Training inputs: a real tokenizer, a reproducible corpus, and exact padded microbatches.

A microbatch is the unit features are computed for: its ordered rows, its right
padding and its padded length decide the bits, so it is kept whole (never batched
with others and sliced later).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from laya.artifact.binding import json_digest, tensor_digest

PAD, UNK = "[PAD]", "[UNK]"
IGNORE = -100


def make_tokenizer(vocab: int, *, lowercase: bool = False) -> Tokenizer:
    """A word-level tokenizer over vocab-2 words plus [PAD] (id 0) and [UNK] (id 1)."""
    words = {PAD: 0, UNK: 1} | {f"w{i}": i + 2 for i in range(vocab - 2)}
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if lowercase:
        tok.normalizer = normalizers.Lowercase()
    return tok


def make_texts(vocab: int, count: int, max_words: int, seed: int) -> list[str]:
    """Texts of 2..max_words words drawn from the tokenizer's word list."""
    rng = random.Random(seed)
    return [" ".join(f"w{rng.randrange(vocab - 2)}" for _ in range(rng.randint(2, max_words))) for _ in range(count)]


@dataclass(frozen=True)
class Microbatch:
    """One exact padded microbatch: ids [B, L], per-row lengths, next-token labels, token weights."""

    examples: tuple[int, ...]
    input_ids: torch.Tensor
    lengths: tuple[int, ...]
    labels: torch.Tensor
    weights: torch.Tensor

    def token_ids(self) -> list[list[int]]:
        return [self.input_ids[r, :n].tolist() for r, n in enumerate(self.lengths)]

    def token_ids_digest(self) -> str:
        return json_digest(self.token_ids())

    def padding(self) -> dict:
        """Everything about the padding that reaches the model: side, length and the pad cells."""
        return {"side": "right", "padded_length": int(self.input_ids.shape[1]),
                "pad_cells": [self.input_ids[r, n:].tolist() for r, n in enumerate(self.lengths)]}

    def input_digest(self) -> str:
        return json_digest({"token_ids": self.token_ids(), "padding": self.padding(),
                            "input_ids": tensor_digest(self.input_ids)})


def pad_microbatch(examples: tuple[int, ...], sequences: list[list[int]], seq_len: int, pad_id: int,
                   weight_seed: int) -> Microbatch:
    """Right-pad to seq_len; labels are the next token (IGNORE past each row's end)."""
    ids = torch.full((len(sequences), seq_len), pad_id, dtype=torch.int64)
    labels = torch.full((len(sequences), seq_len), IGNORE, dtype=torch.int64)
    weights = torch.zeros(len(sequences), seq_len, dtype=torch.float32)
    for r, (ex, seq) in enumerate(zip(examples, sequences)):
        if not 2 <= len(seq) <= seq_len:
            raise ValueError(f"example {ex} has {len(seq)} tokens; need 2..{seq_len}")
        ids[r, :len(seq)] = torch.tensor(seq)
        labels[r, :len(seq) - 1] = torch.tensor(seq[1:])
        rng = random.Random(f"{weight_seed}:{ex}")  # weights follow the example, not its slot
        weights[r, :len(seq) - 1] = torch.tensor([rng.choice((0.5, 0.75, 1.0, 1.25, 1.5)) for _ in seq[1:]])
    return Microbatch(tuple(examples), ids, tuple(len(s) for s in sequences), labels, weights)


def make_microbatches(tok: Tokenizer, texts: list[str], groups: list[tuple[int, ...]], seq_len: int,
                      weight_seed: int) -> list[Microbatch]:
    """Tokenize the texts and group them, in the given order, into padded microbatches."""
    encoded = [tok.encode(t).ids for t in texts]
    pad_id = tok.token_to_id(PAD)
    return [pad_microbatch(g, [encoded[i] for i in g], seq_len, pad_id, weight_seed) for g in groups]


def consecutive_groups(count: int, size: int) -> list[tuple[int, ...]]:
    return [tuple(range(i * size, (i + 1) * size)) for i in range(count)]
