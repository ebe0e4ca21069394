#!/usr/bin/env bash
# Installs the four agent CLIs that `cargo test -p bashd-tests --test agents` drives, at the
# versions its results in docs/AGENTS.md were measured with, into a cache outside the repo
# (BASHD_AGENTS_DIR, default ~/.cache/bashd-agents). Needs npm and the npm registry; the
# suite itself runs offline against its fake model.
set -euo pipefail

dir="${BASHD_AGENTS_DIR:-$HOME/.cache/bashd-agents}"
pins=(
  "@anthropic-ai/claude-code@2.1.332"
  "@openai/codex@0.169.0"
  "@google/gemini-cli@0.61.0"
  "opencode-ai@1.18.33"
)

mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"bashd-agents","private":true}' >package.json
# --save-exact keeps the pins in the cache's package.json, so a rerun is a no-op.
npm install --no-audit --no-fund --save-exact "${pins[@]}"
for bin in claude codex gemini opencode; do
  [ -x "node_modules/.bin/$bin" ] || { echo "install.sh: $bin is missing from $dir/node_modules/.bin" >&2; exit 1; }
done
echo "agents installed in $dir/node_modules/.bin"
