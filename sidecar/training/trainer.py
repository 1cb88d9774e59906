"""Training a cross-encoder on mined pairs, with torch and transformers (the ``train`` extra).

Serving stays torch-free: this module imports torch only when it trains, and what it writes is a
Hugging Face checkpoint that the torch-free exporter turns into ONNX
(:mod:`sidecar.training.export`).

Initialised from an encoder (the installed embedder's, all-MiniLM-L6-v2 by default), the model
learns a *demotion* of the cosine: each pair is scored ``cosine * a + b + log(sigmoid(logit))``
(:class:`Residual`, ``a`` and ``b`` fitted on the pairs first). The new classification head starts
with zero weights and a bias of :data:`HEAD_START`, a fair "answers", so step 0 orders as the bi-
encoder does and training only learns which close posts do not answer. Initialised from a cross-
encoder (mmarco, a bge reranker), its own head is kept and it is fine-tuned as it is (no residual).

Pairs are encoded by the serving tokenizer (:class:`models.tokenization.TextTokenizer`), so the
model trains on exactly the token ids ONNX Runtime will see. sentence-transformers' trainer is not
used: the residual needs a per-pair offset in the loss, which its losses do not take.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from models.tokenization import TextTokenizer, pad_batch
from sidecar.core.rerank_score import Residual
from sidecar.errors import ConfigurationError
from sidecar.training.mining import Pair

log = logging.getLogger(__name__)

# The new head's starting logit. Every pair starts lowered by the same log(sigmoid(2)) = -0.13,
# so the order is the cosine's; a surer start (6: -0.0025) would leave the head almost no
# gradient (sigmoid(-6) = 0.0025) to learn from.
HEAD_START = 2.0

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.txt", "sentencepiece.bpe.model")


@dataclass(frozen=True)
class TrainConfig:
    """What to train from and how long."""

    init: Path  # a Hugging Face folder: an encoder, or a cross-encoder to fine-tune
    max_length: int = 160  # tokens of question + post, special tokens included
    epochs: float = 1.0
    batch_size: int = 16
    lr: float = 5e-5  # the encoder's learning rate
    head_lr: float = 1e-3  # the new head's
    budget_s: float | None = None  # stop when this much time has passed
    seed: int = 0
    threads: int = 0  # torch's intra-op threads (0: its default)


@dataclass(frozen=True)
class Trained:
    """A trained checkpoint and how training went."""

    directory: Path
    residual: Residual | None
    pairs_seen: int
    steps: int
    seconds: float
    stopped_by: str  # "epochs" or "budget"
    loss_first: float
    loss_last: float

    def as_dict(self) -> dict[str, Any]:
        """JSON record (the manifest's ``training.run``)."""
        return {"pairs_seen": self.pairs_seen, "steps": self.steps,
                "seconds": round(self.seconds, 1), "stopped_by": self.stopped_by,
                "loss_first": round(self.loss_first, 4), "loss_last": round(self.loss_last, 4)}


def fit_residual(pairs: Sequence[Pair], model: str, strategy: int) -> Residual:
    """``label ~ cosine * a + b`` by logistic regression on the pairs: the cosine's own opinion,
    which the cross-encoder then corrects."""
    # heavy dependency: scikit-learn (a base one) is imported only while training
    from sklearn.linear_model import LogisticRegression

    labels = {p.label for p in pairs}
    if labels != {0.0, 1.0}:
        raise ValueError("the pairs need both labels to fit the cosine's residual")
    cos = np.array([[p.cosine] for p in pairs], dtype=np.float64)
    fit = LogisticRegression(C=100.0).fit(cos, [p.label for p in pairs])
    return Residual(model=model, strategy=strategy, cosine_weight=float(fit.coef_[0, 0]),
                    bias=float(fit.intercept_[0]))


def train(pairs: Sequence[Pair], config: TrainConfig, out: Path, *, residual: Residual | None,
          progress: bool = True) -> Trained:
    """Train on ``pairs`` and write the checkpoint (with the init's tokenizer files) to ``out``,
    a new folder (FileExistsError when anything is there).

    ``residual``: the cosine to correct (an encoder init); None fine-tunes a cross-encoder's own
    score. Stops after ``config.epochs`` or ``config.budget_s``, whichever comes first.
    """
    try:
        # The train extra: heavy and optional, so imported only when a model is trained.
        import torch
        from transformers import AutoModelForSequenceClassification
    except ImportError as exc:
        raise ConfigurationError("training needs torch and transformers: pip install "
                                 "'forum-rag-sidecar[train]' (docs/models.md)") from exc
    if not pairs:
        raise ValueError("no pairs to train on")
    # Claimed before anything is trained: a folder that is there already (files, a link planted
    # in it) never mixes into the checkpoint (FileExistsError).
    out.mkdir(parents=True)
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    rng = random.Random(config.seed)
    tokenizer = TextTokenizer.from_dir(config.init, config.max_length)
    model = AutoModelForSequenceClassification.from_pretrained(config.init, num_labels=1)
    head_names = {n for n, _ in model.named_parameters() if n.startswith(("classifier", "score"))}
    if residual is not None:
        for name, param in model.named_parameters():
            if name in head_names:  # step 0 scores like the cosine
                torch.nn.init.zeros_(param)
                if name.endswith("bias"):
                    torch.nn.init.constant_(param, HEAD_START)
    embeddings = model.get_input_embeddings()
    embeddings.weight.requires_grad_(False)  # half of MiniLM's weights; the vocabulary stays
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in params if n not in head_names], "lr": config.lr},
         {"params": [p for n, p in params if n in head_names], "lr": config.head_lr}],
        weight_decay=0.01)
    batches = _batches(pairs, config.batch_size, config.epochs, rng)
    warmup = max(1, len(batches) // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup)
                                                 * max(0.0, (len(batches) - s)
                                                       / max(1, len(batches) - warmup)))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    types = int(getattr(model.config, "type_vocab_size", 1)) > 1
    started = time.monotonic()
    losses: list[float] = []
    seen = 0
    stopped_by = "epochs"
    model.train()
    bar = tqdm(batches, desc="training", unit="batch", disable=not progress)
    for step, batch in enumerate(bar):
        logits = model(**_inputs(torch, tokenizer, batch, types)).logits[:, 0]
        if residual is not None:  # as Residual.score: the prior, demoted
            prior = torch.tensor([residual.prior(p.cosine) for p in batch])
            logits = prior + torch.nn.functional.logsigmoid(logits)
        loss = loss_fn(logits, torch.tensor([p.label for p in batch]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        seen += len(batch)
        losses.append(float(loss.item()))
        bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}", pairs=seen)
        if config.budget_s is not None and time.monotonic() - started > config.budget_s:
            stopped_by = "budget"
            log.info("training stopped by its budget after %d of %d steps", step + 1,
                     len(batches))
            break
    bar.close()
    model.save_pretrained(out)
    _copy_tokenizer(config.init, out, config.max_length)
    window = max(1, min(50, len(losses) // 5))
    return Trained(directory=out, residual=residual, pairs_seen=seen, steps=len(losses),
                   seconds=time.monotonic() - started, stopped_by=stopped_by,
                   loss_first=float(np.mean(losses[:window])),
                   loss_last=float(np.mean(losses[-window:])))


def _batches(pairs: Sequence[Pair], size: int, epochs: float, rng: random.Random
             ) -> list[list[Pair]]:
    """Shuffled batches of pairs of similar length (less padding), for ``epochs`` epochs."""
    out: list[list[Pair]] = []
    total = math.ceil(len(pairs) * epochs / size)
    while len(out) < total:
        order = list(pairs)
        rng.shuffle(order)
        chunk = size * 50
        epoch: list[list[Pair]] = []
        for i in range(0, len(order), chunk):
            part = sorted(order[i:i + chunk], key=lambda p: len(p.question) + len(p.passage))
            epoch += [part[j:j + size] for j in range(0, len(part), size)]
        rng.shuffle(epoch)
        out += epoch
    return out[:total]


def _inputs(torch: Any, tokenizer: TextTokenizer, batch: Sequence[Pair], types: bool
            ) -> dict[str, Any]:
    """The model's inputs for a batch, padded as ONNX Runtime's are (models.tokenization)."""
    encoded = [tokenizer.encode_pairs(p.question, [p.passage])[0] for p in batch]
    padded = pad_batch([ids for ids, _ in encoded], tokenizer.pad_id, [t for _, t in encoded])
    inputs = {"input_ids": torch.from_numpy(padded.input_ids),
              "attention_mask": torch.from_numpy(padded.attention_mask)}
    if types:  # XLM-RoBERTa (mmarco) has a single token type
        inputs["token_type_ids"] = torch.from_numpy(padded.token_type_ids)
    return inputs


def _copy_tokenizer(init: Path, out: Path, max_length: int) -> None:
    """The init's tokenizer files, and the maximum length the model was trained at (read back
    by the exporter as the model's ``max_length``)."""
    for name in TOKENIZER_FILES:
        if (init / name).is_file():
            (out / name).write_bytes((init / name).read_bytes())
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_length, "do_lower_case": False}), encoding="utf-8")
