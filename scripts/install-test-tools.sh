#!/bin/sh
# Install the non-Python tools the test suite uses, idempotently:
#   bubblewrap (Debian)                 the harness jail
#   @mariozechner/pi-coding-agent (npm) the external agent executor, into .tools/
#   @openai/codex, @anthropic-ai/claude-code (npm)  the agent CLIs run through the proxy (tests/proxy_clis), into .tools/
#   libseccomp2 (Debian)                the jail's syscall filter
#   verl, openrlhf (PyPI, --no-deps)    the reward-calling code of two RL trainers (tests/rewards)
#   deepeval (PyPI), in .tools/deepeval-venv  DeepEval's own venv for tests/integrations/deepeval_cases
#                                       (--system-site-packages: it sees this veriscale and llama-cpp-python;
#                                       deepeval's rich<15, click<8.4 and pytest plugins stay inside it)
#   openai 3.x (PyPI), in .tools/inspect-venv  for Inspect's own OpenAI-compatible providers
#                                       (tests/integrations/test_inspect_provider.py; --system-site-packages:
#                                       it sees this Inspect and veriscale; the main environment keeps openai<3)
#   a user veriscale-ci + a venv        the unprivileged pass of the jail suites (root only)
# and it checks that the installed llama-cpp-python evaluates on this CPU (rebuilding it
# portably, without -march=native, when the build dies with SIGILL).
set -eu
cd "$(dirname "$0")/.."

# A llama.cpp compiled with -march=native on one CPU, or using instructions a sandbox traps (AMX
# tiles on some virtual machines), loads and then dies with SIGILL at its first evaluation.
if ! python scripts/probe-llama-build.py >/dev/null 2>&1; then
  echo "llama-cpp-python does not evaluate on this CPU: rebuilding it without -march=native (about 5 minutes)"
  LLAMA_VERSION=$(python -c "from importlib.metadata import version; print(version('llama-cpp-python'))")
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
    python -m pip install -q --disable-pip-version-check --no-cache-dir --force-reinstall --no-deps "llama-cpp-python==$LLAMA_VERSION"
  python scripts/probe-llama-build.py
fi

missing=""
while read -r pkg; do
  [ -z "$pkg" ] && continue
  dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done < .ci/apt-packages.txt
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

PI_VERSION=0.73.1
if [ ! -f .tools/node_modules/@mariozechner/pi-coding-agent/package.json ] || \
   ! grep -q "\"version\": \"$PI_VERSION\"" .tools/node_modules/@mariozechner/pi-coding-agent/package.json; then
  npm install --silent --no-audit --no-fund --prefix .tools "@mariozechner/pi-coding-agent@$PI_VERSION"
fi

# Codex CLI and Claude Code, pinned. Each brings its native binary as an optional dependency for
# this platform (@openai/codex-linux-x64, @anthropic-ai/claude-code-linux-x64); claude-code's
# postinstall links it over its bin/claude.exe stub, so scripts must run and optional deps must not
# be omitted. Nothing is downloaded when they run. Checked by running each binary's --version
# (CODEX_HOME pointing nowhere: codex then writes no ~/.codex).
CODEX_VERSION=0.171.0
CLAUDE_CODE_VERSION=2.1.332
if [ "$(CODEX_HOME=/nonexistent .tools/node_modules/.bin/codex --version 2>/dev/null)" != "codex-cli $CODEX_VERSION" ] || \
   [ "$(.tools/node_modules/.bin/claude --version 2>/dev/null)" != "$CLAUDE_CODE_VERSION (Claude Code)" ]; then
  npm install --silent --no-audit --no-fund --save-exact --include=optional --prefix .tools \
    "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"
fi

# veRL and OpenRLHF pin GPU stacks (vLLM, DeepSpeed, flash-attn) that do not install on a CPU
# machine; the tests import only the modules that call reward functions, whose imports the
# [test] extra provides.
python -c "from importlib.metadata import version as v; assert (v('verl'), v('openrlhf')) == ('0.9.1', '0.11.2')" \
  >/dev/null 2>&1 || python -m pip install -q --disable-pip-version-check --no-deps verl==0.9.1 openrlhf==0.11.2

# DeepEval pins rich<15 and click<8.4 (this project's CLI runs on rich 15 and click 8.5) and brings
# pytest plugins (asyncio, xdist, repeat, rerunfailures), so it gets a venv of its own that sees the
# main environment's packages (veriscale's editable install, llama-cpp-python) through
# --system-site-packages while its pins shadow them only inside. tests/integrations/test_deepeval_metric.py
# runs tests/integrations/deepeval_cases with its python. Checked: the venv imports both, and the
# main python still has rich 15 or later. (Imports run in a scratch folder: DeepEval makes .deepeval/ there.)
DEEPEVAL_VERSION=4.3.1
DEEPEVAL_VENV="$(pwd)/.tools/deepeval-venv"
deepeval_probe=$(mktemp -d)
if ! (cd "$deepeval_probe" && DEEPEVAL_TELEMETRY_OPT_OUT=YES "$DEEPEVAL_VENV/bin/python" -c \
      "import veriscale, deepeval; from importlib.metadata import version; assert version('deepeval') == '$DEEPEVAL_VERSION'" \
      >/dev/null 2>&1); then
  [ -x "$DEEPEVAL_VENV/bin/python" ] || python -m venv --system-site-packages "$DEEPEVAL_VENV"
  log=$(mktemp)
  "$DEEPEVAL_VENV/bin/python" -m pip install -q --disable-pip-version-check "deepeval==$DEEPEVAL_VERSION" >"$log" 2>&1 \
    || { cat "$log"; rm -f "$log"; exit 1; }
  rm -f "$log"
  (cd "$deepeval_probe" && DEEPEVAL_TELEMETRY_OPT_OUT=YES "$DEEPEVAL_VENV/bin/python" -c \
    "import veriscale, deepeval; from importlib.metadata import version; assert version('deepeval') == '$DEEPEVAL_VERSION'")
fi
rm -rf "$deepeval_probe"
python -c "from importlib.metadata import version; import sys; sys.exit(int(version('rich').split('.')[0]) < 15)" \
  || { echo "deepeval's rich<15 reached the main environment: reinstall rich>=15 there (pip install -U rich)"; exit 1; }

# Inspect's OpenAI-compatible providers (llama-cpp-python/..., openai-api/...) need openai 3.4 or
# later, and veriscale[rl]'s verifiers pins openai below 3, so docs/INTEGRATIONS.md's Inspect example
# runs in a venv that sees the main environment's Inspect and veriscale through
# --system-site-packages and holds only openai 3.x (and what that needs) of its own. Its bin/inspect
# is the main Inspect's console script run by the venv's python (pip writes no script for a
# package it sees installed outside the venv). tests/integrations/test_inspect_provider.py puts that
# bin first on PATH. Checked: the venv imports veriscale and Inspect's openai provider with this
# openai, its inspect runs, and the main python still has openai below 3.
INSPECT_OPENAI_VERSION=3.63.0
INSPECT_VENV="$(pwd)/.tools/inspect-venv"
inspect_probe="import veriscale, inspect_ai, openai; from importlib.metadata import version; \
assert version('openai') == '$INSPECT_OPENAI_VERSION'; \
from inspect_ai.model._providers.providers import validate_openai_client; validate_openai_client('probe'); \
from inspect_ai.model._providers.llama_cpp_python import LlamaCppPythonAPI"
if ! "$INSPECT_VENV/bin/python" -c "$inspect_probe" >/dev/null 2>&1 || \
   ! "$INSPECT_VENV/bin/inspect" --version >/dev/null 2>&1; then
  [ -x "$INSPECT_VENV/bin/python" ] || python -m venv --system-site-packages "$INSPECT_VENV"
  log=$(mktemp)
  "$INSPECT_VENV/bin/python" -m pip install -q --disable-pip-version-check "openai==$INSPECT_OPENAI_VERSION" >"$log" 2>&1 \
    || { cat "$log"; rm -f "$log"; exit 1; }
  rm -f "$log"
  printf '#!%s\nimport sys\nfrom inspect_ai._cli.main import main\nsys.exit(main())\n' "$INSPECT_VENV/bin/python" \
    >"$INSPECT_VENV/bin/inspect"
  chmod 755 "$INSPECT_VENV/bin/inspect"
  "$INSPECT_VENV/bin/python" -c "$inspect_probe"
  "$INSPECT_VENV/bin/inspect" --version >/dev/null
fi
python -c "from importlib.metadata import version; import sys; sys.exit(int(version('openai').split('.')[0]) >= 3)" \
  || { echo "openai 3.x reached the main environment (veriscale[rl]'s verifiers needs openai<3): pip install 'openai<3' there"; exit 1; }

# Root only: an unprivileged user and a Python it can reach, so the jail suites run a second
# time as a normal user (tests/harness/test_unprivileged_pass.py). /usr/bin/python3 is used
# because the interpreter that runs the tests may live below /root, which that user cannot enter.
if [ "$(id -u)" -eq 0 ]; then
  CI_USER=veriscale-ci
  id "$CI_USER" >/dev/null 2>&1 || useradd --create-home --home-dir "/home/$CI_USER" --shell /bin/sh "$CI_USER"
  VENV="/home/$CI_USER/venv"
  [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
  log=$(mktemp)
  "$VENV/bin/pip" install -q --disable-pip-version-check -r .ci/unprivileged-requirements.txt >"$log" 2>&1 \
    || { cat "$log"; rm -f "$log"; exit 1; }
  rm -f "$log"
fi
