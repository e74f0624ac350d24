#!/usr/bin/env bash
# The gates every commit passes (CI runs them before the tests): ruff lint and format, mypy on
# gateway/, and the import-linter contracts that write the architecture down (pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
"$bin"/ruff check gateway tests scripts
"$bin"/ruff format --check gateway tests scripts
"$bin"/mypy
"$bin"/lint-imports
