"""Fine-tuning the bi-encoder on a forum's pairs, with torch and transformers (the ``train`` extra).

Serving stays torch-free: torch is imported only while training, and what this writes is a
sentence-transformers folder (weights, tokenizer, pooling) that the torch-free exporter turns into
ONNX (:func:`models.prepare.prepare_model`).

The loss is the symmetric in-batch softmax (multiple negatives ranking, both ways): each
question against every passage of its batch, and each passage against every question, at a
temperature of 1/:attr:`EmbedTrainConfig.scale`. Hard negatives, when mined, join the passages.
The model is embedded exactly as it will be served: the serving tokenizer's token ids
(:class:`models.tokenization.TextTokenizer`), the init's pooling, normalisation and prefixes.
After training, the weights may be mixed with the init's (``mix``: a share of the tuned weights,
the rest the init's), which keeps more of what the base model knew where the forum is small.
"""

from __future__ import annotations

import logging
import random
import resource
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from models.metadata import copy_metadata, describe_model
from models.tokenization import TextTokenizer, pad_batch
from sidecar.errors import ConfigurationError
from sidecar.training.embed_pairs import EmbedPair, batches

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbedTrainConfig:
    """What to train from, and how."""

    init: Path  # a Hugging Face / sentence-transformers folder of the base encoder
    max_length: int = 128  # tokens per text, special tokens included
    epochs: float = 1.0
    batch_size: int = 32
    lr: float = 2e-5
    warmup_steps: int = 30
    scale: float = 20.0  # 1 / temperature of the in-batch softmax
    mix: float = 1.0  # share of the tuned weights in the result (1: the tuned model alone)
    budget_s: float | None = None  # stop when this much time has passed
    seed: int = 0
    device: str = "cpu"
    threads: int = 0  # torch's intra-op threads (0: its default)


@dataclass(frozen=True)
class EmbedTrained:
    """A trained checkpoint and how training went."""

    directory: Path
    pairs_seen: int
    steps: int
    seconds: float
    stopped_by: str  # "epochs" or "budget"
    loss_first: float
    loss_last: float
    pairs_per_s: float
    peak_rss_mb: float

    def as_dict(self) -> dict[str, Any]:
        """JSON record (the manifest's ``training.run``)."""
        return {"pairs_seen": self.pairs_seen, "steps": self.steps,
                "seconds": round(self.seconds, 1), "stopped_by": self.stopped_by,
                "loss_first": round(self.loss_first, 4), "loss_last": round(self.loss_last, 4),
                "pairs_per_s": round(self.pairs_per_s, 2),
                "peak_rss_mb": round(self.peak_rss_mb)}


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (Linux: KiB in ru_maxrss)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train_embedder(pairs: Sequence[EmbedPair], config: EmbedTrainConfig, out: Path, *,
                   progress: bool = True) -> EmbedTrained:
    """Fine-tune ``config.init`` on ``pairs``; write a sentence-transformers folder to ``out``.

    Stops after ``config.epochs`` or ``config.budget_s``, whichever comes first.
    """
    try:
        # The train extra: heavy and optional, so imported only when a model is trained.
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise ConfigurationError("training needs torch and transformers: pip install "
                                 "'forum-rag-sidecar[train]' (docs/models.md)") from exc
    if len(pairs) < 2:
        raise ValueError("at least two pairs are needed (in-batch negatives)")
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    meta = describe_model(config.init, "embed", None)
    tokenizer = TextTokenizer.from_dir(config.init, min(config.max_length, meta["max_length"]))
    model = AutoModel.from_pretrained(config.init).to(config.device)
    base = {k: v.detach().clone() for k, v in model.state_dict().items()} \
        if config.mix < 1.0 else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    plan = batches(pairs, config.batch_size, config.epochs, random.Random(config.seed))
    warmup = max(1, min(config.warmup_steps, len(plan) // 5))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup)
        * max(0.0, (len(plan) - s) / max(1, len(plan) - warmup)))
    encoder = _Encoder(torch, model, tokenizer, meta, config.device)
    started = time.monotonic()
    losses: list[float] = []
    seen = 0
    stopped_by = "epochs"
    model.train()
    bar = tqdm(plan, desc="training the embedder", unit="batch", disable=not progress)
    for step, batch in enumerate(bar):
        queries = encoder.encode([p.query for p in batch], "query")
        negatives = [n for p in batch for n in p.negatives]
        passages = encoder.encode([p.positive for p in batch] + negatives, "passage")
        scores = queries @ passages.T * config.scale
        target = torch.arange(len(batch), device=config.device)
        loss = torch.nn.functional.cross_entropy(scores, target)
        # The other way round: each passage picks its question among the batch's.
        loss = (loss + torch.nn.functional.cross_entropy(scores[:, : len(batch)].T, target)) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        seen += len(batch)
        losses.append(float(loss.item()))
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}", pairs=seen)
        if config.budget_s is not None and time.monotonic() - started > config.budget_s:
            stopped_by = "budget"
            log.info("training stopped by its budget after %d of %d steps", step + 1, len(plan))
            break
    bar.close()
    seconds = time.monotonic() - started
    if base is not None:
        mix_weights(torch, model, base, config.mix)
    _save(model, config.init, out)
    window = max(1, min(20, len(losses) // 5))
    return EmbedTrained(directory=out, pairs_seen=seen, steps=len(losses), seconds=seconds,
                        stopped_by=stopped_by, loss_first=float(np.mean(losses[:window])),
                        loss_last=float(np.mean(losses[-window:])),
                        pairs_per_s=seen / max(seconds, 1e-9), peak_rss_mb=peak_rss_mb())


def mix_weights(torch: Any, model: Any, base: dict[str, Any], share: float) -> None:
    """``share`` x the tuned weights + (1 - share) x the base's, in place (floating ones)."""
    with torch.no_grad():
        for name, value in model.state_dict().items():
            if value.dtype.is_floating_point:
                value.copy_(share * value + (1.0 - share) * base[name].to(value.device))


class _Encoder:
    """Texts to pooled (and normalised) embeddings, as the ONNX embedder computes them."""

    def __init__(self, torch: Any, model: Any, tokenizer: TextTokenizer, meta: dict[str, Any],
                 device: str) -> None:
        self.torch, self.model, self.tokenizer, self.device = torch, model, tokenizer, device
        self.pooling = str(meta["pooling"])
        self.normalize = bool(meta["normalize"])
        self.prefix = {"query": str(meta["query_prefix"]), "passage": str(meta["passage_prefix"])}
        self.types = int(getattr(model.config, "type_vocab_size", 1)) > 1

    def encode(self, texts: Sequence[str], kind: str) -> Any:
        torch, prefix = self.torch, self.prefix[kind]
        ids = self.tokenizer.encode_batch([prefix + t for t in texts] if prefix else texts)
        padded = pad_batch(ids, self.tokenizer.pad_id)
        mask = torch.from_numpy(padded.attention_mask).to(self.device)
        inputs = {"input_ids": torch.from_numpy(padded.input_ids).to(self.device),
                  "attention_mask": mask}
        if self.types:
            inputs["token_type_ids"] = torch.from_numpy(padded.token_type_ids).to(self.device)
        hidden = self.model(**inputs).last_hidden_state
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled


def _save(model: Any, init: Path, out: Path) -> None:
    """The weights, and the init's tokenizer and sentence-transformers files (pooling,
    prefixes, the served maximum length: training at fewer tokens still serves whole posts)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.save_pretrained(out, safe_serialization=True)
    copy_metadata(init, out)

