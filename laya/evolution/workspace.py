"""An experiment and the committed files both arms start from.

The orchestrating process writes the parent, tokenizer, head replica and initial
tail to a directory once; every worker reads them from there. A Workspace is plain
data (paths, digests, microbatches) so it can be shipped to worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from laya.artifact.binding import read_hashed

from .data import Microbatch, consecutive_groups, make_microbatches, make_texts, make_tokenizer
from .layouts import Layout, init_tail
from .parent import HEAD_NAMES, CONFIGS, ParentConfig, init_parent, write_parent
from .tail_training import AdamSettings


@dataclass(frozen=True)
class Experiment:
    config: ParentConfig = CONFIGS["tiny"]
    layout: Layout = Layout("appended")
    parent_seed: int = 0
    tail_seed: int = 1
    data_seed: int = 2
    microbatch: int = 2          # rows per microbatch
    microbatches: int = 4        # distinct microbatches; the schedule cycles through them
    updates: int = 8
    split: int | None = None     # owner rank 0 holds blocks [0, split), rank 1 the rest
    retention_weight: float = 0.5
    adam: AdamSettings = field(default_factory=AdamSettings)
    device: str = "cpu"          # where every arm computes; tensors cross processes and files on the CPU

    def __post_init__(self) -> None:
        # An experiment of no update compares nothing, and its arms would read as equal.
        for name in ("microbatch", "microbatches", "updates"):
            if getattr(self, name) < 1:
                raise ValueError(f"Experiment.{name} must be at least 1, not {getattr(self, name)}")

    @property
    def cut(self) -> int:
        return self.layout.cut_layer(self.config)

    @property
    def owner_split(self) -> int:
        split = self.cut // 2 if self.split is None else self.split
        if not 0 <= split <= self.cut:
            raise ValueError(f"owner split {split} outside 0..{self.cut}")
        return split

    @property
    def retention(self) -> float:
        return self.retention_weight if "reference" in self.layout.streams else 0.0

    def schedule(self) -> list[int]:
        return [u % self.microbatches for u in range(self.updates)]


@dataclass(frozen=True)
class Workspace:
    exp: Experiment
    root: Path
    parent_file: Path
    parent_digest: str           # the committed parent the learner extends
    tokenizer_file: Path
    head_file: Path              # the learner's read-only head replica
    tail_file: Path
    microbatches: tuple[Microbatch, ...]
    packet_dir: Path

    def packet(self, index: int) -> Path:
        return self.packet_dir / f"mb-{index:04d}"

    def with_(self, **changes) -> "Workspace":
        return replace(self, **changes)


def prepare(exp: Experiment, root: Path, *, groups: list[tuple[int, ...]] | None = None) -> Workspace:
    """Commit parent, tokenizer, head replica and initial tail under root; build the microbatches."""
    root.mkdir(parents=True, exist_ok=True)
    cfg = exp.config
    parent = init_parent(cfg, exp.parent_seed)
    parent_digest = write_parent(root / "parent.safetensors", cfg, parent)
    tok = make_tokenizer(cfg.vocab)
    (root / "tokenizer.json").write_text(tok.to_str())
    (root / "head.safetensors").write_bytes(st_save({k: parent[k] for k in HEAD_NAMES}))
    (root / "tail_init.safetensors").write_bytes(st_save(init_tail(exp.layout, cfg, parent, exp.tail_seed)))
    groups = groups or consecutive_groups(exp.microbatches, exp.microbatch)
    texts = make_texts(cfg.vocab, max(max(g) for g in groups) + 1, cfg.seq_len, exp.data_seed)
    mbs = make_microbatches(tok, texts, groups, cfg.seq_len, exp.data_seed)
    return Workspace(exp, root, root / "parent.safetensors", parent_digest, root / "tokenizer.json",
                     root / "head.safetensors", root / "tail_init.safetensors", tuple(mbs), root / "packets")


def read_tensors(path: Path) -> tuple[dict, str]:
    """Read once; hash and parse the same bytes."""
    data, digest = read_hashed(path)
    return st_load(data), digest


def read_tokenizer_digest(path: Path) -> str:
    return read_hashed(path)[1]
