#!/usr/bin/env bash
# Runs the e2e suite: installs kubectl and the venv (idempotent), then pytest.
# Extra arguments go to pytest (e.g. -k watch, -x). See e2e/README.md for the
# modes (stand-in, REGROUP_E2E_KUBECONFIG, REGROUP_E2E_DIRECT).
set -euo pipefail
E2E="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$E2E/install.sh"
cd "$E2E/.."
exec "$E2E/.venv/bin/python" -m pytest e2e/tests -v "$@"
